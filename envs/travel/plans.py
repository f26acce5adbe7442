"""Plans in the official JSON format: a list of per-day records

    {"days": 1, "current_city": "from A to B", "transportation": "Flight Number: F..., from A to B, ...",
     "breakfast": "-", "attraction": "X, B;Y, B;", "lunch": "-", "dinner": "Z, B", "accommodation": "H, B"}

:func:`parse_plan` turns planner text into that list (JSON, a Python literal, optionally in a
fenced code block, or a submission record ``{"idx": .., "plan": [...]}``) and raises
:class:`PlanParseError` with the reason when it cannot; :func:`format_plan` writes the canonical
text. Missing fields are *not* parse errors: the evaluator judges them (complete information).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from envs.travel.schema import PLAN_FIELDS

Plan = list[dict[str, Any]]
_FENCE = re.compile(r"```(?:json|python|JSON)?\s*\n?(.*?)```", re.S)
MAX_PLAN_CHARS = 100_000


class PlanParseError(ValueError):
    """Plan text that is not a list of day records; ``reason`` is a short machine-readable tag."""

    def __init__(self, message: str, reason: str = "format"):
        super().__init__(message)
        self.reason = reason


def _decode(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as jexc:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise PlanParseError(
                f"plan text is neither JSON nor a Python literal (JSON error: {jexc.msg} at line "
                f"{jexc.lineno} column {jexc.colno})", "syntax") from None


def parse_plan(text: Any) -> Plan:
    """Planner output -> list of day dicts (values kept; None -> ''). Raises PlanParseError."""
    if isinstance(text, list):
        data: Any = text
    else:
        if not isinstance(text, str):
            raise PlanParseError(f"plan must be text or a list of day records, got {type(text).__name__}", "type")
        if len(text) > MAX_PLAN_CHARS:
            raise PlanParseError(f"plan text has {len(text)} characters (limit {MAX_PLAN_CHARS})", "too_long")
        body = text.strip()
        if not body:
            raise PlanParseError("plan text is empty", "empty")
        m = _FENCE.search(body)
        if m:
            body = m.group(1).strip()
        elif not body.startswith(("[", "{")):
            start = min((i for i in (body.find("["), body.find("{")) if i >= 0), default=-1)
            if start < 0:
                raise PlanParseError("plan text contains no JSON list of day records ('[' not found)", "syntax")
            body = body[start:]
        data = _decode(body)
    if isinstance(data, dict):
        if "plan" not in data:
            raise PlanParseError(f"plan is an object without a 'plan' key (keys: {sorted(map(str, data))[:8]})", "structure")
        data = data["plan"]
    if not isinstance(data, list):
        raise PlanParseError(f"plan must be a list of day records, got {type(data).__name__}", "structure")
    if not data:
        raise PlanParseError("plan has no days", "empty")
    out: Plan = []
    for i, day in enumerate(data, 1):
        if not isinstance(day, dict):
            raise PlanParseError(f"day {i} is a {type(day).__name__}, expected an object with "
                                 f"{', '.join(PLAN_FIELDS)}", "structure")
        rec: dict[str, Any] = {}
        for k, v in day.items():
            if not isinstance(k, str):
                raise PlanParseError(f"day {i} has a non-text key {k!r}", "structure")
            if v is None:
                v = ""
            elif isinstance(v, (list, dict)):
                raise PlanParseError(f"day {i} field {k!r} is a {type(v).__name__}, expected text", "structure")
            elif not isinstance(v, (str, int, float, bool)):
                v = str(v)
            rec[k] = v
        out.append(rec)
    return out


def format_plan(plan: Plan, indent: int | None = None) -> str:
    return json.dumps(plan, ensure_ascii=False, indent=indent)


def make_day(day: int, current_city: str, transportation: str = "-", breakfast: str = "-",
             attraction: str = "-", lunch: str = "-", dinner: str = "-", accommodation: str = "-") -> dict[str, Any]:
    return {"days": day, "current_city": current_city, "transportation": transportation,
            "breakfast": breakfast, "attraction": attraction, "lunch": lunch, "dinner": dinner,
            "accommodation": accommodation}
