"""The hub dataset ``osunlp/TravelPlanner`` as its files hold it, read strictly, and the names of
query splits.

**Files.** The hub has one config per split (``train`` 45 queries with ``annotated_plan``,
``validation`` 180, ``test`` 1000), each a CSV in the columns :data:`envs.travel.schema.HUB_COLUMNS`.
A local copy is a folder holding ``{split}.csv`` / ``{split}.jsonl`` / ``{split}.json``, or one such
file. Local files are read here with the standard library (no type guessing: a JSON list of dates
stays a list of strings); a hub id goes through :func:`datasets.load_dataset` (its local cache).

**Types.** ``date`` is a list of ``'YYYY-MM-DD'`` strings or the string literal of one (the hub's
CSV: ``"['2022-03-16', '2022-03-17', '2022-03-18']"``); ``local_constraint`` a dict or its string
literal, with the keys ``house rule``, ``cuisine``, ``room type``, ``transportation``; ``days``,
``visiting_city_number``, ``people_number`` integers (or their text); ``budget`` a number. Anything
else is a :class:`HubFormatError`: one line naming the file, the row, the field and what was expected.
``annotated_plan`` (train) is the literal of ``[query record, [day records...]]`` or of the day
records alone; :func:`annotated_plans` returns the day records (plans the env scores, or
demonstrations).

**Checks** (beyond the types): ``date`` holds calendar dates, one per day of the trip, consecutive;
``people_number`` from 1 to :data:`~envs.travel.schema.MAX_PEOPLE`; ``budget`` from 1 to
:data:`~envs.travel.schema.MAX_BUDGET`; ``org`` differs from ``dest``; ``visiting_city_number`` is
the benchmark's for the trip's length (:data:`~envs.travel.schema.CITIES_PER_DAYS`: 1 / 2 / 3 cities
for 3 / 5 / 7 days, so never more cities than days); ``query`` is not empty. A file with no query
(empty, or a header alone), a JSON file of columns of unequal lengths, a CSV row with more cells than
its header, text nested too deep to read: a :class:`HubFormatError` too.

**The test split's columns.** The hub's ``test`` split gives only ``level``, ``days``, ``query`` and
``reference_information`` (its structured fields are the benchmark's hidden answers). Such rows load
as :class:`QueryText`: the id, days, level and text of the query, enough to decode a plan from the
query and its ``reference_information`` and to write the official submission file; reading one of
the missing fields (the evaluator, the solver, option lists built from them) is one
:class:`MissingQueryFieldError` line saying so. A file mixing the two layouts is an error.

**Split names** (one meaning everywhere: ``gym.make``, ``envs.make``, the flows command):
``train`` / ``validation`` / ``test`` are the hub's splits (for the synthetic sandbox: its persisted
split); ``<hub split>:re-split:<part>`` -- e.g. ``validation:re-split:test`` -- is a part of the
seeded, stratified train / validation / test re-split of one hub split (:func:`resplit_name`).
"""

from __future__ import annotations

import ast
import csv
import datetime
import io
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.errors import UserError
from envs.travel.query import TravelQuery, empty_constraints
from envs.travel.schema import (
    CITIES_PER_DAYS,
    DAYS,
    HUB_REQUIRED,
    HUB_TEXT_COLUMNS,
    LEVELS,
    LOCAL_CONSTRAINT_KEYS,
    MAX_BUDGET,
    MAX_PEOPLE,
)

HUB_ID = "osunlp/TravelPlanner"
HUB_SPLITS = ("train", "validation", "test")
RESPLIT = ":re-split:"
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_EXTENSIONS = (".csv", ".jsonl", ".json")


class HubFormatError(UserError, ValueError):
    """Hub-format queries that cannot be read: the message names the source, the row and the field."""


class HubFileError(HubFormatError, FileNotFoundError):
    """A queries source (file, folder, split file) that does not exist."""


class MissingQueryFieldError(HubFormatError):
    """A structured field read from a query of the test split's layout, which does not have it."""


STRUCTURED_FIELDS = tuple(c for c in HUB_REQUIRED if c not in HUB_TEXT_COLUMNS)
"""The columns a query of the test split's layout lacks (``org``, ``dest``, ``date``, ...)."""
_TRAVEL_QUERY_MEMBERS = ("as_dict", "to_hub", "hard_constraint_count")


