"""Entity strings of a plan: how the official evaluator splits "Name, City", "from A to B",
"Flight Number: F..., ..." and parenthesised states, and how the sandbox formats them.

The parsers reproduce the official parsing behaviour (``utils/func.py`` and the evaluation scripts
of OSU-NLP-Group/TravelPlanner) because verdicts depend on it: for example a name is everything
before the *last* comma, and "from A to B" ends at the first comma. The official code matches
backtracking regular expressions, which cost time quadratic in a field's length (the name-city
pattern on a text without a comma, the from-to pattern on many 'from's without a 'to'); the same
results come here from string scans in linear time. Each function names the official pattern it
reproduces; ``tests/envs/travel/test_travel_text.py`` checks them against it.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

FLIGHT_TAG = "Flight Number: "
# the official 'from A to B' pattern: on a text of at most _SHORT characters its backtracking costs
# little (the quadratic term is bounded) and it is faster than a scan written in Python
_FROM_TO = re.compile(r"from\s+(.+?)\s+to\s+([^,]+)(?=[,\s]|$)")
_SHORT = 256
# a valid 'to' of 'from A to B': whitespace, 'to', whitespace, then anything but a comma
_TO = re.compile(r"\sto\s[^,]")


def as_text(value: Any) -> str:
    """A plan field as text: missing / None -> '', other scalars -> str."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def filled(value: Any) -> bool:
    """A field counts as given when truthy and not '-' (the official test)."""
    return bool(value) and value != "-"


def from_to(text: str) -> tuple[str | None, str | None]:
    """'... from A to B, ...' -> (A, B), (None, None) when there is none: the groups of the official
    ``re.search(r"from\\s+(.+?)\\s+to\\s+([^,]+)(?=[,\\s]|$)", text)`` -- that search itself on a
    short text, :func:`from_to_scan` (linear time) on a longer one."""
    if len(text) <= _SHORT:
        m = _FROM_TO.search(text)
        return (m.group(1), m.group(2)) if m else (None, None)
    return from_to_scan(text)


def from_to_scan(text: str) -> tuple[str | None, str | None]:
    """:func:`from_to` by a scan in linear time.

    The official pattern's first match is at the first 'from' followed by whitespace for which an A
    exists. A is the shortest non-empty run without a newline, after the whitespace that follows
    'from' (taken greedily, given back one character at a time), that is followed by a valid 'to'
    (whitespace, 'to', whitespace, then not a comma); B runs from there to the next comma or the end."""
    n = len(text)
    found = [-1, n + 1]  # the first valid 'to' (its leading whitespace) at or after found[1]
    run_start: dict[int, int] = {}  # a valid 'to' -> where the whitespace run before it starts

    def first_to(lo: int) -> int:
        """The first position q >= lo where r'\\s+to\\s[^,]' matches (-1: none): each search result
        serves every later ``lo`` up to it, so all the searches together scan the text once."""
        if not (found[1] <= lo and (found[0] < 0 or lo <= found[0])):
            m = _TO.search(text, lo)
            found[:] = [m.start() if m else -1, lo]
        at = found[0]
        if at < 0:
            return -1
        if at not in run_start:
            r = at
            while r > 0 and text[r - 1].isspace():
                r -= 1
            run_start[at] = r
        return max(run_start[at], lo)

    newline = -1  # the first newline at or after the current A's start (n: none)
    s = text.find("from")
    while s >= 0:
        f = s + 4
        w = f
        while w < n and text[w].isspace():
            w += 1
        if w > f:  # 'from' is followed by whitespace: A starts after all of it, or gives some back
            q = first_to(w + 1)
            if newline < w:
                newline = text.find("\n", w)
                newline = n if newline < 0 else newline
            if q >= 0 and q <= newline:  # A = text[w:q] holds no newline
                return text[w:q], _after_to(text, q)
            # giving back whitespace only helps when the run itself leads into a valid 'to': then A
            # is one whitespace character inside it, the last one that is not a newline
            if w - f >= 3 and _TO.match(text, w - 1):
                for a in range(w - 2, f, -1):
                    if text[a] != "\n":
                        return text[a], _after_to(text, a + 1)
        s = text.find("from", f)
    return None, None


def _after_to(text: str, q: int) -> str:
    """B of 'from A to B' when A ends at ``q`` (whitespace before a valid 'to'): from after the
    whitespace that follows 'to' (one character of it given back when a comma or the end comes
    next) to the next comma or the end."""
    n = len(text)
    t = q
    while text[t].isspace():
        t += 1
    e = t + 2  # after 'to'
    while e < n and text[e].isspace():
        e += 1
    start = e if e < n and text[e] != "," else e - 1
    end = text.find(",", start)
    return text[start:] if end < 0 else text[start:end]


def before_paren(text: str) -> str:
    """The text before the first '(' if it is on the first line and a ')' follows it, else the
    text: ``re.search(r"^(.*?)\\([^)]*\\)", text)`` of the official ``extract_before_parenthesis``,
    in linear time."""
    j = text.find("(")
    if j < 0 or text.find(")", j + 1) < 0 or "\n" in text[:j]:
        return text
    return text[:j]


def name_city(text: str) -> tuple[str, str]:
    """'Name, City' -> (name, city): the city is after the last comma (its parenthesised state
    dropped), the name is the text before that comma on its line; ('-', '-') when there is no comma
    or nothing follows the last one. The stripped groups of the official ``get_valid_name_city``'s
    ``re.search(r"(.*?),\\s*([^,]+)(\\(\\w[\\w\\s]*\\))?$", text)``, in linear time."""
    i = text.rfind(",")
    if i < 0 or i == len(text) - 1:
        return "-", "-"
    start = text.rfind("\n", 0, i) + 1
    return text[start:i].strip(), before_paren(text[i + 1:].strip()).strip()


def entity_name_city(text: str) -> tuple[str, str]:
    """'Name, City' -> (name, city) as the default evaluator reads it: the name is *all* the text
    before the last comma, stripped (a name holding a newline stays whole; the official pattern of
    :func:`name_city` keeps its last line only), the city as :func:`name_city` reads it; ('-', '-')
    when there is no comma or nothing follows the last one."""
    i = text.rfind(",")
    if i < 0 or i == len(text) - 1:
        return "-", "-"
    return text[:i].strip(), before_paren(text[i + 1:].strip()).strip()


def name_key(name: str) -> str:
    """What two names must share to be the same entity for the default evaluator: the name in
    Unicode normal form NFC with every run of whitespace (newlines included) one space, stripped."""
    return " ".join(unicodedata.normalize("NFC", name).split())


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
