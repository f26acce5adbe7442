"""The pddl env: the problems of a set (:mod:`envs.pddl.instances`) as tasks, the plan grammar of a kind
(:mod:`envs.pddl.grammar`), the simulator's reward (:mod:`envs.pddl.simulator`).

A task is one problem; its ``description`` renders the initial state and goal (:mod:`envs.pddl.describe`),
its ``reference_plan`` is the folder's ground-truth plan or the planner's (:mod:`envs.pddl.search`). A plan
scores 1 when every action applies in turn and the goal holds at the end, 0 otherwise; the shaping options
(:class:`Shaping`) give an executable plan that misses the goal a share of the goal literals it made true,
and take a cost per action beyond the reference plan's length from a plan that reaches it. Whatever the
shaping, the table's headline is the plain goal rate (``goal rate``), beside ``executable`` (the share of
plans whose every action applied).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.base import RLTFEnvBase
from envs.pddl.describe import instructions, render
from envs.pddl.grammar import GRAMMAR_KINDS, format_plan
from envs.pddl.grounding import split_plan_text
from envs.pddl.instances import Instance, ProblemSet
from envs.pddl.search import FoundPlan
from envs.pddl.simulator import Outcome, simulate


@dataclass(frozen=True)
class Shaping:
    """Reward shaping for training (both 0: the plain goal reward)."""

    goal_fraction: float = 0.0
    """An executable plan that misses the goal scores this times the share of goal literals true at its end."""
    step_cost: float = 0.0
    """A plan that reaches the goal loses this per action beyond the reference plan's length (floor 0)."""


@dataclass(frozen=True)
class PddlTask:
    id: int
    description: str
    reference_plan: str | None
    metric: str
    size: int
    reference: FoundPlan | None = None


@dataclass(frozen=True)
class PddlResult:
    """One scored plan (:class:`envs.protocol.RewardResult`) and what the simulator said."""

    reward: float
    valid: bool
    plan_text: str
    error: str | None
    reached: bool
    length: int
    sample_errors: tuple = ()


class PddlEnv(RLTFEnvBase):
    """The tasks ``ids`` of a problem set (see the module docstring)."""

    headline = "goal rate"

    def __init__(self, problems: ProblemSet, ids: Sequence[int], references: dict[int, FoundPlan | None],
                 grammar: str = "syntax", max_plan_length: int = 32, shaping: Shaping = Shaping(),
                 split: str = "train", render_mode: str | None = None):
        by_id = {i.id: i for i in problems.instances}
        self.problems, self.split, self.shaping = problems, split, shaping
        self.grammar_kind, self.max_plan_length = grammar, max_plan_length
        self.instances: dict[int, Instance] = {i: by_id[i] for i in ids}
        self._tasks = []
        for i in ids:
            inst = by_id[i]
            found = references.get(i)
            plan = inst.given_plan or (found.actions if found else None)
            self._tasks.append(PddlTask(i, render(problems.domain, inst.problem), None if plan is None
                                        else format_plan(plan), f"{inst.task.size} objects", inst.task.size, found))
        self._by_id = {t.id: t for t in self._tasks}
        longest = max(len(t.description) for t in self._tasks)
        super().__init__(render_mode=render_mode, max_text=max(4096, 2 * longest))
        self._grammars: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ what the base asks
    def tasks(self) -> list[PddlTask]:
        return list(self._tasks)

    def get_task(self, task: Any) -> PddlTask:
        if isinstance(task, PddlTask) and task.id in self._by_id:
            return self._by_id[task.id]
        return super().get_task(task)

    def grammar(self, tokenizer, task: Any):
        """The grammar of the task's kind, one per tokenizer and what the kind shares it across
        (:meth:`~envs.pddl.grammar.GrammarKind.share_key`: ``syntax``, the tasks over the same objects;
        ``legal``, those with the same initial state too)."""
        inst = self.instances[self.get_task(task).id]
        per_tok = self._grammars.setdefault(tokenizer, {})
        kind = GRAMMAR_KINDS[self.grammar_kind]
        key = kind.share_key(inst.task)
        if key not in per_tok:
            per_tok[key] = kind.build(tokenizer, inst.task, self.max_plan_length)
        return per_tok[key]

    def reward_plans(self, pairs: Sequence[tuple[Any, Any]],
                     rng: np.random.Generator | None = None) -> list[PddlResult]:
        return [self._score(self.get_task(t), plan) for t, plan in pairs]

    def _score(self, task: PddlTask, plan: Any) -> PddlResult:
        ground = self.instances[task.id].task
        try:
            out: Outcome = simulate(ground, plan if isinstance(plan, str) else tuple(plan))
        except TypeError:  # not text, not a sequence of actions: an invalid plan like any other
            out = Outcome(False, False, 0, 0.0, f"not a plan: {type(plan).__name__}", 1)
        text = self.format_plan(plan)
        reward = 0.0
        if out.valid and out.reached:
            extra = max(0, out.length - len(task.reference.actions)) if task.reference else 0
            reward = max(0.0, 1.0 - self.shaping.step_cost * extra)
        elif out.valid:
            reward = self.shaping.goal_fraction * out.goal_fraction
        return PddlResult(reward, out.valid, text, out.error, out.reached, out.length)

    def format_plan(self, plan: Any) -> str:
        if isinstance(plan, str):
            actions = split_plan_text(plan)
            return format_plan(actions) if actions else plan.strip()
        try:
            return format_plan([str(a) for a in plan])
        except TypeError:
            return repr(plan)

    def plan_instructions(self) -> str:
        return instructions(self.problems.domain)

    # -------------------------------------------------------------------------- the optional members
    def tokenizer_texts(self, task_ids: Sequence[int] | None = None) -> list[str]:
        """The tasks' descriptions and reference plans, the instructions and every action name and object
        name of the tasks (so each ground action's words are the tokenizer's)."""
        texts = super().tokenizer_texts(task_ids)
        ids = [t.id for t in self._tasks] if task_ids is None else list(task_ids)
        names = {a.name: None for a in self.problems.domain.actions}
        for i in ids:
            names.update(dict.fromkeys(self.instances[self.get_task(i).id].problem.objects))
        return list(dict.fromkeys([*texts, self.plan_instructions(), " ".join(f"({n})" for n in names)]))

    def oracle_plans(self, tasks: Sequence[PddlTask]) -> list[tuple[str, float]] | None:
        out = []
        for t in tasks:
            t = self.get_task(t)
            if t.reference_plan is None:
                out.append(("", 0.0))
            else:
                out.append((t.reference_plan, self._score(t, t.reference_plan).reward))
        return out

    def table_columns(self, tasks: Sequence[PddlTask], plans: dict[int, str]) -> dict[str, float]:
        """``goal rate`` (the headline: plans that reach the goal, unshaped) and ``executable``."""
        results = [self._score(self.get_task(t), plans.get(self.get_task(t).id, "")) for t in tasks]
        n = max(1, len(results))
        return {"goal rate": sum(r.valid and r.reached for r in results) / n,
                "executable": sum(r.valid for r in results) / n}