@dataclass(frozen=True)
class QueryText:
    """A hub query with only the test split's columns: its id, ``days``, ``level`` and ``query``
    text (``reference_information`` stays in its row). Reading a structured field of
    :class:`~envs.travel.query.TravelQuery` (``org``, ``budget``, ``as_dict()``, ...) raises a
    one-line :class:`MissingQueryFieldError` naming the query and the field."""

    id: int
    days: int
    level: str
    query: str
    where: str = field(default="", compare=False, repr=False)

    def __getattr__(self, name: str) -> Any:  # only called for names the instance does not have
        if name in STRUCTURED_FIELDS or name in _TRAVEL_QUERY_MEMBERS:
            where = f" ({self.where})" if self.where else ""
            what = repr(name) if name in STRUCTURED_FIELDS else f"structured fields ({name} reads them)"
            raise MissingQueryFieldError(
                f"query {self.id}{where} has no {what}: the hub's test split gives only level, days, query and "
                "reference_information; what needs the structured fields (the evaluator, the solver, option lists "
                "built from them) cannot run on it; decode from the query text and its reference_information, and "
                "score test plans with the official submission file")
        raise AttributeError(name)


def is_structured(q: Any) -> bool:
    """Whether a loaded query has the structured fields (False for a :class:`QueryText`)."""
    return not isinstance(q, QueryText)


# ----------------------------------------------------------------------------------- literals
_PARSE_ERRORS = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, OverflowError)


class NotALiteralError(ValueError):
    """Text that is neither a Python literal nor JSON (:func:`read_literal`)."""


def read_literal(text: str) -> Any:
    """A Python literal (the hub's CSV cells) or JSON text as a value; :class:`NotALiteralError` when it is
    neither -- unhashable dict keys (``{[1]: 2}``), integers past Python's digit limit and text
    nested too deep included, so callers turn every failure into one :class:`HubFormatError`."""
    try:
        return ast.literal_eval(text.strip())
    except _PARSE_ERRORS:
        pass
    try:
        return json.loads(text)
    except (ValueError, RecursionError, MemoryError):  # JSONDecodeError is a ValueError
        raise NotALiteralError from None


# ----------------------------------------------------------------------------------- split names
def resplit_name(source_split: str, part: str) -> str:
    """``validation:re-split:test``: the ``part`` of the re-split of the hub's ``source_split``."""
    return f"{source_split}{RESPLIT}{part}"


def parse_split_name(name: str) -> tuple[str, str | None]:
    """``'test'`` -> ``('test', None)`` (a hub split); ``'validation:re-split:train'`` ->
    ``('validation', 'train')``; anything else is a :class:`HubFormatError`."""
    if name in HUB_SPLITS:
        return name, None
    source, sep, part = str(name).partition(RESPLIT)
    if sep and source in HUB_SPLITS and part in HUB_SPLITS:
        return source, part
    raise HubFormatError(f"unknown split {name!r}; expected one of {', '.join(HUB_SPLITS)} (the hub's splits) "
                         f"or <hub split>{RESPLIT}<part>, e.g. {resplit_name('validation', 'test')}")


# ----------------------------------------------------------------------------------- reading
def _local_file(path: Path, split: str) -> Path:
    if path.is_dir():
        found = [path / f"{split}{ext}" for ext in _EXTENSIONS if (path / f"{split}{ext}").is_file()]
        if not found:
            raise HubFileError(f"no {split}.csv / {split}.jsonl / {split}.json in {path}")
        return found[0]
    if path.suffix not in _EXTENSIONS:
        raise HubFormatError(f"{path}: expected a .csv, .jsonl or .json file of hub-format queries")
    return path


