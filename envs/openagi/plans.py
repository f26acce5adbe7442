"""Plans: what a planner emits and the environment executes.

A *linear* plan is a chain of single-input tools. A *nonlinear* plan (for tasks with several
inputs) has one branch per task input (a possibly empty chain of single-input tools), then a
multi-input *join* tool fed by the branch outputs in order, then a linear *tail*.

The canonical text form, the only one :func:`format_plan` writes and the one planners are
trained on::

    linear:     Image Denoising, Image Deblurring, Image Classification
    nonlinear:  (Image Denoising, Image Deblurring) (Fill Mask) Visual Question Answering, Machine Translation
    empty branch: () (Fill Mask) Question Answering

Tools are separated by ``", "``; each branch is wrapped in parentheses and branches are
separated by one space; the join tool follows the last branch after one space. Tool names are
letters, digits, hyphens and single spaces (the registry enforces this), so the syntax characters
``,()`` never occur inside a name. The parser tolerates extra whitespace; everything else that
is not in this form is a :class:`PlanSyntaxError`.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Union

from envs.openagi.registry import ToolRegistry

SEP = ", "
OPEN, CLOSE = "(", ")"


ECHO_CHARS = 200
"""The most characters of a planner's own text an error message repeats (a 1 MB plan must not
make a 1 MB ``info["error"]``)."""
MESSAGE_CHARS = 1000
"""The most characters of any plan error message."""


def clip_text(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, ending with "…" when it was longer."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class PlanError(ValueError):
    """A malformed or ill-typed plan. ``reason`` is a short machine-readable code. The message is
    at most :data:`MESSAGE_CHARS` long (the plan text it quotes is clipped)."""

    reason = "invalid"

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(clip_text(message, MESSAGE_CHARS))
        if reason is not None:
            self.reason = reason


class PlanSyntaxError(PlanError):
    reason = "syntax"


class PlanTypeError(PlanError):
    reason = "type"


@dataclass(frozen=True)
class LinearPlan:
    tools: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", tuple(self.tools))

    @property
    def all_tools(self) -> tuple[str, ...]:
        return self.tools

    def __len__(self) -> int:
        return len(self.tools)

    def __str__(self) -> str:
        return format_plan(self)


@dataclass(frozen=True)
class NonlinearPlan:
    branches: tuple[tuple[str, ...], ...]
    join: str
    tail: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "branches", tuple(tuple(b) for b in self.branches))
        object.__setattr__(self, "tail", tuple(self.tail))

    @property
    def all_tools(self) -> tuple[str, ...]:
        return (*itertools.chain.from_iterable(self.branches), self.join, *self.tail)

    def __len__(self) -> int:
        return len(self.all_tools)

    def __str__(self) -> str:
        return format_plan(self)


Plan = Union[LinearPlan, NonlinearPlan]


@dataclass(frozen=True)
class PlanLimits:
    """Length limits: a linear plan's tools; a nonlinear plan's per-branch and tail tools."""

    max_tools: int = 6
    max_branch: int = 3
    max_tail: int = 2

    def __post_init__(self) -> None:
        for k in ("max_tools", "max_branch", "max_tail"):
            v = getattr(self, k)
            if not isinstance(v, int) or v < (1 if k == "max_tools" else 0):
                raise ValueError(f"PlanLimits.{k}={v!r}: expected a non-negative int (max_tools >= 1)")


def format_plan(plan: Plan) -> str:
    """The canonical text of a plan."""
    if isinstance(plan, LinearPlan):
        return SEP.join(plan.tools)
    if isinstance(plan, NonlinearPlan):
        branches = " ".join(OPEN + SEP.join(b) + CLOSE for b in plan.branches)
        return f"{branches} {SEP.join((plan.join, *plan.tail))}"
    raise TypeError(f"expected a LinearPlan or NonlinearPlan, got {type(plan).__name__}")


# ----------------------------------------------------------------------------------- parsing


def _names(chunk: str, where: str, allow_empty: bool) -> tuple[str, ...]:
    if not chunk.strip():
        if allow_empty:
            return ()
        raise PlanSyntaxError(f"expected at least one tool name in {where}", "empty")
    out = []
    for i, raw in enumerate(chunk.split(",")):
        name = " ".join(raw.split())
        if not name:
            raise PlanSyntaxError(f"empty tool name (a stray comma?) at item {i + 1} of {where}")
        if OPEN in name or CLOSE in name:
            raise PlanSyntaxError(f"unexpected bracket in {clip_text(name)!r} in {where}")
        out.append(name)
    return tuple(out)


def parse_plan(text: str, registry: ToolRegistry | None = None) -> Plan:
    """Parse the canonical text form. With a registry, unknown tool names are errors too.

    Never raises anything but :class:`PlanError` for a string input.
    """
    if not isinstance(text, str):
        raise PlanSyntaxError(f"a plan must be a string, got {type(text).__name__}")
    s = text.strip()
    if not s:
        raise PlanSyntaxError("empty plan", "empty")
    if s.startswith(OPEN):
        branches: list[tuple[str, ...]] = []
        pos = 0
        while pos < len(s) and s[pos] == OPEN:
            end = s.find(CLOSE, pos + 1)
            if end < 0:
                raise PlanSyntaxError(f"branch {len(branches) + 1} opened at column {pos} is never closed")
            inner = s[pos + 1 : end]
            if OPEN in inner:
                raise PlanSyntaxError(f"nested '(' inside branch {len(branches) + 1}; branches cannot nest")
            branches.append(_names(inner, f"branch {len(branches) + 1}", allow_empty=True))
            pos = end + 1
            while pos < len(s) and s[pos].isspace():
                pos += 1
        rest = s[pos:]
        if not rest.strip():
            raise PlanSyntaxError("a nonlinear plan needs a multi-input tool after its branches", "empty")
        if rest.lstrip().startswith(","):
            raise PlanSyntaxError("unexpected ',' between the branches and the join tool")
        names = _names(rest, "the join and tail", allow_empty=False)
        plan: Plan = NonlinearPlan(tuple(branches), names[0], names[1:])
    else:
        if CLOSE in s or OPEN in s:
            raise PlanSyntaxError("brackets in a linear plan; a nonlinear plan starts with '('")
        plan = LinearPlan(_names(s, "the plan", allow_empty=False))
    if registry is not None:
        for name in plan.all_tools:
            if name not in registry:
                raise unknown_tool_error(name, registry)
    return plan


def unknown_tool_error(name: str, registry: ToolRegistry) -> PlanError:
    longest = max((len(n) for n in registry.names), default=0)
    # (a name far longer than every tool's is no typo: no quadratic difflib on a huge string)
    close = difflib.get_close_matches(name, registry.names, n=1) if len(name) <= 2 * longest + 10 else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return PlanError(
        f"unknown tool {clip_text(name)!r}{hint}; expected one of: {', '.join(registry.names)}", "unknown_tool"
    )


# -------------------------------------------------------------------------------- validation


def _check_chain(
    tools: Sequence[str], start: str, registry: ToolRegistry, where: str
) -> str:
    """Type-check a chain of single-input tools fed with ``start``; return its output modality."""
    modality = start
    for i, name in enumerate(tools):
        if name not in registry:
            raise unknown_tool_error(name, registry)
        tool = registry[name]
        if tool.arity != 1:
            raise PlanTypeError(
                f"{name!r} takes {tool.arity} inputs ({', '.join(tool.inputs)}); only single-input "
                f"tools may appear in {where}",
                "multi_input_in_chain",
            )
        if tool.inputs[0] != modality:
            what = "the input" if i == 0 else f"the output of {tools[i - 1]!r}"
            raise PlanTypeError(
                f"{name!r} takes {tool.inputs[0]} but {what} in {where} is {modality}",
                "bad_start" if i == 0 else "modality_mismatch",
            )
        modality = tool.output
    return modality


def _check_no_repeat(path: Sequence[str], where: str) -> None:
    seen: set[str] = set()
    for name in path:
        if name in seen:
            raise PlanTypeError(f"tool {name!r} is used twice in {where}", "repeated_tool")
        seen.add(name)


def check_plan(
    plan: Plan,
    registry: ToolRegistry,
    inputs: Sequence[str],
    target: str,
    limits: PlanLimits | None = None,
) -> Plan:
    """Raise :class:`PlanError` unless ``plan`` solves a task with these input/target modalities."""
    inputs = tuple(inputs)
    limits = limits or PlanLimits()
    if isinstance(plan, LinearPlan):
        if len(inputs) != 1:
            raise PlanTypeError(
                f"the task has {len(inputs)} inputs ({', '.join(inputs)}); expected a nonlinear plan "
                f"with {len(inputs)} branches, got a linear plan",
                "branch_count",
            )
        if not plan.tools:
            raise PlanSyntaxError("empty plan", "empty")
        if len(plan.tools) > limits.max_tools:
            raise PlanTypeError(
                f"plan has {len(plan.tools)} tools; at most {limits.max_tools} allowed", "too_long"
            )
        _check_no_repeat(plan.tools, "the plan")
        out = _check_chain(plan.tools, inputs[0], registry, "the plan")
    elif isinstance(plan, NonlinearPlan):
        if len(inputs) < 2:
            raise PlanTypeError(
                f"the task has 1 input ({inputs[0] if inputs else 'none'}); expected a linear plan, "
                f"got a nonlinear plan with {len(plan.branches)} branches",
                "branch_count",
            )
        if len(plan.branches) != len(inputs):
            raise PlanTypeError(
                f"the task has {len(inputs)} inputs ({', '.join(inputs)}); the plan has "
                f"{len(plan.branches)} branches",
                "branch_count",
            )
        if plan.join not in registry:
            raise unknown_tool_error(plan.join, registry)
        join = registry[plan.join]
        if join.arity != len(inputs):
            raise PlanTypeError(
                f"join tool {plan.join!r} takes {join.arity} input(s); the plan has "
                f"{len(plan.branches)} branches",
                "bad_join",
            )
        for i, (branch, modality) in enumerate(zip(plan.branches, inputs)):
            where = f"branch {i + 1}"
            if len(branch) > limits.max_branch:
                raise PlanTypeError(
                    f"{where} has {len(branch)} tools; at most {limits.max_branch} allowed", "too_long"
                )
            _check_no_repeat((*branch, plan.join, *plan.tail), f"{where} and the tail")
            out_i = _check_chain(branch, modality, registry, where)
            if out_i != join.inputs[i]:
                raise PlanTypeError(
                    f"join tool {plan.join!r} takes {join.inputs[i]} as input {i + 1} but {where} "
                    f"gives {out_i}",
                    "modality_mismatch",
                )
        if len(plan.tail) > limits.max_tail:
            raise PlanTypeError(
                f"tail has {len(plan.tail)} tools; at most {limits.max_tail} allowed", "too_long"
            )
        out = _check_chain(plan.tail, join.output, registry, "the tail")
    else:
        raise PlanSyntaxError(f"expected a LinearPlan or NonlinearPlan, got {type(plan).__name__}")
    if out != target:
        last = plan.all_tools[-1]
        raise PlanTypeError(
            f"the plan ends with {last!r}, which outputs {out}; the task's target is {target}", "bad_end"
        )
    return plan


def parse_and_check(
    text_or_plan: str | Plan,
    registry: ToolRegistry,
    inputs: Sequence[str],
    target: str,
    limits: PlanLimits | None = None,
) -> Plan:
    plan = parse_plan(text_or_plan, registry) if isinstance(text_or_plan, str) else text_or_plan
    return check_plan(plan, registry, inputs, target, limits)


# ------------------------------------------------------------------------------- enumeration


def _chains(
    registry: ToolRegistry, start: str, max_len: int, banned: frozenset[str] = frozenset()
) -> Iterator[tuple[tuple[str, ...], str]]:
    """All chains of distinct single-input tools from ``start`` (the empty one first), with outputs."""
    tools = registry.single_input()

    def rec(prefix: tuple[str, ...], modality: str) -> Iterator[tuple[tuple[str, ...], str]]:
        yield prefix, modality
        if len(prefix) == max_len:
            return
        for t in tools:
            if t.inputs[0] == modality and t.name not in prefix and t.name not in banned:
                yield from rec((*prefix, t.name), t.output)

    yield from rec((), start)


def enumerate_plans(
    registry: ToolRegistry, inputs: Sequence[str], target: str, limits: PlanLimits | None = None
) -> Iterator[Plan]:
    """Every valid plan for a task signature within ``limits``, in a deterministic order."""
    inputs = tuple(inputs)
    limits = limits or PlanLimits()
    if len(inputs) == 1:
        for chain, out in _chains(registry, inputs[0], limits.max_tools):
            if chain and out == target:
                yield LinearPlan(chain)
        return
    for join in registry.multi_input():
        if join.arity != len(inputs):
            continue
        tails = [
            c for c, out in _chains(registry, join.output, limits.max_tail, frozenset({join.name}))
            if out == target
        ]
        for tail in tails:
            banned = frozenset({join.name, *tail})
            per_branch = [
                [c for c, out in _chains(registry, m, limits.max_branch, banned) if out == want]
                for m, want in zip(inputs, join.inputs)
            ]
            for branches in itertools.product(*per_branch):
                yield NonlinearPlan(tuple(branches), join.name, tail)
