"""Sole-planning: a query's ``reference_information`` (the hub's column) as its candidate database.

The hub gives every query the tool outputs an agent would collect, as the literal of a list of
``{"Description": ..., "Content": ...}`` notes (the official ``Notebook.list_all``): descriptions
``Attractions in C``, ``Restaurants in C``, ``Accommodations in C``, ``Flight from A to B on
YYYY-MM-DD``, ``Self-driving from A to B``, ``Taxi from A to B``; contents the official tools'
tables as ``DataFrame.to_string(index=False)`` text (right-aligned columns, newlines written
``\\n``), the distance tool's sentence (``self-driving, from A to B, duration: ..., distance: ...,
cost: ...``) or a sentence saying there is nothing. Contents given as lists of row dicts (the
repository's ``*_ref_info.jsonl``: a dict Description -> rows) are read too.

:func:`reference_database` turns one query's notes into a :class:`SandboxDB` holding only those
rows (the cities: the notes' cities, in the query's destination state for 5 / 7-day trips);
:func:`union_database` merges many queries' notes into one (an env over a whole split). The solver,
the grammar and the planners then need no database download. What they cannot do without the full
tables: the evaluator's within-sandbox check (an entity the full tables hold but the notes do not is
judged missing) and any plan that uses a flight or hotel nobody collected.

**Checks.** Every number of a table (prices, costs, distances, nights, occupancy, ratings,
coordinates) must be a finite number in its column's range (:data:`NUMBER_RANGES`; maximum
occupancy a whole number), and a ground note's distance a finite number of km from 0 to
:data:`MAX_NUMBER`: NaN, infinite, negative and overflowing numbers are one :class:`HubFormatError`
line naming the query, the note, the row and the column. A query of the test split's layout
(:class:`envs.travel.hub.QueryText`, no origin or destination) gets its notes' cities, in no known state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from envs.travel.hub import HubFormatError, NotALiteralError, QueryText, read_literal
from envs.travel.query import TravelQuery
from envs.travel.sandbox import TABLES, SandboxDB
from envs.travel.schema import COLUMNS

SOLE_PLANNING = "reference_information"
"""``database_dir`` / ``--database`` value that builds the sandbox from the queries' own reference rows."""
UNKNOWN_STATE = "(state not in the reference information)"
_TABLE_OF = {"Attractions in ": "attractions", "Restaurants in ": "restaurants", "Accommodations in ": "accommodations"}
_FLIGHT = re.compile(r"^Flight from (.+) to (.+) on (\d{4}-\d{2}-\d{2})$")
_GROUND = re.compile(r"^(Self-driving|Taxi) from (.+) to (.+)$", re.I)
_DISTANCE = re.compile(r"duration: (?P<duration>.+?), distance: (?P<distance>.+?), cost: (?P<cost>.+)$")
MAX_NUMBER = 1e9
"""The largest price, cost, distance, night count or rating a note may hold (the real tables' largest
is under 10,000); past it sums of costs stop being a trip's."""
NUMBER_RANGES: dict[str, tuple[float, float]] = {
    "Price": (0, MAX_NUMBER), "Distance": (0, MAX_NUMBER), "price": (0, MAX_NUMBER),
    "minimum nights": (0, MAX_NUMBER), "maximum occupancy": (1, 1000), "review rate number": (0, MAX_NUMBER),
    "Average Cost": (0, MAX_NUMBER), "Aggregate Rating": (0, MAX_NUMBER), "Latitude": (-90, 90),
    "Longitude": (-180, 180)}
"""Each numeric column's accepted values (inclusive)."""
_INTEGER = {"maximum occupancy"}
_NAME_COLUMN = {"flights": "Flight Number", "accommodations": "NAME", "restaurants": "Name", "attractions": "Name"}
_UNESCAPE = {"\\n": "\n", "\\t": "\t", "\\r": "\r"}


