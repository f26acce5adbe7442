"""Which experts failed while a batch of plans was scored (``OpenAGIEnv.expert_failures``).

A broken expert or cache would otherwise only show as lower rewards: the trainer logs the failure
rate and warns with each tool that failed on every call of a step."""

from __future__ import annotations

from collections.abc import Sequence

EXAMPLE_CHARS = 300  # how much of a failure's message a warning quotes


def plan_tools(plan_text: str) -> set[str]:
    """The tool names of a plan's canonical text (``"A, (B, C), D"`` -> ``{"A", "B", "C", "D"}``)."""
    return {t.strip("() ") for t in plan_text.replace(")", ",").split(",")} - {""}


def expert_failures(results: Sequence) -> tuple[float, list[str]]:
    """``(fraction of the executed samples of valid plans an expert failed on, one warning per tool that
    failed on every call of this batch)``. A sample error reads ``"<tool> raised ..."``; a tool
    "worked" when a plan using it had a sample without an error."""
    executed = failed = 0
    failing: dict[str, int] = {}  # tool -> samples it failed on
    worked: set[str] = set()  # tools of plans with at least one successful sample
    for r in results:
        if not r.valid:
            continue
        executed += len(r.sample_errors)
        errs = [e for e in r.sample_errors if e is not None]
        failed += len(errs)
        for e in errs:
            tool = e.split(" raised ", 1)[0]
            failing[tool] = failing.get(tool, 0) + 1
        if len(errs) < len(r.sample_errors):
            worked.update(plan_tools(r.plan_text))
    warnings = []
    for tool, n in failing.items():
        if tool not in worked:
            example = next(e for r in results if r.valid for e in r.sample_errors if e and e.startswith(tool))
            warnings.append(f"expert {tool!r} failed on every call ({n} samples): {example[:EXAMPLE_CHARS]}")
    return (failed / executed if executed else 0.0), warnings
