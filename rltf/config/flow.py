"""The ``flow:`` section of a run config: which agent flows to evaluate on the travel sandbox, on
which backend, with which settings (:mod:`rltf.flows.evaluate` reads it).

::

    flow:
      enabled: true             # train/evaluate.py runs the flows (python -m rltf.flows.evaluate always does)
      methods: [mtp]            # any of mtp, okr, react, flat (one table row each)
      backend:
        kind: planner           # planner (rltf's planner, constrained) | hf | openai | rule (no model)
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

from common.config_fields import bound_errors, num
from common.errors import UserError
from rltf.algorithms.credit import CREDITS

METHODS = ("mtp", "okr", "react", "flat")  # the travel env's (its flow domain checks the names a run gives)
BACKEND_KINDS = ("planner", "hf", "openai", "rule")  # rltf.flows.backends.KINDS' names (a test checks they agree)
EVAL_SPLITS = ("train", "validation", "test")


class FlowSettingsError(UserError, ValueError):
    """A ``flow:`` section that cannot run; the message names the key."""


@dataclass
class FlowBackendSettings:
    """The backend every node of the flows queries (:func:`rltf.flows.make_backend`)."""

    kind: Literal[BACKEND_KINDS] = "planner"
    """planner: rltf's planner (the one train/rltf.py trains), decoding choices under their grammar;
    hf: a transformers model in this process; openai: an OpenAI-compatible HTTP endpoint (e.g. a
    vLLM server), which cannot take a grammar; rule: no model, the cheapest option shown of every choice (and
    the empty answer to free text): a scaffold's no-model baseline (rltf/flows/backends/rule.py)."""
    checkpoint: Optional[str] = None
    """planner only: a saved (e.g. warm-started) planner directory to load; null: the planner is
    built or loaded from the planner: section."""
    model: Optional[str] = None
    """hf: a model id (read from the local cache) or a model directory; openai: the served model's
    name. Needed by both."""
    base_url: Optional[str] = None
    """openai only: the endpoint's base URL, e.g. http://127.0.0.1:8000/v1; null: the OpenAI API."""
    api_key_env: str = "OPENAI_API_KEY"
    """openai only: the environment variable that holds the API key (the key never goes in a config)."""
    device: str = "cpu"
    """hf only: where the model runs: cpu, cuda, cuda:0, ..."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """hf only: the dtype the model's weights are loaded in."""
    chat_template: Literal["auto", "on", "off"] = "off"
    """hf and planner: render each node's messages with the tokenizer's chat template (on; refused
    when it has none), as plain text (off), or with the template when there is one (auto)."""
    batch_size: int = num(16, gt=0)
    """hf and planner: node prompts decoded together in one batch (free text and grammar choices
    each). planner: also how many flow passes (a step's K per query x queries, or the evaluation's
    queries) run together, their pending decisions decoded in one call (rltf/flows/engine/batching.py);
    each pass samples from its own seeded streams, so results do not depend on it; 1 = one pass at a
    time (the reference path of benchmarks/flow_step.py)."""
    seed: int = num(0, ge=0)
    """Seeds the backend's own sampling generator (openai: sent with each request)."""
    max_new_tokens: int = num(256, gt=0)
    """Longest free-text answer in tokens (supervisor, criteria and thought nodes; every openai answer)."""
    do_sample: bool = False
    """Sample the answers at temperature; false: greedy, as an evaluation should be."""
    temperature: float = num(1.0, gt=0)
    """Sampling temperature when do_sample is true."""
    timeout: float = num(20.0, gt=0)
    """openai only: seconds to wait for one request's answer (the connection itself: 10 s at most).
    With call_attempts 3 a server that hangs is reported after two queries, 2 x (3 x 20 + 3) s ~ 2
    minutes; raise it for a slow model or long answers."""
    call_attempts: int = num(3, gt=0)
    """Backend calls per node request before the node fails: a failed call (an error, a timeout) is
    retried after 1 s, 2 s, 4 s... Two queries in a row whose every call failed end the evaluation
    (the backend is down), however many were answered before."""
    max_failed_share: float = num(0.2, ge=0, le=1)
    """The share of a method's backend calls (retried ones included) that may fail; more ends the
    evaluation with one error line and exit status 2, after flow_eval.md / flow_eval.json are
    written with the failed queries marked (1: never)."""
    max_answer_chars: int = num(20000, gt=0)
    """openai only: an answer (or an error message) longer than this many characters is cut to it,
    so a server sending huge answers cannot fill the memory or the traces (each trace holds at most
    the answers and errors of its nodes' attempts)."""
    max_concurrency: int = num(4, gt=0)
    """openai only: requests in flight at once."""
    logprobs: bool = False
    """openai only: ask the endpoint for the answers' token log-probabilities."""
    torch_threads: int = num(1, ge=0)
    """CPU threads for torch in python -m rltf.flows.evaluate (0: torch's default); a small planner
    decodes one node at a time and is fastest on one thread."""

    def backend_config(self) -> dict:
        """The mapping :func:`rltf.flows.make_backend` takes (planner: without the planner object)."""
        sampling = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample,
                    "temperature": self.temperature}
        template = {"auto": "auto", "on": True, "off": False}[self.chat_template]
        if self.kind == "planner":
            return {"kind": "planner", "seed": self.seed, "chat_template": template, "batch_size": self.batch_size,
                    "sampling": sampling}
        if self.kind == "rule":
            return {"kind": "rule"}
        if self.kind == "hf":
            return {"kind": "hf", "model": self.model, "device": self.device, "dtype": self.dtype, "seed": self.seed,
                    "chat_template": template, "batch_size": self.batch_size, "sampling": sampling}
        return {"kind": "openai", "model": self.model, "base_url": self.base_url, "api_key_env": self.api_key_env,
                "timeout": self.timeout, "max_concurrency": self.max_concurrency, "logprobs": self.logprobs,
                "seed": self.seed, "sampling": sampling, "max_answer_chars": self.max_answer_chars}


