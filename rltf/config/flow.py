"""The ``flow:`` section of a run config: which agent flows to evaluate on the travel sandbox, on
which backend, with which settings (:mod:`rltf.flows.evaluate` reads it).

::

    flow:
      enabled: true             # train/evaluate.py runs the flows (python -m rltf.flows.evaluate always does)
      methods: [mtp]            # any of mtp, okr, react, flat (one table row each)
      backend:
        kind: planner           # planner (rltf's planner, constrained) | hf | openai
        checkpoint: null        # planner: a saved (warm-started) planner dir; null: the planner: section
      splits: [test]
      limit: 10                 # N queries of the splits (null: all), evenly spaced (select: spread) or the first
      trace_queries: 3          # traces written for the first N queries of each method
      mtp: {max_options: 8, supervisor: template}
      okr: {levels: 2, rounds: 2, criteria: evaluator}
      react: {max_steps: 12, think_tokens: 0}

Plain dataclasses (no torch), so a config validates and a dry run lists everything without loading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

from envs.config_fields import bound_errors, num

METHODS = ("mtp", "okr", "react", "flat")
BACKEND_KINDS = ("planner", "hf", "openai")
EVAL_SPLITS = ("train", "validation", "test")


class FlowSettingsError(ValueError):
    """A ``flow:`` section that cannot run; the message names the key."""


@dataclass
class FlowBackendSettings:
    """The backend every node of the flows queries (:func:`rltf.flows.make_backend`)."""

    kind: Literal["planner", "hf", "openai"] = "planner"
    checkpoint: Optional[str] = None  # planner: a saved planner directory; null: built / loaded from `planner:`
    model: Optional[str] = None  # hf: a model id (local cache) or directory; openai: the served model's name
    base_url: Optional[str] = None  # openai: e.g. http://127.0.0.1:8000/v1 (null: the OpenAI API)
    api_key_env: str = "OPENAI_API_KEY"  # openai: the environment variable holding the key
    device: str = "cpu"  # hf: cpu, cuda, cuda:0, ...
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"  # hf
    chat_template: Literal["auto", "on", "off"] = "off"  # hf/planner: render messages with the tokenizer's template
    batch_size: int = num(16, gt=0)
    seed: int = num(0, ge=0)
    max_new_tokens: int = num(256, gt=0)  # free-text nodes (supervisor / criteria / think / openai answers)
    do_sample: bool = False  # greedy by default: an evaluation
    temperature: float = num(1.0, gt=0)
    timeout: float = num(120.0, gt=0)  # openai
    max_concurrency: int = num(4, gt=0)  # openai
    logprobs: bool = False  # openai: ask the endpoint for token log-probs
    torch_threads: int = num(1, ge=0)  # CPU threads for torch in `python -m rltf.flows.evaluate` (0: torch's
    # default); a small planner decodes one node at a time and is fastest on one thread

    def backend_config(self) -> dict:
        """The mapping :func:`rltf.flows.make_backend` takes (planner: without the planner object)."""
        sampling = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample,
                    "temperature": self.temperature}
        template = {"auto": "auto", "on": True, "off": False}[self.chat_template]
        if self.kind == "planner":
            return {"kind": "planner", "seed": self.seed, "chat_template": template, "batch_size": self.batch_size,
                    "sampling": sampling}
        if self.kind == "hf":
            return {"kind": "hf", "model": self.model, "device": self.device, "dtype": self.dtype, "seed": self.seed,
                    "chat_template": template, "batch_size": self.batch_size, "sampling": sampling}
        return {"kind": "openai", "model": self.model, "base_url": self.base_url, "api_key_env": self.api_key_env,
                "timeout": self.timeout, "max_concurrency": self.max_concurrency, "logprobs": self.logprobs,
                "seed": self.seed, "sampling": sampling}


@dataclass
class MTPSettings:
    """Meta-Task Planning (:mod:`rltf.flows.agents.mtp`)."""

    max_options: int = num(8, gt=0)  # options an executor shows (cheapest first, after its local constraints)
    supervisor: Literal["template", "model"] = "template"  # template: rewrite from the predecessors' outcomes;
    # model: a free-text supervisor node rewrites each meta-task (an LLM backend)
    supervisor_tokens: int = num(96, gt=0)
    cost_hints: bool = True  # the manager's options show what the cheapest trip through them costs (the
    # sandbox's prices): without them the route / schedule / transport choice, which decides the budget, is blind
    # the manager's route / schedule options with cost hints: cheapest trip first, the first N (0: all, in
    # the sandbox's order). Unsorted, 2-3-city routes are 12-20 options in permutation order: the prompt
    # outgrows a small planner's context and the cheap routes hide among ones the budget rules out
    manager_options: int = num(0, ge=0)


@dataclass
class OKRSettings:
    """OKR-Agent (:mod:`rltf.flows.agents.okr`)."""

    levels: int = num(2, ge=1, le=3)  # 1: objectives; 2: + key results; 3: + a key result per day
    rounds: int = num(2, ge=1)  # refinement rounds (the best-scored version is kept)
    max_options: int = num(8, gt=0)
    max_revisions: int = num(3, ge=0)  # slots an agent revises after one review
    criteria: Literal["evaluator", "model"] = "evaluator"  # evaluator: the sandbox's named constraints;
    # model: natural-language criteria written and judged by the model (an LLM backend)
    criterion_tokens: int = num(64, gt=0)


@dataclass
class ReActSettings:
    """ReAct (:mod:`rltf.flows.agents.react`)."""

    max_steps: int = num(12, gt=0)  # think / act / observe steps before the plan is written
    think_tokens: int = num(0, ge=0)  # 0: no thought nodes (offline); else a free-text thought per step
    observations: int = num(3, ge=0)  # most recent observations shown to the next step
    observation_chars: int = num(400, gt=0)


@dataclass
class FlowSettings:
    # train/evaluate.py evaluates these flows instead of the planner's schemas (python -m rltf.flows.evaluate
    # always does); the shipped travel-<method>*.yaml configs set it
    enabled: bool = False
    methods: list[str] = field(default_factory=lambda: ["mtp"])  # table rows, in order
    backend: FlowBackendSettings = field(default_factory=FlowBackendSettings)
    splits: list[str] = field(default_factory=lambda: ["test"])
    limit: Optional[int] = None  # N queries of the splits (null: all)
    select: Literal["spread", "first"] = "spread"  # which N: evenly spaced over the splits (days and levels mixed) or the first
    days: Optional[list[int]] = None  # keep only queries of these lengths (null: env.travel.days)
    trace_queries: int = num(3, ge=0)  # traces written for the first N queries of each method
    max_attempts: int = num(3, gt=0)  # per node (a free-text answer that does not parse is asked again)
    oracle: bool = True  # add the exact solver's row (no model)
    system_prompts: bool = False  # a role system message per node (LLM backends; the planner reads only the task)
    mtp: MTPSettings = field(default_factory=MTPSettings)
    okr: OKRSettings = field(default_factory=OKRSettings)
    react: ReActSettings = field(default_factory=ReActSettings)
    # training (train/rltf.py with flow.enabled: warm start on the solver's choices -> RLTF on the flow)
    credit: Literal["global", "local+global"] = "global"  # global: every decision gets its trajectory's
    # advantage; local+global: an MTP executor decision also gets its meta-task's local-constraint result
    local_weight: float = num(1.0, ge=0)  # the weight of the local term under local+global credit
    roles: Literal["shared", "lora"] = "shared"  # shared: one planner for every role (the role is in its
    # prompt); lora: a LoRA adapter per role on one base model, trained together

    def validate(self, section: str = "flow") -> None:
        for message in bound_errors(self, f"{section}."):
            raise FlowSettingsError(message)
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            raise FlowSettingsError(f"bad value for '{section}.methods': {list(self.methods)!r}; expected a non-empty "
                                    f"list drawn from {list(METHODS)}")
        bad = [s for s in self.splits if s not in EVAL_SPLITS]
        if bad or not self.splits:
            raise FlowSettingsError(f"bad value for '{section}.splits': {list(self.splits)!r}; expected a non-empty "
                                    f"list drawn from {list(EVAL_SPLITS)}")
        if self.limit is not None and self.limit < 1:
            raise FlowSettingsError(f"bad value for '{section}.limit': {self.limit!r}; expected null or >= 1")
        if self.days is not None and (not self.days or any(d not in (3, 5, 7) for d in self.days)):
            raise FlowSettingsError(f"bad value for '{section}.days': {self.days!r}; expected null or a list of 3, 5, 7")
        b = self.backend
        if b.kind in ("hf", "openai") and not b.model:
            raise FlowSettingsError(f"'{section}.backend.model' is needed for the {b.kind} backend "
                                    "(hf: a model id or directory; openai: the served model's name)")
        if b.kind != "planner" and b.checkpoint:
            raise FlowSettingsError(f"'{section}.backend.checkpoint' is for the planner backend, not {b.kind}")