def _read_local(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise HubFormatError(f"cannot read {path}: {exc}") from None
    if path.suffix == ".csv":
        return _read_csv(path, text)
    if path.suffix == ".jsonl":
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                rows.append(_json(line, f"{path} line {n}"))
        return rows
    data = _json(text, str(path))
    if isinstance(data, Mapping) and data and all(isinstance(v, list) for v in data.values()):  # columns
        (first, n), *rest = ((k, len(v)) for k, v in data.items())
        other = next(((k, m) for k, m in rest if m != n), None)
        if other is not None:
            raise HubFormatError(f"{path}: the JSON file's columns have unequal lengths ({n} values in {_show(first)}, "
                                 f"{other[1]} in {_show(other[0])}); expected one value per query in every column")
        keys = list(data)
        data = [dict(zip(keys, vals)) for vals in zip(*(data[k] for k in keys))]
    if not isinstance(data, list):
        raise HubFormatError(f"{path}: expected a JSON list of query records (or an object of equally long columns)")
    return data


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HubFormatError(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise HubFormatError(f"{where}: JSON nested too deep to read; expected query records") from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise HubFormatError(f"{where}: not readable JSON ({str(exc).splitlines()[0][:80]})") from None


def _read_csv(path: Path, text: str) -> list[dict[str, Any]]:
    csv.field_size_limit(sys.maxsize)  # reference_information cells run to hundreds of kB
    rows = []
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        for i, r in enumerate(reader):
            if None in r:  # cells past the header's columns
                raise HubFormatError(f"{path} row {i}: {len(reader.fieldnames or ()) + len(r[None])} cells; the "
                                     f"header has {len(reader.fieldnames or ())} columns")
            rows.append(dict(r))
    except csv.Error as exc:
        raise HubFormatError(f"{path}: not a readable CSV file ({exc})") from None
    return rows


def read_hub_rows(source: str | Path = HUB_ID, split: str = "validation", **load_kwargs: Any) -> list[dict]:
    """The rows of one hub split, as dicts of the raw values (see the module docstring)."""
    if split not in HUB_SPLITS:
        raise HubFormatError(f"unknown hub split {split!r}; the hub's splits are {', '.join(HUB_SPLITS)}")
    path = Path(source)
    if path.exists():
        rows = _read_local(_local_file(path, split))
    elif path.suffix in _EXTENSIONS or str(source).startswith((".", "/", "~")) or str(source).count("/") != 1:
        raise HubFileError(f"queries source {source} does not exist (expected a file, a folder of "
                             f"{{split}}.csv / .jsonl / .json, or a hub dataset id like {HUB_ID})")
    else:
        rows = _load_hub(str(source), split, **load_kwargs)
    if not all(isinstance(r, Mapping) for r in rows):
        raise HubFormatError(f"{source} ({split}): expected one JSON object / CSV row per query")
    if not rows:
        raise HubFormatError(f"{source} ({split}): no queries (an empty file, or a header alone); expected one "
                             "row per query")
    return [dict(r) for r in rows]


def _load_hub(source: str, split: str, **load_kwargs: Any) -> list[dict]:
    import datasets  # deferred: a heavy import that only the hub's own dataset needs

    try:
        ds = datasets.load_dataset(source, split, split=split, **load_kwargs)
    except Exception as exc:  # offline without a cache, a wrong id, ...: one line naming the source
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HubFormatError(f"cannot load hub dataset {source} ({split}): {first}") from None
    return [dict(r) for r in ds]


# ----------------------------------------------------------------------------------- one row
def _literal(value: Any, field: str, where: str, expected: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return read_literal(value)
    except NotALiteralError:
        raise HubFormatError(f"{where}: field {field!r} is {_show(value)}; expected {expected}") from None


def _show(value: Any) -> str:
    if isinstance(value, str) and len(value) > 70:
        value = value[:70]  # repr of a short prefix: a cell of megabytes or thousands of digits stays cheap
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        return f"a {type(value).__name__} nested too deep (or too long) to show"
    return text if len(text) <= 70 else text[:67] + "..."


def _integer(row: Mapping, field: str, where: str, low: int, high: int, expected: str = "") -> int:
    """An integer from ``low`` to ``high`` (an int, a whole float, or their text of at most 18 digits)."""
    v = row[field]
    expected = expected or f"an integer from {low:,} to {high:,}"
    if isinstance(v, bool):
        v = None
    elif isinstance(v, str) and (m := re.fullmatch(r"\s*([+-]?\d{1,18})(\.0*)?\s*", v)):
        v = int(m[1])
    elif isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or not low <= v <= high:
        raise HubFormatError(f"{where}: field {field!r} is {_show(row[field])}; expected {expected}")
    return v


def _number(row: Mapping, field: str, where: str, low: float, high: float) -> float:
    v = row[field]
    try:
        if isinstance(v, bool) or v is None:
            raise ValueError
        if isinstance(v, str) and len(v.strip()) > 40:  # no budget needs 40 characters; nor float() thousands
            raise ValueError
        out = float(v)
        if not low <= out <= high:  # NaN fails every comparison
            raise ValueError
        return out
    except (TypeError, ValueError, OverflowError):
        raise HubFormatError(f"{where}: field {field!r} is {_show(v)}; expected a number from {low:,} "
                             f"to {high:,}") from None


def _dates(row: Mapping, where: str, days: int) -> tuple[str, ...]:
    expected = "a list of 'YYYY-MM-DD' strings or its string literal, e.g. \"['2022-03-16', '2022-03-17']\""
    raw = row["date"]
    value = _literal(raw, "date", where, expected)
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(d, str) and _ISO.match(d.strip()) for d in value):
        raise HubFormatError(f"{where}: field 'date' is {_show(raw)}; expected {expected}")
    dates = tuple(d.strip() for d in value)
    if len(dates) != days:
        raise HubFormatError(f"{where}: field 'date' has {len(dates)} dates for a {days}-day trip; expected {days}")
    parsed = []
    for d in dates:
        try:
            parsed.append(datetime.date.fromisoformat(d))
        except ValueError:
            raise HubFormatError(f"{where}: field 'date' holds {d!r}, which is not a calendar date; expected "
                                 "dates that exist, as YYYY-MM-DD") from None
    for prev, (d, day) in zip(parsed, zip(dates[1:], parsed[1:])):
        if day - prev != datetime.timedelta(days=1):
            raise HubFormatError(f"{where}: field 'date' is {_show(list(dates))}: {d!r} does not follow "
                                 f"{prev.isoformat()!r}; expected consecutive days, one per day of the trip")
    return dates


def _constraints(row: Mapping, where: str) -> dict[str, Any]:
    expected = (f"a dict (or its string literal) with keys {list(LOCAL_CONSTRAINT_KEYS)}, each None or text "
                "(cuisine: a list of text)")
    raw = row["local_constraint"]
    value = _literal(raw, "local_constraint", where, expected)
    if value is None:
        value = {}
    bad = not isinstance(value, Mapping) or any(k not in LOCAL_CONSTRAINT_KEYS for k in value)
    if not bad:
        for k, v in value.items():
            ok = v is None or isinstance(v, str) or (k == "cuisine" and isinstance(v, (list, tuple))
                                                      and all(isinstance(c, str) for c in v))
            bad = bad or not ok
    if bad:
        raise HubFormatError(f"{where}: field 'local_constraint' is {_show(raw)}; expected {expected}")
    lc = {**empty_constraints(), **value}
    if isinstance(lc.get("cuisine"), str):
        lc["cuisine"] = [lc["cuisine"]]
    elif lc.get("cuisine") is not None:
        lc["cuisine"] = list(lc["cuisine"])
    return lc


def _text(row: Mapping, field: str, where: str, choices: tuple = ()) -> str:
    v = row[field]
    if not isinstance(v, str) or not v.strip() or (choices and v not in choices):
        want = f"one of {list(choices)}" if choices else "non-empty text"
        raise HubFormatError(f"{where}: field {field!r} is {_show(v)}; expected {want}")
    return v


def _days(row: Mapping, where: str) -> int:
    days = _integer(row, "days", where, min(DAYS), max(DAYS))
    if days not in DAYS:
        raise HubFormatError(f"{where}: field 'days' is {days}; expected one of {list(DAYS)}")
    return days


def is_text_only(row: Mapping[str, Any]) -> bool:
    """Whether a row has the test split's columns alone (no structured field, see :class:`QueryText`)."""
    return all(c in row for c in HUB_TEXT_COLUMNS) and not any(c in row for c in STRUCTURED_FIELDS)


def parse_hub_row(row: Mapping[str, Any], id: int, where: str = "row") -> TravelQuery | QueryText:
    """One hub row as a :class:`TravelQuery` (``id``), checking every field (see the module
    docstring), or, for a row of the test split's columns alone, a :class:`QueryText`; ``where``
    names the row in errors (``'validation.jsonl row 3'``)."""
    if is_text_only(row):
        return QueryText(id=id, days=_days(row, where), level=_text(row, "level", where, LEVELS),
                         query=_text(row, "query", where), where=where)
    missing = [c for c in HUB_REQUIRED if c not in row]
    if missing:
        raise HubFormatError(f"{where}: missing column(s) {missing}; the hub dataset has {HUB_REQUIRED} (its test "
                             f"split {HUB_TEXT_COLUMNS} alone)")
    days = _days(row, where)
    dates = _dates(row, where, days)
    org, dest = _text(row, "org", where).strip(), _text(row, "dest", where).strip()
    if org.casefold() == dest.casefold():
        raise HubFormatError(f"{where}: fields 'org' and 'dest' are both {_show(org)}; expected a destination "
                             "other than the origin")
    cities = CITIES_PER_DAYS[days]
    plural = "city" if cities == 1 else "cities"
    visiting = _integer(row, "visiting_city_number", where, cities, cities,
                        f"{cities} (a {days}-day TravelPlanner trip visits {cities} {plural})")
    return TravelQuery(id=id, org=org, dest=dest, days=days, visiting_city_number=visiting, date=dates,
                       people_number=_integer(row, "people_number", where, 1, MAX_PEOPLE),
                       local_constraint=_constraints(row, where),
                       budget=int(_number(row, "budget", where, 1, MAX_BUDGET)), query=_text(row, "query", where),
                       level=_text(row, "level", where, LEVELS))


def parse_annotated_plan(value: Any, where: str = "row") -> list[dict] | None:
    """A train row's ``annotated_plan`` as day records (None when the cell is empty): the hub writes
    the literal of ``[query record, [day records]]``; the day records alone are read too."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "nan")):
        return None
    expected = "the literal of [query record, [day records]] or of [day records]"
    plan = _literal(value, "annotated_plan", where, expected)
    if isinstance(plan, (list, tuple)) and plan and isinstance(plan[0], Mapping) and "current_city" not in plan[0]:
        plan = plan[1:]  # the query record first
        if len(plan) == 1 and isinstance(plan[0], (list, tuple)):
            plan = plan[0]
    if not isinstance(plan, (list, tuple)) or not all(isinstance(d, Mapping) for d in plan):
        raise HubFormatError(f"{where}: field 'annotated_plan' is {_show(value)}; expected {expected}")
    return [dict(d) for d in plan if d]


def load_split(source: str | Path = HUB_ID, split: str = "validation", id_offset: int = 0,
               **load_kwargs: Any) -> tuple[list[TravelQuery | QueryText], list[dict]]:
    """``(queries, rows)`` of one hub split: query ``i`` (id ``id_offset + i``) and its raw row;
    rows of the test split's columns alone give :class:`QueryText` queries (all rows or none)."""
    rows = read_hub_rows(source, split, **load_kwargs)
    name = Path(str(source)).name
    text_only = [is_text_only(r) for r in rows]
    if any(text_only) and not all(text_only):
        full, reduced = text_only.index(False), text_only.index(True)
        raise HubFormatError(f"{name} ({split}): row {full} has the structured columns but row {reduced} only the "
                             f"test split's {HUB_TEXT_COLUMNS}; expected one layout for the whole file")
    queries = [parse_hub_row(r, id_offset + i, f"{name} ({split}) row {i}") for i, r in enumerate(rows)]
    return queries, rows


def annotated_plans(source: str | Path = HUB_ID, split: str = "train", id_offset: int = 0,
                    **load_kwargs: Any) -> dict[int, list[dict]]:
    """Query id -> its ``annotated_plan`` day records, for the rows that have one (the train split)."""
    queries, rows = load_split(source, split, id_offset, **load_kwargs)
    name = Path(str(source)).name
    out = {}
    for q, r, i in zip(queries, rows, range(len(rows))):
        plan = parse_annotated_plan(r.get("annotated_plan"), f"{name} ({split}) row {i}")
        if plan is not None:
            out[q.id] = plan
    return out
