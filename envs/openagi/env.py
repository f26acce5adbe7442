"""``OpenAGI-Lite-v0``: a Gymnasium environment where an action is a plan and its score the reward.

One episode is one task: ``reset()`` picks a task of the configured split (or the one given as
``options={"task": id}``) and returns its description; ``step(plan)`` executes the plan (text in
the canonical syntax, or a Plan object) on the task's samples and ends the episode. Invalid plans
score 0 with the reason in ``info["error"]``; nothing a planner emits can crash the environment.

For RL, :meth:`OpenAGIEnv.score` scores many (task, plan) pairs in one call, sharing the
execution cache across them; its ``rng`` argument picks the sample subsets (the trainer passes
one seeded per step), else the env's own ``np_random`` (seeded by ``reset(seed=...)``) does.

Build one from a config with :func:`envs.make` (``envs/openagi/factory.py``): the backend's
registry, the config's extra tools, the suite's tasks and metrics.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.base import RLTFEnvBase
from envs.episodes import ansi_text, episode_task
from envs.openagi.cache import ExecutionCache
from envs.openagi.corpus import registry_texts
from envs.openagi.diagnostics import expert_failures
from envs.openagi.executor import PlanExecutor
from envs.openagi.metrics import BatchMetric, compute_metric
from envs.openagi.oracle import oracle_for_task
from envs.openagi.plans import MESSAGE_CHARS, Plan, PlanError, PlanLimits, clip_text, format_plan, parse_and_check
from envs.openagi.registry import ToolRegistry
from envs.openagi.split import SPLITS, load_split
from envs.openagi.split_rewards import cut_task, drawn_samples, split_reward_plans
from envs.openagi.suite import SUITE_LIMITS, build_suite
from envs.openagi.tasks import Task

if TYPE_CHECKING:
    from envs.openagi.grammar import PlanGrammar

CHARSET = frozenset(string.printable)


@dataclass
class PlanResult:
    """The outcome of one (task, plan) pair."""

    task_id: int
    plan_text: str
    reward: float
    valid: bool
    error: str | None = None
    error_reason: str | None = None
    scores: list[float] = field(default_factory=list)
    sample_errors: list[str | None] = field(default_factory=list)

    def info(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "plan": self.plan_text,
            "valid": self.valid,
            "error": self.error,
            "error_reason": self.error_reason,
            "scores": self.scores,
            "sample_errors": self.sample_errors,
        }


def _backend_registry(backend: str) -> ToolRegistry:
    if backend == "lite":
        from envs.openagi.lite import build_lite_registry  # heavy: the experts import scikit-learn / -image

        return build_lite_registry()
    if backend == "hf":
        from envs.openagi.hf import build_hf_registry  # type: ignore[import-not-found]  # heavy: torch

        return build_hf_registry()
    raise ValueError(f"unknown backend {backend!r}; expected 'lite' or 'hf'")


class OpenAGIEnv(RLTFEnvBase):
    """OpenAGI's tasks as an env; implements :class:`envs.protocol.RLTFEnv` (see the module docstring).
    From :class:`envs.base.RLTFEnvBase`: the ``overall`` headline, the ``oracle`` row (the best plan by
    exhaustive search, ``envs/openagi/oracle.py``), no columns of its own (the mean score per metric
    family and overall: the paper's Table 5)."""

    def __init__(
        self,
        suite: str = "lite",
        split: str = "train",
        backend: str = "lite",
        n_samples: int = 20,
        samples_per_step: int | None = None,
        data_seed: int = 0,
        cache_bytes: int = 512 * 2**20,
        limits: PlanLimits | None = None,
        registry: ToolRegistry | None = None,
        tasks: Sequence[Task] | None = None,
        render_mode: str | None = None,
        metrics: Mapping[str, BatchMetric] | None = None,
        share_work: bool = True,
    ):
        if split not in (*SPLITS, "all"):
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join((*SPLITS, 'all'))}")
        if samples_per_step is not None and samples_per_step < 1:
            raise ValueError(f"samples_per_step={samples_per_step}: expected None (all) or >= 1")
        self.registry = registry if registry is not None else _backend_registry(backend)
        self.backend = backend  # where the experts run (lite: this process's CPU; hf: hub models, a GPU)
        all_tasks = list(tasks) if tasks is not None else list(build_suite(suite, data_seed, n_samples))
        self.tasks_by_id = {t.id: t for t in all_tasks}
        if tasks is not None or split == "all":
            self.task_ids = [t.id for t in all_tasks]
        else:
            self.task_ids = load_split(suite)[split]
        self.split = split
        self.limits = limits or SUITE_LIMITS.get(suite, PlanLimits())
        self.samples_per_step = samples_per_step
        # this env's own metrics (e.g. the hf backend's), looked up before the shared offline table
        self.metrics: dict[str, BatchMetric] = dict(metrics or {})
        self.cache = ExecutionCache(cache_bytes) if cache_bytes else None
        # per-sample scores of whole plans: (task id, sample uid, "score", plan text) -> float
        self.score_cache = ExecutionCache(min(cache_bytes, 32 * 2**20)) if cache_bytes else None
        self.executor = PlanExecutor(self.registry, self.cache)
        # False: every plan of a reward_plans call executed and scored on its own, as before work
        # was shared within a call (the same rewards; the reference benchmarks/reward_share.py times)
        self.share_work = share_work
        self.render_mode = render_mode
        self.observation_space = spaces.Text(max_length=1024, charset=CHARSET)
        self.action_space = spaces.Text(max_length=1024, charset=CHARSET)
        self.task: Task | None = None
        self._last: PlanResult | None = None

    # -------------------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        gym.Env.reset(self, seed=seed)  # the seeding only: this env draws its own task and info
        self.task = episode_task(self.np_random, options, "task", self.get_task, self.tasks_by_id, self.task_ids)
        self._last = None
        return self.task.description, self._task_info(self.task)

    def step(self, action: str | Plan):
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        result = self.reward_plans([(self.task, action)])[0]
        self._last = result
        info = {**self._task_info(self.task), **result.info()}
        return self.task.description, result.reward, True, False, info

    def render(self) -> str | None:
        task = self.task
        return ansi_text(self.render_mode, task and (lambda: f"task {task.id}: {task.description}"), self._last,
                         lambda r: f"\nplan: {r.plan_text}\nreward: {r.reward:.4f}"
                                   + (f" (invalid: {r.error})" if r.error else ""))

    # --------------------------------------------------------------------------- batched
    def get_task(self, task: int | str | Task) -> Task:
        if isinstance(task, Task):
            return task
        if isinstance(task, (bool, np.bool_)):  # (bool is an int: True would silently be task 1)
            raise ValueError(f"task {task!r} is a bool, not a task; expected a task id (an int), a name like "
                             "'task-003' or a task description")
        if isinstance(task, str):
            for t in self.tasks_by_id.values():
                if task in (t.name, t.description):
                    return t
        elif isinstance(task, (int, np.integer)) and int(task) in self.tasks_by_id:
            return self.tasks_by_id[int(task)]
        raise ValueError(
            f"unknown task {task!r}; expected a task id in 0..{max(self.tasks_by_id)}, a name like "
            "'task-003' or a task description"
        )

    def tasks(self) -> list[Task]:
        return [self.tasks_by_id[i] for i in self.task_ids]

    def grammar(self, tokenizer, task: int | str | Task) -> "PlanGrammar":
        """The decoder's grammar of ``task``'s valid plans in this env (its registry, its limits),
        over ``tokenizer``'s ids: what ``constrained_decoding`` samples, searches and scores with
        (cached per tokenizer, registry contents, signature and limits)."""
        from envs.openagi.grammar import plan_grammar  # (imports the decoder: only when asked)

        task = self.get_task(task)
        return plan_grammar(tokenizer, self.registry, task.inputs, task.target, self.limits)

    def samples_for(self, task: Task, rng: np.random.Generator | None = None):
        """The samples a plan for ``task`` is scored on: all of them, or ``samples_per_step`` drawn
        with ``rng`` (default: the env's ``np_random``)."""
        k = self.samples_per_step
        if k is None or k >= len(task.samples):
            return task.samples
        rng = self.np_random if rng is None else rng
        idx = np.sort(rng.choice(len(task.samples), size=k, replace=False))
        return [task.samples[i] for i in idx]

    def reward_plans(self, pairs: Sequence[tuple[int | str | Task, str | Plan]],
              rng: np.random.Generator | None = None) -> list[PlanResult]:
        """Score many (task, plan) pairs. Plans may be text or Plan objects; invalid ones score 0.

        All plans of one task in a call are scored on the same sample subset: their rewards
        differ only by the plan (less variance between the K samples of a task, more cache hits).
        ``rng`` draws the subsets (default: the env's ``np_random``, seeded by ``reset(seed=...)``).

        Within the call, work two plans have in common is done once, cache or no cache: an expert
        request made again (a shared plan prefix on the same samples, or the same plan) is answered
        from the first (:meth:`PlanExecutor.sharing`), and a metric asked again for the same plan's
        outputs on the same samples gives the first answer. Nothing of it outlives the call
        (``share_work=False``: each plan on its own)."""
        tasks = [self.get_task(t) for t, _ in pairs]
        subsets: dict[int, list] = {}
        for task in tasks:
            if task.id not in subsets:
                subsets[task.id] = self.samples_for(task, rng)
        metric_answers: dict[tuple, list[float]] | None = {} if self.share_work else None
        # with no execution cache, the call's linear plans' requests for batch-invariant tools are
        # also merged across plans (with one, prefixes are shared through it across calls)
        merge = [] if self.cache is not None or not self.share_work else _checked_plans(self, tasks, pairs, subsets)
        with self.executor.sharing(merge) if self.share_work else nullcontext():
            return [self._reward_one(task, p, subsets[task.id], metric_answers)
                    for task, (_, p) in zip(tasks, pairs)]

    def _reward_one(self, task: Task, action: str | Plan, samples,
                    metric_answers: dict[tuple, list[float]] | None) -> PlanResult:
        # a parsed Plan (what the decoder emits) is checked, not formatted and re-parsed; the text
        # is formatted once, for the result
        try:
            plan = parse_and_check(action, self.registry, task.inputs, task.target, self.limits)
        except PlanError as exc:
            return PlanResult(task.id, _safe_format(action), 0.0, False, str(exc), exc.reason)
        except Exception as exc:  # a malformed object, not a string: still never crash
            return PlanResult(task.id, _safe_format(action), 0.0, False,
                              clip_text(f"{type(exc).__name__}: {exc}", MESSAGE_CHARS), "invalid")
        text = format_plan(plan)
        scores = [0.0] * len(samples)
        errors: list[str | None] = [None] * len(samples)
        # a sample's score under a plan is a pure function of (task, sample, plan): the K samples of
        # a task in one RL step are mostly the same few plans, so most are looked up, not recomputed
        keys = [(task.id, s.uid, "score", text) for s in samples]
        score_bytes = 256 + len(text)  # the entry is mostly its key (the plan's text): counted, so the budget holds
        todo = []
        for i, key in enumerate(keys):
            hit, val = self.score_cache.lookup(key) if self.score_cache is not None else (False, None)
            if hit:
                scores[i] = val
            else:
                todo.append(i)
        if todo:
            run = self.executor.run(plan, [samples[i] for i in todo])
            ok = [j for j, e in enumerate(run.errors) if e is None]
            for j, e in enumerate(run.errors):
                errors[todo[j]] = e
            if ok:
                # the metric of one plan's outputs on the same samples: asked once per call
                asked = (task.id, text, tuple(samples[todo[j]].uid for j in ok))
                vals = metric_answers.get(asked) if metric_answers is not None else None
                if vals is None:
                    vals = compute_metric(task.metric, [run.outputs[j] for j in ok],
                                          [samples[todo[j]].target for j in ok], self.metrics)
                    if metric_answers is not None:
                        metric_answers[asked] = vals
                for j, v in zip(ok, vals):
                    scores[todo[j]] = v
                    if self.score_cache is not None:  # failures are not remembered: a flaky expert is retried
                        self.score_cache.put(keys[todo[j]], v, size=score_bytes)
        reward = float(np.mean(scores)) if scores else 0.0
        if not math.isfinite(reward):
            reward = 0.0
        return PlanResult(task.id, text, reward, True, None, None, scores, errors)

    def cache_stats(self):
        return self.cache.stats() if self.cache is not None else None

    # ------------------------------------------------------------- the rltf env interface
    # (envs/protocol.py: what each method must return)
    def expert_failures(self, results: Sequence[PlanResult]) -> tuple[float, list[str]]:
        """The fraction of executed samples (of valid plans) an expert failed on, and a warning per
        tool that failed on every call of ``results`` (:func:`envs.openagi.diagnostics.expert_failures`)."""
        return expert_failures(results)

    def format_plan(self, plan: str | Plan) -> str:
        """A plan in the canonical syntax (text is returned as it is)."""
        return plan if isinstance(plan, str) else format_plan(plan)

    def split_reward_plans(self, pairs: Sequence[tuple[int | str | Task, str | Plan]], rng: np.random.Generator,
                           exchange, process: int, processes: int) -> list[PlanResult]:
        """:meth:`reward_plans` of this process's pairs, every process executing its own samples of
        every process's plans (:mod:`envs.openagi.split_rewards`; all processes call it at once)."""
        return split_reward_plans(self, pairs, rng, exchange, process, processes)

    def reward_workers_unsupported(self) -> str | None:
        """None on the lite backend: :meth:`drawn_samples` / :meth:`cut_task` replay the draw of
        :meth:`reward_plans` (:mod:`envs.openagi.split_rewards`)."""
        if self.backend != "lite":
            return f"env.backend={self.backend} runs its experts on the GPU, which a forked worker cannot use"
        return None

    def drawn_samples(self, tasks: Sequence[Task], rng: np.random.Generator | None) -> dict[int, list[int]]:
        """The sample subsets :meth:`reward_plans` scores ``tasks``' plans on, drawn from ``rng`` as it
        draws them (:func:`envs.openagi.split_rewards.drawn_samples`)."""
        return drawn_samples(self, tasks, rng)

    def cut_task(self, task: Task, indices: Sequence[int]) -> Task:
        """``task`` holding only its samples ``indices`` (:func:`envs.openagi.split_rewards.cut_task`)."""
        return cut_task(task, indices)

    def parse_free_text(self, task: int | str | Task, text: str) -> str | Plan:
        """OpenAGI's mapping of free text onto a valid plan (MiniLM sentence similarity,
        :func:`envs.openagi.freeform.map_free_text_to_plan`); the text itself when it maps onto none."""
        from envs.openagi.freeform import map_free_text_to_plan  # heavy: the decoder's grammar (torch)

        task = self.get_task(task)
        try:
            return map_free_text_to_plan(text, self.registry, (task.inputs, task.target), self.limits)
        except PlanError:
            return text  # scored as the invalid plan it is: 0

    def plan_instructions(self) -> str:
        """The registry's tools, one line each (name, input -> output modality, description), and the
        plan syntax: what OpenAGI tells an LLM before a task."""
        tools = "\n".join(f"- {t.name} ({' + '.join(t.inputs)} -> {t.output})"
                           + (f": {t.description}" if t.description else "") for t in self.registry)
        return ("Solve the task with a chain of these tools, each turning its input into its output:\n"
                f"{tools}\nAnswer with the plan only: the tools in the order they run, separated by commas "
                "(e.g. Image Denoising, Colorization). A task with several inputs: one chain per input in "
                "parentheses, then the tool that joins them (e.g. (Image Classification) () Question Answering).")

    def oracle_plans(self, tasks: Sequence[int | Task]) -> list[tuple[str, float]]:
        """The best plan per task by exhaustive search up to this env's limits, with its reward
        (:func:`envs.openagi.oracle.oracle_for_task`)."""
        entries = [oracle_for_task(self, self.get_task(t)) for t in tasks]
        return [(e.oracle_plan, e.oracle_score) for e in entries]

    def tokenizer_texts(self, task_ids: Sequence[int] | None = None) -> list[str]:
        """The embedded tokenizer's texts: the train tasks of both suites' persisted splits, every
        reference plan and every tool of this env's registry with its description
        (:func:`envs.openagi.corpus.registry_texts`; the same for every run, so ``task_ids`` is not
        needed: no held-out task of either suite is among them)."""
        return registry_texts(self.registry)

    @staticmethod
    def _task_info(task: Task) -> dict[str, Any]:
        return {"task_id": task.id, "inputs": task.inputs, "target": task.target, "metric": task.metric,
                "family": task.family}


def _checked_plans(env: OpenAGIEnv, tasks: Sequence[Task], pairs, subsets: dict[int, list]) -> list[tuple]:
    """(plan, samples) of each distinct valid plan of ``pairs`` (invalid ones are left out)."""
    jobs: dict[tuple[int, str | Plan], tuple] = {}
    for task, (_, action) in zip(tasks, pairs):
        try:
            key = (task.id, action)
            if key not in jobs:
                plan = parse_and_check(action, env.registry, task.inputs, task.target, env.limits)
                jobs[key] = (plan, subsets[task.id])
        except Exception:  # scored (as invalid) by _reward_one, with its reason
            continue
    return list(jobs.values())


def _safe_format(plan: Any) -> str:
    if isinstance(plan, str):
        return plan
    try:
        return format_plan(plan)
    except Exception:
        return repr(plan)