@dataclass
class MTPSettings:
    """Meta-Task Planning (:mod:`rltf.flows.agents.mtp`)."""

    max_options: int = num(8, gt=0)
    """Options an executor node is shown for its slot: the cheapest first, after its meta-task's local
    constraints filter them."""
    supervisor: Literal["template", "model"] = "template"
    """template: each meta-task is rewritten from its predecessors' outcomes by a template; model: a
    free-text supervisor node rewrites it (an LLM backend)."""
    supervisor_tokens: int = num(96, gt=0)
    """supervisor: model only: the longest rewritten meta-task, in tokens."""
    cost_hints: bool = True
    """The manager's options show what the cheapest trip through them costs (the sandbox's prices);
    without them the route / schedule / transport choice, which decides the budget, is blind."""
    manager_options: int = num(0, ge=0)
    """With cost_hints, the manager is shown its route / schedule options cheapest trip first, the
    first N of them (0: all, in the sandbox's order). Unsorted, 2-3-city routes are 12-20 options in
    permutation order: the prompt outgrows a small planner's context and the cheap routes hide among
    ones the budget rules out."""


@dataclass
class OKRSettings:
    """OKR-Agent (:mod:`rltf.flows.agents.okr`)."""

    levels: int = num(2, ge=1, le=3)
    """Depth of the objective tree: 1: objectives; 2: and their key results; 3: and a key result per day."""
    rounds: int = num(2, ge=1)
    """Refinement rounds of review and revision (the best-scored version of the plan is kept)."""
    max_options: int = num(8, gt=0)
    """Options an agent node is shown per slot, and revise choices per review."""
    max_revisions: int = num(3, ge=0)
    """Slots an agent may revise after one review."""
    criteria: Literal["evaluator", "model"] = "evaluator"
    """evaluator: the reviews check the sandbox's named constraints; model: natural-language criteria
    written and judged by the model (an LLM backend)."""
    criterion_tokens: int = num(64, gt=0)
    """criteria: model only: the longest criterion or judgement the model writes, in tokens."""


@dataclass
class ReActSettings:
    """ReAct (:mod:`rltf.flows.agents.react`)."""

    max_steps: int = num(12, gt=0)
    """Think / act / observe steps before the plan is written."""
    think_tokens: int = num(0, ge=0)
    """Tokens of the free-text thought before each action; 0: no thought nodes (what an offline
    planner backend runs)."""
    observations: int = num(3, ge=0)
    """How many of the most recent observations the next step's prompt shows (0: none)."""
    observation_chars: int = num(400, gt=0)
    """Each observation shown to a step, and in the final plan's notes, is cut to this many characters."""


