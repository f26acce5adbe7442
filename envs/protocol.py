"""What rltf needs of an env: the protocol every env implements (beside ``gymnasium.Env``).

The trainer (``rltf/rl/trainer.py``, ``rltf/flows/training/trainer.py``), supervised fine-tuning
(``rltf/rl/sft.py``), evaluation (``rltf/evaluation/schemas.py``), the embedded planner's
tokenizer (``rltf/planners/tokenizer.py``), the report (``rltf/stages/plan_job.py``) and the GRPO
baseline (``rltf/comparison/grpo.py``) see an env through :class:`RLTFEnv` only: its tasks
(:class:`Task`), the grammar of a task's valid actions (``constrained_decoding``'s
:class:`~constrained_decoding.protocol.Grammar`), and the reward of (task, action) pairs
(:class:`RewardResult`). A feature an env may lack is still a method, with a defined "not
available" answer (``oracle_plans`` -> None, ``table_columns`` -> ``{}``, ``expert_failures`` ->
``(0.0, [])``, ``reward_workers_unsupported`` -> why not), so no caller asks ``hasattr`` or
``isinstance``; :class:`envs.base.RLTFEnvBase` gives every such answer, so an env built on it writes
its tasks, grammar, reward and formatting only.

Each member says what it must return or raise, in the manner of Gymnasium's env docstrings.
:func:`envs.checker.check_rltf_env` checks an env against this protocol on its real tasks;
Gymnasium's ``check_env`` checks its ``reset`` / ``step``. Register an env with
:mod:`envs.registry` to build it from a run config.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from constrained_decoding.protocol import Grammar


@runtime_checkable
class Task(Protocol):
    """One task (an episode's goal) as rltf reads it."""

    id: int
    """Unique among the env's tasks, stable across runs (the persisted split lists these ids)."""
    description: str
    """The planner's prompt (the decoder formats it)."""
    reference_plan: Any
    """A valid action for the task (what supervised fine-tuning imitates; text or the env's plan object,
    ``format_plan`` gives its text), or None when the env knows none for this task (SFT skips it)."""
    metric: str
    """The group of the task in a results table without columns of the env's own (OpenAGI: the
    metric family; travel: the query's level)."""


@runtime_checkable
class RewardResult(Protocol):
    """The outcome of one (task, action) pair of :meth:`RLTFEnv.reward_plans`."""

    reward: float
    """In [0, 1]; 0 for an invalid action."""
    valid: bool
    """Whether the action was a valid plan for the task (an invalid one is never executed)."""
    plan_text: str
    """The action's canonical text (what the report prints, what distinct-plan counts compare)."""
    error: str | None
    """Why the action is invalid (one line), None when valid."""
    sample_errors: Sequence[str | None]
    """Per executed sample, the failure of a part of the plan (OpenAGI: ``"<tool> raised ..."``) or
    None; empty when nothing is executed (travel: the evaluator reads tables)."""


@runtime_checkable
class RLTFEnv(Protocol):
    """The env interface rltf uses (see the module docstring); envs are also ``gymnasium.Env``."""

    headline: str
    """The results-table column the main job's last line reports (``"overall"``, travel: ``"final pass"``)."""
    oracle_name: str
    """What the ``oracle`` row of a table is called (``"oracle"``, travel: ``"solver"``)."""

    def tasks(self) -> list[Task]:
        """The tasks of this env's split, in a fixed order (the trainer draws from them).

        Returns:
            A non-empty list of :class:`Task`.
        """
        ...

    def get_task(self, task: Any) -> Task:
        """The task of an id (or a task itself; an env may accept more, e.g. a description).

        Raises:
            ValueError: naming the unknown id and the valid range.
        """
        ...

    def grammar(self, tokenizer: Any, task: Any) -> Grammar:
        """The decoder's grammar of ``task``'s valid actions over ``tokenizer``'s ids: the same object
        for the same (tokenizer, task) (the decoder caches its tables by grammar identity)."""
        ...

    def reward_plans(self, pairs: Sequence[tuple[Any, Any]],
                     rng: np.random.Generator | None = None) -> list[RewardResult]:
        """Score (task or task id, action) pairs; actions are text or the grammar's action objects.

        Returns:
            One :class:`RewardResult` per pair, in order; an invalid action scores 0 with its reason.
            ``rng`` draws whatever the scoring draws (OpenAGI: the sample subsets), the env's own
            generator otherwise.

        Never raises on an action: anything a planner emits is a result.
        """
        ...

    def cache_stats(self) -> Any:
        """Statistics of the env's execution cache (an object with ``hit_rate``), or None when the env
        executes nothing cached."""
        ...

    def expert_failures(self, results: Sequence[RewardResult]) -> tuple[float, list[str]]:
        """What failed while scoring ``results`` (one training step's): ``(fraction of the executed
        samples of valid plans that failed, one warning text per part (tool, rule) of the plans that
        failed on every call of this batch)``; ``(0.0, [])`` when nothing failed or nothing is executed."""
        ...

    def format_plan(self, plan: Any) -> str:
        """An action (a task's ``reference_plan``, a grammar's action, text) as the text a planner writes."""
        ...

    def parse_free_text(self, task: Any, text: str) -> Any:
        """The action a zero- / few-shot planner's free text stands for (OpenAGI: the MiniLM mapping onto
        a valid plan); the text itself when the env reads text, or when it maps onto no valid action
        (it then scores 0 as the invalid plan it is). Never raises."""
        ...

    def plan_instructions(self) -> str:
        """What a planner is told before a task, in a few plain lines: the action space and the plan
        format (OpenAGI: every tool's name with its one-line description, and the plan syntax;
        travel: the day records of a plan). Non-empty, deterministic; a chat planner's zero- and
        few-shot prompts carry it as their system message (``rltf/evaluation/schemas.py``)."""
        ...

    def oracle_plans(self, tasks: Sequence[Task]) -> list[tuple[str, float]] | None:
        """The best action the env knows per task (the upper bound of a planner), as (plan text, reward)
        in ``tasks``' order, or None when the env has no oracle (the table then shows ``n/a``)."""
        ...

    def table_columns(self, tasks: Sequence[Task], plans: dict[int, str]) -> dict[str, float]:
        """The env's own metrics of one planner's ``plans`` (task id -> plan text) for ``tasks``, as
        results-table columns (travel: delivery, commonsense / hard micro and macro, final pass), or
        ``{}`` when the env has none: the table then shows the mean reward per ``task.metric`` and
        ``overall``."""
        ...

    def tokenizer_texts(self, task_ids: Sequence[int] | None = None) -> list[str]:
        """The texts an embedded planner's tokenizer is trained on: the train tasks' prompts (no held-out
        task's: ``task_ids`` defaults to this env's tasks) and the action space (every name and piece of
        syntax a plan may use). Non-empty, deterministic."""
        ...

    def reward_workers_unsupported(self) -> str | None:
        """None when forked reward workers (``rltf.reward_workers``, ``rltf/rl/reward_workers.py``) can
        score this env's plans: :meth:`drawn_samples` then makes :meth:`reward_plans`' random draw in
        the learner and :meth:`cut_task` replays it in a worker, bit for bit. Otherwise why not, one
        line (OpenAGI's hf backend: its experts run on the GPU; an env that draws no sample subsets)."""
        ...

    def drawn_samples(self, tasks: Sequence[Task], rng: np.random.Generator | None) -> dict[int, list[int]]:
        """Task id -> the indices of the samples :meth:`reward_plans` with ``rng`` scores the plans of
        ``tasks`` (one entry per plan) on, drawn from ``rng`` as it draws them. Called only when
        :meth:`reward_workers_unsupported` is None (else it may raise ``NotImplementedError``)."""
        ...

    def cut_task(self, task: Task, indices: Sequence[int]) -> Task:
        """``task`` holding only its samples ``indices`` (in that order), scored by :meth:`reward_plans`
        on exactly those, drawing nothing: the rewards of :meth:`drawn_samples`' draw. Called only when
        :meth:`reward_workers_unsupported` is None (else it may raise ``NotImplementedError``)."""
        ...

    def split_reward_plans(self, pairs: Sequence[tuple[Any, Any]], rng: np.random.Generator, exchange,
                           process: int, processes: int) -> list[RewardResult]:
        """:meth:`reward_plans` of this process's ``pairs`` when ``processes`` processes train together
        (all call it at once; ``exchange(obj)`` gathers an object of every process, in process order).
        An env may share the execution out (OpenAGI executes each process's own samples of every
        process's plans, so no process waits for the one whose tasks cost most); the results are those
        of :meth:`reward_plans`. The default scores this process's pairs alone."""
        ...

    def flow_domain(self) -> Any:
        """The env's agent-flow domain (:class:`rltf.flows.agents.domain.FlowDomain`: the flow methods it
        offers, their roles, its warm-start teacher) for ``flow.enabled`` and ``python -m
        rltf.flows.evaluate``, or None when the env has no agent flows (the default)."""
        ...