def reference_notes(value: Any, where: str = "reference_information") -> list[dict[str, Any]]:
    """The column as a list of ``{"Description", "Content"}`` (its literal, a list, or a dict
    Description -> Content); a :class:`HubFormatError` naming ``where`` otherwise."""
    notes = value
    if isinstance(value, str):
        try:
            notes = read_literal(value)
        except NotALiteralError:
            notes = None
    if isinstance(notes, Mapping):
        notes = [{"Description": k, "Content": v} for k, v in notes.items()]
    if not isinstance(notes, list) or not all(isinstance(n, Mapping) and "Description" in n and "Content" in n
                                              for n in notes):
        raise HubFormatError(f"{where}: expected a list of {{'Description', 'Content'}} notes (or its literal), "
                             f"got {str(value)[:60]!r}")
    return [dict(n) for n in notes]


# ----------------------------------------------------------------------------- table text
def _header_columns(header: str, known: Sequence[str]) -> list[tuple[str, int]]:
    """(column, right edge) of each known column name in a to_string header, left to right."""
    found = []
    for name in known:
        m = re.search(r"(?<!\S)" + re.escape(name) + r"(?!\S)", header)
        if m:
            found.append((m.start(), name, m.end() - 1))
    return [(name, end) for _, name, end in sorted(found)]


def _unescape(text: str) -> str:
    return re.sub(r"\\[ntr]", lambda m: _UNESCAPE[m.group(0)], text)


def parse_table(content: Any, table: str, where: str) -> pd.DataFrame:
    """One note's rows in the table's columns (:data:`envs.travel.schema.COLUMNS`); a sentence
    (nothing found) gives no rows."""
    columns = COLUMNS[table]
    if isinstance(content, list):  # rows as dicts (the repository's *_ref_info.jsonl)
        rows = [{c: r.get(c) for c in columns} for r in content if isinstance(r, Mapping)]
        return _typed(pd.DataFrame(rows, columns=columns), table, where)
    lines = [ln for ln in str(content).split("\n") if ln.strip()]
    if not lines:
        return pd.DataFrame(columns=columns)
    cols = _header_columns(lines[0], columns)
    if not cols:  # "There is no flight from A to B on ...", "There is no attraction in this city."
        return pd.DataFrame(columns=columns)
    missing = [c for c in columns if c not in dict(cols)]
    if missing:
        raise HubFormatError(f"{where}: the table lacks column(s) {missing}; expected {columns}")
    data = lines[1:]
    start = 0
    index_width = [len(m.group(1)) for ln in data if (m := re.match(r"^(\d+)\s", ln))]
    if lines[0][:1] == " " and data and len(index_width) == len(data):  # written with its index
        start = max(index_width) + 1
    rows = []
    for ln in data:
        row, left = {}, start
        for name, end in cols:
            row[name] = _unescape(ln[left:end + 1].lstrip(" "))
            left = end + 1
        rows.append(row)
    return _typed(pd.DataFrame(rows, columns=[c for c, _ in cols])[columns], table, where)


