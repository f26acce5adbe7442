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
import sys
import warnings
from typing import Any

from envs.travel.schema import PLAN_FIELDS

Plan = list[dict[str, Any]]
MAX_PLAN_CHARS = 100_000
"""The most characters a plan may have: its text, or for a plan given as day records (a list, not
text) the characters of its keys and values (each day counting 2, each field 4 more: ``{}``,
quotes and separators, roughly as its JSON text would)."""
_MAX_INT_BITS = int(MAX_PLAN_CHARS * 3.33)  # an integer longer than that has over MAX_PLAN_CHARS digits


class PlanParseError(ValueError):
    """Plan text that is not a list of day records; ``reason`` is a short machine-readable tag."""

    def __init__(self, message: str, reason: str = "format"):
        super().__init__(message)
        self.reason = reason


def fenced_block(text: str) -> str | None:
    """The inside of the first fenced code block (after its json / python / JSON tag), None when
    there is none: ``re.search(r"```(?:json|python|JSON)?\\s*\\n?(.*?)```", text, re.S).group(1)``
    up to leading whitespace (the caller strips it), in linear time (that search backtracks over
    the whitespace after an unclosed fence: time quadratic in its length)."""
    start = text.find("```")
    if start < 0:
        return None
    end = text.find("```", start + 3)  # no tag or whitespace holds a backtick: this closes it
    if end < 0:
        return None
    start += 3
    tag = next((t for t in ("json", "python", "JSON") if text.startswith(t, start)), "")
    return text[start + len(tag):end]


def _decode(text: str) -> Any:
    """JSON, else a Python literal; text that is neither -- malformed, nested deeper than the
    decoders go, or holding an integer too long to be a number -- is a ``syntax`` error."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as jexc:  # JSONDecodeError is a ValueError
        if isinstance(jexc, json.JSONDecodeError):
            why = f"{jexc.msg} at line {jexc.lineno} column {jexc.colno}"
        elif isinstance(jexc, RecursionError):
            why = "nested too deeply"
        else:  # e.g. an integer of more digits than Python converts
            why = str(jexc).split(":")[0]
        try:
            with warnings.catch_warnings():  # the compiler warns on free text ("1if", "3days"): the error says it
                warnings.simplefilter("ignore", SyntaxWarning)
                return ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise PlanParseError(f"plan text is neither JSON nor a Python literal (JSON error: {why})",
                                 "syntax") from None


def _number_text_length(value: Any, day: int, key: str) -> int:
    """How many characters a field's non-text value is as text (what the evaluator reads); an
    integer too long to be written out is a ``too_long`` error (the evaluator could not read it)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > _MAX_INT_BITS:
            raise PlanParseError(f"day {day} field {_short(key)} is an integer of about "
                                 f"{int(value.bit_length() * 0.30103):,} digits (a plan has at most "
                                 f"{MAX_PLAN_CHARS:,} characters)", "too_long")
        try:
            return len(str(value))
        except ValueError:  # more digits than sys.get_int_max_str_digits()
            raise PlanParseError(f"day {day} field {_short(key)} is an integer too long to write out (more "
                                 f"than {sys.get_int_max_str_digits():,} digits)", "too_long") from None
    return len(str(value))


def parse_plan(text: Any) -> Plan:
    """Planner output -> list of day dicts (values kept; None -> ''). Raises PlanParseError."""
    if isinstance(text, (list, dict)):  # day records, or a submission record holding them (as its text is read)
        data: Any = text
    else:
        if not isinstance(text, str):
            raise PlanParseError(f"plan must be text, a list of day records or a record with a 'plan' key, "
                                 f"got {type(text).__name__}", "type")
        if len(text) > MAX_PLAN_CHARS:
            raise PlanParseError(f"plan text has {len(text)} characters (limit {MAX_PLAN_CHARS})", "too_long")
        body = text.strip()
        if not body:
            raise PlanParseError("plan text is empty", "empty")
        fenced = fenced_block(body)
        if fenced is not None:
            body = fenced.strip()
        elif not body.startswith(("[", "{")):
            start = min((i for i in (body.find("["), body.find("{")) if i >= 0), default=-1)
            if start < 0:
                raise PlanParseError("plan text contains no JSON list of day records ('[' not found)", "syntax")
            body = body[start:]
        data = _decode(body)
    if isinstance(data, dict):
        if "plan" not in data:
            keys = sorted(_short(k, str) for k in data)[:8]
            raise PlanParseError(f"plan is an object without a 'plan' key (keys: {keys})", "structure")
        data = data["plan"]
    if not isinstance(data, list):
        raise PlanParseError(f"plan must be a list of day records, got {type(data).__name__}", "structure")
    if not data:
        raise PlanParseError("plan has no days", "empty")
    bounded = isinstance(text, str)  # text is bounded by its length; day records are counted here
    size = 0
    out: Plan = []
    for i, day in enumerate(data, 1):
        if not isinstance(day, dict):
            raise PlanParseError(f"day {i} is a {type(day).__name__}, expected an object with "
                                 f"{', '.join(PLAN_FIELDS)}", "structure")
        rec: dict[str, Any] = {}
        size += 2
        for k, v in day.items():
            if not isinstance(k, str):
                raise PlanParseError(f"day {i} has a non-text key {_short(k)}", "structure")
            if v is None:
                v = ""
            elif isinstance(v, (list, dict)):
                raise PlanParseError(f"day {i} field {_short(k)} is a {type(v).__name__}, expected text", "structure")
            elif not isinstance(v, (str, int, float, bool)):
                v = str(v)
            size += len(k) + 4 + (len(v) if isinstance(v, str) else _number_text_length(v, i, k))
            if size > MAX_PLAN_CHARS and not bounded:
                raise PlanParseError(f"plan given as day records has more than {MAX_PLAN_CHARS:,} characters "
                                     f"(at day {i} field {_short(k)}; limit {MAX_PLAN_CHARS:,}, as for plan text)",
                                     "too_long")
            rec[k] = v
        if size > MAX_PLAN_CHARS and not bounded:
            raise PlanParseError(f"plan given as day records has more than {MAX_PLAN_CHARS:,} characters "
                                 f"(at day {i}; limit {MAX_PLAN_CHARS:,}, as for plan text)", "too_long")
        out.append(rec)
    return out


def _short(key: Any, show=repr) -> str:
    """A key as an error message shows it (``show``: repr or str), cut to 40 characters."""
    try:
        r = show(key)
    except ValueError:  # an integer too long to write out
        return f"<{type(key).__name__} too long to show>"
    return r if len(r) <= 40 else r[:37] + "..."


def format_plan(plan: Plan, indent: int | None = None) -> str:
    return json.dumps(plan, ensure_ascii=False, indent=indent)


def make_day(day: int, current_city: str, transportation: str = "-", breakfast: str = "-",
             attraction: str = "-", lunch: str = "-", dinner: str = "-", accommodation: str = "-") -> dict[str, Any]:
    return {"days": day, "current_city": current_city, "transportation": transportation,
            "breakfast": breakfast, "attraction": attraction, "lunch": lunch, "dinner": dinner,
            "accommodation": accommodation}
