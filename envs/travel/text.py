"""Entity strings of a plan: how the official evaluator splits "Name, City", "from A to B",
"Flight Number: F..., ..." and parenthesised states, and how the sandbox formats them.

The regular expressions reproduce the official parsing behaviour (``utils/func.py`` and the
evaluation scripts of OSU-NLP-Group/TravelPlanner) because verdicts depend on it: for example a
name is everything before the *last* comma, and "from A to B" ends at the first comma.
"""

from __future__ import annotations

import re
from typing import Any

_FROM_TO = re.compile(r"from\s+(.+?)\s+to\s+([^,]+)(?=[,\s]|$)")
_PAREN = re.compile(r"^(.*?)\([^)]*\)")
_NAME_CITY = re.compile(r"(.*?),\s*([^,]+)(\(\w[\w\s]*\))?$")
FLIGHT_TAG = "Flight Number: "


def as_text(value: Any) -> str:
    """A plan field as text: missing / None -> '', other scalars -> str."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def filled(value: Any) -> bool:
    """A field counts as given when truthy and not '-' (the official test)."""
    return bool(value) and value != "-"


def from_to(text: str) -> tuple[str | None, str | None]:
    m = _FROM_TO.search(text)
    return (m.group(1), m.group(2)) if m else (None, None)


def before_paren(text: str) -> str:
    m = _PAREN.search(text)
    return m.group(1) if m else text


def name_city(text: str) -> tuple[str, str]:
    """'Name, City' -> (name, city): the city is after the last comma; ('-', '-') if no comma."""
    m = _NAME_CITY.search(text)
    if not m:
        return "-", "-"
    return m.group(1).strip(), before_paren(m.group(2).strip()).strip()


def flight_number(text: str) -> str | None:
    """The number after 'Flight Number: ' up to the next comma (None when the tag is absent)."""
    if FLIGHT_TAG not in text:
        return None
    return text.split(FLIGHT_TAG, 1)[1].split(",")[0]


def transport_mode(text: str) -> str | None:
    """'Taxi', 'Self-driving' or 'Flight' by the official precedence (taxi first), else None."""
    low = text.lower()
    if "taxi" in low:
        return "Taxi"
    if "self-driving" in low:
        return "Self-driving"
    if "flight" in low:
        return "Flight"
    return None


def entity(name: str, city: str) -> str:
    return f"{name}, {city}"


def flight_text(number: str, origin: str, dest: str, dep: str, arr: str) -> str:
    return f"{FLIGHT_TAG}{number}, from {origin} to {dest}, Departure Time: {dep}, Arrival Time: {arr}"


def ground_text(mode: str, origin: str, dest: str, duration: str, distance: str, cost: int) -> str:
    label = {"self-driving": "Self-driving", "taxi": "Taxi"}[mode]
    return f"{label}, from {origin} to {dest}, duration: {duration}, distance: {distance}, cost: {cost}"


def attractions_text(items: list[str]) -> str:
    """The official list format: every attraction followed by ';' (the evaluator drops the part
    after the last ';')."""
    return "".join(f"{a};" for a in items) if items else "-"
