"""Requests of many linear plans for one batch-invariant tool, merged into one call.

Within one ``reward_plans`` call the executor runs plan after plan, one tool call per plan prefix on
that plan's samples (:class:`envs.openagi.executor.PlanExecutor`): with 64 plans of 8 tasks, a
restorer is called many times on 8 images each. :func:`merged_outputs` computes, level by level
(first tools, then two-tool prefixes, ...), every ``(plan prefix, sample)`` output those runs will
ask for, making one call per tool and level over every prefix and sample that needs it -- only for
tools whose outputs do not depend on the rest of the batch (:attr:`Tool.batch_invariant`), so each
output is bit for bit the one the plan's own call gives. The executor then answers a request from
them (:meth:`PlanExecutor.sharing`) but still runs its checks, retries and failure record as usual.

Nothing here decides a result: a merged call that raises leaves its prefixes to the plans' own
calls (which isolate the failing sample), an output that is no usable value is not continued (its
sample fails in the plan's own run), and anything not computed here is computed there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envs.openagi.cache import nbytes
from envs.openagi.outputs import output_problem
from envs.openagi.plans import LinearPlan, Plan
from envs.openagi.registry import ToolRegistry
from envs.openagi.tasks import Sample


def merged_outputs(registry: ToolRegistry, jobs: Sequence[tuple[Plan, Sequence[Sample]]],
                   max_bytes: int) -> tuple[dict[tuple, Any], int]:
    """``{(("L", prefix), sample uid): output}`` of the linear plans of ``jobs`` (plan, its samples),
    for the prefixes whose tool is batch-invariant and whose input is known, and the tool calls
    made. Stops after the level where the outputs pass ``max_bytes`` (estimated)."""
    outputs: dict[tuple, Any] = {}
    calls = held = 0
    linear = [(p.tools, samples) for p, samples in jobs if isinstance(p, LinearPlan)]
    depth = 0
    while held <= max_bytes:
        depth += 1
        wanted: dict[str, dict[tuple, Any]] = {}  # tool -> {(key, uid): input}
        for tools, samples in linear:
            if len(tools) < depth or not _mergeable(registry, tools[depth - 1]):
                continue
            key, before = ("L", tools[:depth]), ("L", tools[: depth - 1])
            for s in samples:
                if (key, s.uid) in outputs:
                    continue
                if depth == 1:
                    wanted.setdefault(tools[0], {})[(key, s.uid)] = s.inputs[0]
                elif (before, s.uid) in outputs:
                    wanted.setdefault(tools[depth - 1], {})[(key, s.uid)] = outputs[(before, s.uid)]
        if not wanted:
            break
        for name, inputs in wanted.items():
            tool = registry[name]
            try:
                calls += 1
                results = tool(list(inputs.values()))
            except Exception:  # left to the plans' own calls, which isolate the failing sample
                continue
            for where, value in zip(inputs, results):
                if output_problem(value, tool.output) is None:
                    outputs[where] = value
                    held += nbytes(value)
    return outputs, calls


def _mergeable(registry: ToolRegistry, name: str) -> bool:
    tool = registry[name]
    return tool.batch_invariant and tool.arity == 1
