"""The plan simulator: a plan is executed action by action on a grounded problem (:mod:`envs.pddl.grounding`).

:func:`simulate` answers what the reward needs: whether every action was applicable in turn (``valid``),
whether the goal holds at the end (``reached``), the fraction of goal literals true at the end, and for an
invalid plan the first failing action (its index from 1 and text) with the precondition it found unmet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envs.pddl.grounding import GroundTask, split_plan_text
from envs.pddl.model import atom_text


@dataclass(frozen=True)
class Outcome:
    """What executing one plan gave."""

    valid: bool
    reached: bool
    length: int
    goal_fraction: float
    error: str | None = None
    failed_at: int | None = None  # 1-based index of the first failing action


def plan_indices(task: GroundTask, plan) -> tuple[list[int], str | None]:
    """The action indices of a plan (text, a sequence of action texts, or of indices) and, when an action
    is not one of the problem's ground actions, why (naming it and its position)."""
    if isinstance(plan, str):
        texts = split_plan_text(plan)
        if not texts and plan.strip():
            return [], f"no action found in {plan.strip()[:60]!r}; expected actions such as {task.actions[0].text}"
    else:
        texts = list(plan)
    out = []
    for k, a in enumerate(texts, 1):
        if isinstance(a, (int,)) and not isinstance(a, bool):
            if not 0 <= a < len(task.actions):
                return out, f"action {k}: index {a} is not an action of the problem"
            out.append(a)
            continue
        a = split_plan_text(str(a))
        i = task.by_text.get(a[0]) if len(a) == 1 else None
        if i is None:
            return out, f"action {k} {' '.join(a) or '()'} is not an action of the problem: {_why_unknown(task, a)}"
        out.append(i)
    return out, None


def _why_unknown(task: GroundTask, text: list[str]) -> str:
    if len(text) != 1:
        return "expected one (name arg ...) group"
    if not text[0][1:-1].split():
        return "an empty action (): expected (name arg ...)"
    name, *args = text[0][1:-1].split()
    schema = task.domain.action(name)
    if schema is None:
        return f"unknown action {name!r} (the domain has {', '.join(a.name for a in task.domain.actions)})"
    if len(args) != len(schema.params):
        return f"{name} takes {len(schema.params)} argument(s), got {len(args)}"
    every = {**task.domain.constants, **task.problem.objects}
    for arg, (var, types) in zip(args, schema.params):
        if arg not in every:
            return f"unknown object {arg!r}"
        if not task.domain.is_a(every[arg], types):
            return f"object {arg!r} of type {every[arg]!r} does not fit ?{var} (type {' or '.join(types)})"
    return "its equality preconditions exclude these arguments"


def simulate(task: GroundTask, plan) -> Outcome:
    """Execute ``plan`` (text, action texts or indices) from the initial state (see the module docstring)."""
    indices, error = plan_indices(task, plan)
    if error is not None:
        return Outcome(False, False, len(indices), 0.0, error, len(indices) + 1)
    state, actions = task.init, task.actions
    for k, i in enumerate(indices):
        a = actions[i]
        if state & a.pre != a.pre or state & a.neg:
            return Outcome(False, False, len(indices), task.goal_fraction(state), _unmet(task, a, state, k + 1), k + 1)
        state = (state & ~a.delete) | a.add
    return Outcome(True, task.goal_reached(state), len(indices), task.goal_fraction(state))


def _unmet(task: GroundTask, a, state: int, k: int) -> str:
    """Why ``a`` does not apply: its first precondition (as the domain writes them) that ``state`` breaks."""
    for i in a.order:
        if i >= 0 and not state >> i & 1:
            return f"action {k} {a.text} is not applicable: its precondition {atom_text(task.atoms[i])} is false"
        if i < 0 and state >> ~i & 1:
            return (f"action {k} {a.text} is not applicable: its precondition (not {atom_text(task.atoms[~i])}) "
                    "is false")
    raise AssertionError(f"{a.text} applies")  # pragma: no cover - called only when it does not


def final_state(task: GroundTask, indices: Sequence[int]) -> int:
    """The state after applying ``indices`` (assumed applicable) from the initial state."""
    state = task.init
    for i in indices:
        a = task.actions[i]
        state = (state & ~a.delete) | a.add
    return state