def _number(value: Any) -> float | None:
    """A cell as a float, or None when it is no number (NaN, infinite and out-of-range values are
    left to the range check)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value or len(value) > 40:  # no price needs 40 characters; float() of thousands of digits is inf
            return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _typed(df: pd.DataFrame, table: str, where: str) -> pd.DataFrame:
    """Numeric columns as float64 (maximum occupancy int64), each value checked against
    :data:`NUMBER_RANGES`; the others as text."""
    df = df.reset_index(drop=True)
    names = df[_NAME_COLUMN[table]].tolist() if _NAME_COLUMN.get(table) in df.columns else [None] * len(df)
    for c in df.columns:
        if c not in NUMBER_RANGES:
            df[c] = df[c].astype(str)
            continue
        low, high = NUMBER_RANGES[c]
        values = []
        for i, raw in enumerate(df[c].tolist()):
            v = _number(raw)
            whole = c not in _INTEGER or (v is not None and v.is_integer())
            if v is None or not low <= v <= high or not whole:  # NaN fails every comparison
                kind = "a whole number" if c in _INTEGER else "a number"
                entry = f"row {i}" + (f" ({_show(names[i])})" if names[i] is not None else "")
                raise HubFormatError(f"{where} {entry}: column {c!r} holds a value that is not {kind} from "
                                     f"{_limit(low)} to {_limit(high)}: {_show(raw)}")
            values.append(v)
        df[c] = pd.Series(values, dtype="int64" if c in _INTEGER else "float64")
    return df


def _limit(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:g}"


def _show(value: Any) -> str:
    text = repr(str(value)[:60] if not isinstance(value, (int, float)) else value)
    return text if len(text) <= 62 else text[:59] + "..."


def _distance_row(content: Any, origin: str, dest: str, where: str) -> dict | None:
    m = _DISTANCE.search(str(content).strip())
    if not m:
        return None
    distance = m["distance"].strip()
    km = _number(distance.replace("km", "").replace(",", ""))
    if km is None or not 0 <= km <= MAX_NUMBER:
        raise HubFormatError(f"{where}: distance {_show(distance)}; expected a number of km from 0 to "
                             f"{_limit(MAX_NUMBER)}")
    return {"origin": origin, "destination": dest, "duration": m["duration"].strip(), "distance": distance}


# ----------------------------------------------------------------------------- databases
def _tables(notes: Iterable[Mapping], where: str) -> tuple[dict[str, list[pd.DataFrame]], list[str]]:
    parts: dict[str, list[pd.DataFrame]] = {t: [] for t in TABLES}
    cities: list[str] = []
    roads: dict[tuple[str, str], dict] = {}
    for k, note in enumerate(notes):
        desc, content = str(note["Description"]).strip(), note["Content"]
        at = f"{where} note {k} ({desc[:50]})"
        prefix = next((p for p in _TABLE_OF if desc.startswith(p)), None)
        if prefix is not None:
            city = desc[len(prefix):].strip()
            cities.append(city)
            parts[_TABLE_OF[prefix]].append(parse_table(content, _TABLE_OF[prefix], at))
        elif m := _FLIGHT.match(desc):
            cities += [m[1].strip(), m[2].strip()]
            parts["flights"].append(parse_table(content, "flights", at))
        elif m := _GROUND.match(desc):
            a, b = m[2].strip(), m[3].strip()
            cities += [a, b]
            row = _distance_row(content, a, b, at)
            if row is not None:
                roads.setdefault((a, b), row)
    if roads:
        parts["distances"].append(pd.DataFrame(list(roads.values()), columns=COLUMNS["distances"]))
    return parts, cities


def _database(parts: dict[str, list[pd.DataFrame]], cities: dict[str, str], source: str) -> SandboxDB:
    tables = {}
    for t in TABLES:
        frames = [f for f in parts[t] if len(f)]
        df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS[t])
        tables[t] = df.drop_duplicates(ignore_index=True)[COLUMNS[t]]
    return SandboxDB(cities, source=source, **tables)


def _states(q: TravelQuery | QueryText, cities: Iterable[str]) -> dict[str, str]:
    """City -> state: a 5 / 7-day query's destination state for the cities other than its origin;
    unknown otherwise (a :class:`QueryText` has neither origin nor destination)."""
    if isinstance(q, QueryText):
        return {c: UNKNOWN_STATE for c in dict.fromkeys(cities)}
    return {c: q.dest if q.days > 3 and c != q.org else UNKNOWN_STATE for c in dict.fromkeys([q.org, *cities])}


def reference_database(q: TravelQuery | QueryText, value: Any, where: str | None = None) -> SandboxDB:
    """The candidate database of one query: only the rows of its ``reference_information``."""
    where = where or f"query {q.id} reference_information"
    parts, cities = _tables(reference_notes(value, where), where)
    return _database(parts, _states(q, cities), f"reference_information of query {q.id}")


def union_database(pairs: Iterable[tuple[TravelQuery | QueryText, Any]],
                   source: str = "reference_information") -> SandboxDB:
    """One database holding every given query's reference rows (a known state wins over
    :data:`UNKNOWN_STATE` for a city two queries name)."""
    parts: dict[str, list[pd.DataFrame]] = {t: [] for t in TABLES}
    states: dict[str, str] = {}
    for q, value in pairs:
        where = f"query {q.id} reference_information"
        p, cities = _tables(reference_notes(value, where), where)
        for t in TABLES:
            parts[t] += p[t]
        for c, s in _states(q, cities).items():
            if states.get(c, UNKNOWN_STATE) == UNKNOWN_STATE:
                states[c] = s
    return _database(parts, states, source)