@dataclass
class FlowSettings:
    """Agent flows on the travel sandbox: which ones, on which backend, on which queries, and how
    train/rltf.py trains them (warm start on the solver's choices, then RLTF on the flow's decisions)."""

    enabled: bool = False
    """train/evaluate.py evaluates these flows instead of the planner's rows, and train/rltf.py trains
    a flow (python -m rltf.flows.evaluate always evaluates them); the travel-<method>*.yaml configs
    set it."""
    methods: list[str] = field(default_factory=lambda: ["mtp"])
    """The flows to run, one table row each in this order: any of mtp, okr, react, flat."""
    backend: FlowBackendSettings = field(default_factory=FlowBackendSettings)
    """The model every node of the flows queries."""
    splits: list[str] = field(default_factory=lambda: ["test"])
    """The travel splits whose queries are evaluated: any of train, validation, test (hub queries re-split:
    <hub split>:re-split:<part>, e.g. validation:re-split:test; the travel env's hub split names)."""
    limit: Optional[int] = None
    """Evaluate N queries of the splits (which ones: select); null: all of them."""
    select: Literal["spread", "first"] = "spread"
    """Which limit queries: evenly spaced over the splits (days and levels mixed), or the first ones."""
    days: Optional[list[int]] = None
    """Keep only queries of these trip lengths in days (any of 3, 5, 7); null: env.travel.days."""
    trace_queries: int = num(3, ge=0)
    """Write the node-by-node trace of the first N queries of each method (0: none)."""
    max_attempts: int = num(3, gt=0)
    """Times a node is asked before it fails: a free-text answer that does not parse is asked again."""
    oracle: bool = True
    """Add the exact solver's row to the table (no model)."""
    system_prompts: bool = False
    """Give each node a system message naming its role (LLM backends; the planner reads only the task)."""
    mtp: MTPSettings = field(default_factory=MTPSettings)
    """Meta-Task Planning's settings (methods: mtp)."""
    okr: OKRSettings = field(default_factory=OKRSettings)
    """OKR-Agent's settings (methods: okr)."""
    react: ReActSettings = field(default_factory=ReActSettings)
    """ReAct's settings (methods: react)."""
    credit: Literal[CREDITS.names()] = "global"
    """Training: global: every decision of a trajectory gets its advantage; local+global: an MTP
    executor decision also gets its meta-task's local-constraint result."""
    warm_start_queries: Optional[int] = None
    """Training: the warm start (the solver's decisions) runs on N train queries, evenly spaced (a large
    planner on a CPU); null: every train query. RLTF still draws from all of them."""
    local_weight: float = num(1.0, ge=0)
    """Training: the weight of the local term under credit: local+global."""
    roles: Literal["shared", "lora"] = "shared"
    """Training: shared: one planner plays every role (the role is in its prompt); lora: a LoRA
    adapter per role on one base model, trained together (needs planner.lora.enabled)."""
    score_batch: Optional[int] = None
    """Training: the most decisions re-scored in one forward pass. null: every decision of a step in
    one teacher-forced forward with gradients (its activations held at once: a real LLM on long
    prompts runs out of memory at a few passes per step); N: log π_c of the decisions is first
    computed without gradients, N at a time, then the loss's backward runs N decisions at a time,
    gradients accumulated (exact: the loss reaches the weights only through the decisions' log π_c;
    costs one more forward per decision). Replicated processes only (not FSDP / DeepSpeed)."""
    validation_queries: Optional[int] = 8
    """Training: with rltf.eval_every > 0, the planner's flow (methods[0], greedy decisions) runs on N
    queries of the validation split (evenly spaced, days kept; never the held-out splits' queries)
    at step 0 and every eval_every steps; its final pass (ties: the mean reward) is the validation
    score rltf.select: best_validation picks by. null: every validation query (72 on the synthetic
    sandbox; a query costs about one sampled pass of a step: ~0.25 CPU s with the embedded planner)."""

    def validate(self, section: str = "flow") -> None:
        for message in bound_errors(self, f"{section}."):
            raise FlowSettingsError(message)
        bad = [m for m in self.methods if not (isinstance(m, str) and m.strip())]
        if bad or not self.methods:
            raise FlowSettingsError(f"bad value for '{section}.methods': {list(self.methods)!r}; expected a non-empty "
                                    f"list of the env's flow methods (the travel env's: {', '.join(METHODS)})")
        bad = [s for s in self.splits if s not in EVAL_SPLITS and ":re-split:" not in str(s)]
        if bad or not self.splits:
            raise FlowSettingsError(f"bad value for '{section}.splits': {list(self.splits)!r}; expected a non-empty "
                                    f"list drawn from {list(EVAL_SPLITS)} or <hub split>:re-split:<part>")
        if self.limit is not None and self.limit < 1:
            raise FlowSettingsError(f"bad value for '{section}.limit': {self.limit!r}; expected null or >= 1")
        if self.warm_start_queries is not None and self.warm_start_queries < 1:
            raise FlowSettingsError(f"bad value for '{section}.warm_start_queries': {self.warm_start_queries!r}; "
                                    "expected null or >= 1")
        if self.validation_queries is not None and self.validation_queries < 1:
            raise FlowSettingsError(f"bad value for '{section}.validation_queries': {self.validation_queries!r}; "
                                    "expected null or >= 1")
        if self.score_batch is not None and self.score_batch < 1:
            raise FlowSettingsError(f"bad value for '{section}.score_batch': {self.score_batch!r}; "
                                    "expected null or >= 1")
        if self.days is not None and (not self.days or any(d not in (3, 5, 7) for d in self.days)):
            raise FlowSettingsError(f"bad value for '{section}.days': {self.days!r}; "
                                    "expected null or a list of 3, 5, 7")
        b = self.backend
        if b.kind in ("hf", "openai") and not b.model:
            raise FlowSettingsError(f"'{section}.backend.model' is needed for the {b.kind} backend "
                                    "(hf: a model id or directory; openai: the served model's name)")
        if b.kind != "planner" and b.checkpoint:
            raise FlowSettingsError(f"'{section}.backend.checkpoint' is for the planner backend, not {b.kind}")
