"""Which experts failed while a batch of plans was scored (``OpenAGIEnv.expert_failures``).

A broken expert or cache would otherwise only show as lower rewards: the trainer logs the failure
rate and warns with each tool that failed on every call of a step."""

from __future__ import annotations

from collections.abc import Sequence

EXAMPLE_CHARS = 300  # how much of a failure's message a warning quotes


def plan_tools(plan_text: str) -> set[str]:
    """The tool names of a plan's canonical text (``"A, (B, C), D"`` -> ``{"A", "B", "C", "D"}``)."""
    return {t.strip("() ") for t in plan_text.replace(")", ",").split(",")} - {""}


def error_tool(error: str, tools: set[str]) -> str:
    """The tool a sample error names: the longest of the plan's ``tools`` it starts with (tool names
    hold spaces: ``"Image Deblurring returned an array holding NaN..."`` -> ``"Image Deblurring"``);
    without one, the text before ``" raised "`` / ``" returned "``."""
    named = [t for t in tools if error.startswith(t + " ")]
    if named:
        return max(named, key=len)
    for verb in (" raised ", " returned "):
        if verb in error:
            return error.split(verb, 1)[0]
    return error.split(" (", 1)[0]


def expert_failures(results: Sequence) -> tuple[float, list[str]]:
    """``(fraction of the executed samples of valid plans an expert failed on, one warning per tool that
    failed on every call of this batch)``. A sample error reads ``"<tool> raised ..."`` or ``"<tool>
    returned <what>"`` (an unusable output; :func:`error_tool` finds the tool); a tool "worked" when a
    plan using it had a sample without an error."""
    executed = failed = 0
    failing: dict[str, int] = {}  # tool -> samples it failed on
    worked: set[str] = set()  # tools of plans with at least one successful sample
    for r in results:
        if not r.valid:
            continue
        executed += len(r.sample_errors)
        errs = [e for e in r.sample_errors if e is not None]
        failed += len(errs)
        tools = plan_tools(r.plan_text)
        for e in errs:
            tool = error_tool(e, tools)
            failing[tool] = failing.get(tool, 0) + 1
        if len(errs) < len(r.sample_errors):
            worked.update(plan_tools(r.plan_text))
    warnings = []
    for tool, n in failing.items():
        if tool not in worked:
            example = next(e for r in results if r.valid for e in r.sample_errors
                           if e and error_tool(e, plan_tools(r.plan_text)) == tool)
            warnings.append(f"expert {tool!r} failed on every call ({n} samples): {example[:EXAMPLE_CHARS]}")
    return (failed / executed if executed else 0.0), warnings
