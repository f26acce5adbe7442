"""Execute plans on samples: batched over samples, each (sample, plan prefix) computed once.

A linear plan ``A, B, C`` is run prefix by prefix: the outputs of ``A`` on every sample, then of
``A, B``, ... Each prefix's outputs are cached under ``(sample uid, prefix)``, so another plan that
starts with ``A, B`` reuses them. A nonlinear plan runs its branches (keyed per input), the join
and the tail the same way. An expert that raises on a batch is retried sample by sample, so one
bad sample fails alone; an output that is no usable value of the tool's output modality (None,
NaN, an empty array, text for an image: :mod:`envs.openagi.outputs`) fails its sample the same
way; failures are reported, never cached, and score 0. The registry remembers
a tool's failures in a row (:class:`envs.openagi.registry.ToolHealth`): a tool failing every call
is soon called once per batch (no per-sample retries), then not at all but for a probe call now
and then, its samples failing at once with its last error; one success clears the record.

Inside :meth:`PlanExecutor.sharing` (one ``reward_plans`` call) an expert request made again -- the
same tool at the same plan prefix on the same samples, as when two plans of a task start alike or
are the same plan -- is answered with the first one's outputs (or exception) instead of calling
the expert again. Everything else runs as without it (which samples are asked, the per-sample
retries, the failure record), so results are the same as long as experts are deterministic
functions of their inputs (the lite ones are). It is no cache: it is dropped when the block ends.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from envs.openagi.cache import ExecutionCache, nbytes
from envs.openagi.merged_requests import merged_outputs
from envs.openagi.outputs import output_problem
from envs.openagi.plans import LinearPlan, NonlinearPlan, Plan, clip_text
from envs.openagi.registry import PROBE_EVERY, ToolRegistry
from envs.openagi.tasks import Sample

_NOT_MERGED = object()

SHARED_REQUEST_BYTES = 256 * 2**20
"""What :meth:`PlanExecutor.sharing` may hold of the requests it answers again (their outputs'
estimated bytes); beyond it the least recently used are dropped (asked of the expert again)."""


@dataclass
class Execution:
    outputs: list[Any]  # None where the sample failed
    errors: list[str | None]


class PlanExecutor:
    def __init__(self, registry: ToolRegistry, cache: ExecutionCache | None = None):
        self.registry = registry
        self.cache = cache
        self.tool_calls = 0  # batched expert calls made (a cost measure for benchmarks)
        self._shared: ExecutionCache | None = None  # the requests answered so far, inside sharing()
        self._merged: dict[tuple, Any] = {}  # (key, uid) -> output of merged requests, inside sharing()

    @contextmanager
    def sharing(self, merge: Sequence[tuple[Plan, Sequence[Sample]]] = ()) -> Iterator[None]:
        """Within the block, a request made again is answered without calling the expert (see the
        module docstring); nested blocks share the outer one's requests. ``merge``: the (plan,
        samples) the block will run, whose requests for batch-invariant tools are made first, merged
        into one call per tool and plan level (:func:`envs.openagi.merged_requests.merged_outputs`)."""
        if self._shared is not None:
            yield
            return
        self._shared = ExecutionCache(SHARED_REQUEST_BYTES)
        if merge:
            self._merged, calls = merged_outputs(self.registry, merge, SHARED_REQUEST_BYTES)
            self.tool_calls += calls
        try:
            yield
        finally:
            self._shared, self._merged = None, {}

    def run(self, plan: Plan, samples: Sequence[Sample]) -> Execution:
        n = len(samples)
        values: list[Any] = [None] * n
        errors: list[str | None] = [None] * n
        if isinstance(plan, LinearPlan):
            values = [s.inputs[0] for s in samples]
            self._chain(("L",), plan.tools, samples, values, errors)
        elif isinstance(plan, NonlinearPlan):
            branch_outs = []
            for i, branch in enumerate(plan.branches):
                vals = [s.inputs[i] for s in samples]
                self._chain(("B", i), branch, samples, vals, errors)
                branch_outs.append(vals)
            key = ("J", plan.branches, plan.join)
            values = self._apply(key, plan.join, samples, branch_outs, errors)
            self._chain(key, plan.tail, samples, values, errors)
        else:
            raise TypeError(f"expected a LinearPlan or NonlinearPlan, got {type(plan).__name__}")
        return Execution([None if e else v for v, e in zip(values, errors)], errors)

    def _chain(self, base: tuple, tools: Sequence[str], samples, values: list, errors: list) -> None:
        """Apply ``tools`` in turn, updating ``values`` in place."""
        for j, name in enumerate(tools):
            key = (*base, tuple(tools[: j + 1]))
            values[:] = self._apply(key, name, samples, [values], errors)

    def _apply(self, key: tuple, name: str, samples, args: list[list], errors: list) -> list:
        out: list[Any] = [None] * len(samples)
        todo = []
        for idx, s in enumerate(samples):
            if errors[idx]:
                continue
            if self.cache is not None:
                hit, val = self.cache.lookup((s.uid, key))
                if hit:
                    out[idx] = val
                    continue
            todo.append(idx)
        if not todo:
            return out
        tool = self.registry[name]
        health = self.registry.health(name)
        if not health.should_call():  # down: fail at once with the remembered error
            for idx in todo:
                errors[idx] = (f"{name} {health.last_error} (not called: it produced nothing on its last "
                               f"{health.failures} requests; it is tried again once every {PROBE_EVERY})")
            return out
        batch = [[a[i] for i in todo] for a in args]
        results = self._call_batch(tool, (key, tuple(samples[i].uid for i in todo)), batch)
        last_error = None
        if results is None:  # isolate the failing samples
            results = []
            for pos, idx in enumerate(todo):
                value, raised = self._call_one(tool, (key, samples[idx].uid), [b[pos] for b in batch])
                if raised is not None:  # an expert fault fails the sample, not the run
                    last_error = errors[idx] = f"{name} raised {raised}"
                results.append(value)
        for pos, idx in enumerate(todo):  # an unusable output (None, NaN, wrong type...) fails its sample too
            why = None if errors[idx] else output_problem(results[pos], tool.output)
            if why is not None:
                last_error = errors[idx] = f"{name} {why}"
        if last_error is not None and all(errors[idx] for idx in todo):
            health.failed(last_error.removeprefix(f"{name} "))  # "raised <error>" or "returned <what>"
        else:
            health.succeeded()
        for idx, val in zip(todo, results):
            if errors[idx]:
                continue
            out[idx] = val
            if self.cache is not None:
                self.cache.put((samples[idx].uid, key), val)
        return out


    def _call_batch(self, tool, request: tuple, batch: list[list]) -> list | None:
        """``tool``'s outputs on ``batch`` (``request`` names it: plan prefix, sample uids), None
        when it raised; answered again from :meth:`sharing`'s requests where it was made before."""
        if self._shared is not None:
            hit, results = self._shared.lookup(("batch", request))
            if hit:
                return results
        if self._merged and tool.batch_invariant:  # every sample's output made by a merged request
            key, uids = request
            merged = [self._merged.get((key, uid), _NOT_MERGED) for uid in uids]
            if not any(v is _NOT_MERGED for v in merged):
                return merged
        try:
            self.tool_calls += 1
            results = tool(*batch)
        except Exception:
            results = None
        if self._shared is not None:
            self._shared.put(("batch", request), results, size=64 + sum(nbytes(v) for v in results or ()))
        return results

    def _call_one(self, tool, request: tuple, args: list) -> tuple[Any, str | None]:
        """``tool`` on one sample's ``args``: (its output, None), or (None, what it raised)."""
        if self._shared is not None:
            hit, answer = self._shared.lookup(("one", request))
            if hit:
                return answer
        try:
            self.tool_calls += 1
            answer = (tool(*[[a] for a in args])[0], None)
        except Exception as exc:
            answer = (None, _describe(exc))
        if self._shared is not None:
            self._shared.put(("one", request), answer, size=64 + nbytes(answer[0]))
        return answer


def _describe(exc: BaseException) -> str:
    """``Type: message`` of an expert's exception, its message clipped (it may echo a huge input)."""
    return f"{type(exc).__name__}: {clip_text(str(exc), 300)}"
