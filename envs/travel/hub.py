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

**Split names** (one meaning everywhere: ``gym.make``, ``envs.make``, the flows command):
``train`` / ``validation`` / ``test`` are the hub's splits (for the synthetic sandbox: its persisted
split); ``<hub split>:re-split:<part>`` -- e.g. ``validation:re-split:test`` -- is a part of the
seeded, stratified train / validation / test re-split of one hub split (:func:`resplit_name`).
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common.errors import UserError
from envs.travel.query import TravelQuery, empty_constraints
from envs.travel.schema import DAYS, HUB_REQUIRED, LEVELS, LOCAL_CONSTRAINT_KEYS

HUB_ID = "osunlp/TravelPlanner"
HUB_SPLITS = ("train", "validation", "test")
RESPLIT = ":re-split:"
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_EXTENSIONS = (".csv", ".jsonl", ".json")


class HubFormatError(UserError, ValueError):
    """Hub-format queries that cannot be read: the message names the source, the row and the field."""


class HubFileError(HubFormatError, FileNotFoundError):
    """A queries source (file, folder, split file) that does not exist."""


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
        csv.field_size_limit(sys.maxsize)  # reference_information cells run to hundreds of kB
        return [dict(r) for r in csv.DictReader(io.StringIO(text, newline=""))]
    if path.suffix == ".jsonl":
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise HubFormatError(f"{path} line {n}: not JSON ({exc.msg} at column {exc.colno})") from None
        return rows
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HubFormatError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, Mapping) and isinstance(data.get(next(iter(data), None)), list):  # columns -> values
        keys = list(data)
        rows = [dict(zip(keys, vals)) for vals in zip(*(data[k] for k in keys))]
        data = rows
    if not isinstance(data, list):
        raise HubFormatError(f"{path}: expected a JSON list of query records")
    return data


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
        return ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            raise HubFormatError(f"{where}: field {field!r} is {_show(value)}; expected {expected}") from None


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 70 else text[:67] + "..."


def _integer(row: Mapping, field: str, where: str) -> int:
    v = row[field]
    if isinstance(v, bool):
        v = None
    elif isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+(\.0*)?\s*", v):
        v = int(float(v))
    elif isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int):
        raise HubFormatError(f"{where}: field {field!r} is {_show(row[field])}; expected an integer")
    return v


def _number(row: Mapping, field: str, where: str) -> float:
    v = row[field]
    try:
        if isinstance(v, bool) or v is None:
            raise ValueError
        out = float(v)
        if out != out or out in (float("inf"), float("-inf")):
            raise ValueError
        return out
    except (TypeError, ValueError):
        raise HubFormatError(f"{where}: field {field!r} is {_show(v)}; expected a number") from None


def _dates(row: Mapping, where: str) -> tuple[str, ...]:
    expected = "a list of 'YYYY-MM-DD' strings or its string literal, e.g. \"['2022-03-16', '2022-03-17']\""
    raw = row["date"]
    value = _literal(raw, "date", where, expected)
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(d, str) and _ISO.match(d.strip()) for d in value):
        raise HubFormatError(f"{where}: field 'date' is {_show(raw)}; expected {expected}")
    return tuple(d.strip() for d in value)


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
    if not isinstance(v, str) or (field in ("org", "dest") and not v.strip()) or (choices and v not in choices):
        want = f"one of {list(choices)}" if choices else "text"
        raise HubFormatError(f"{where}: field {field!r} is {_show(v)}; expected {want}")
    return v


def parse_hub_row(row: Mapping[str, Any], id: int, where: str = "row") -> TravelQuery:
    """One hub row as a :class:`TravelQuery` (``id``), checking every field's type (see the module
    docstring); ``where`` names the row in errors (``'validation.jsonl row 3'``)."""
    missing = [c for c in HUB_REQUIRED if c not in row]
    if missing:
        raise HubFormatError(f"{where}: missing column(s) {missing}; the hub dataset has {HUB_REQUIRED}")
    days = _integer(row, "days", where)
    if days not in DAYS:
        raise HubFormatError(f"{where}: field 'days' is {days}; expected one of {list(DAYS)}")
    dates = _dates(row, where)
    if len(dates) != days:
        raise HubFormatError(f"{where}: field 'date' has {len(dates)} dates for a {days}-day trip; expected {days}")
    return TravelQuery(id=id, org=_text(row, "org", where).strip(), dest=_text(row, "dest", where).strip(),
                       days=days, visiting_city_number=_integer(row, "visiting_city_number", where), date=dates,
                       people_number=_integer(row, "people_number", where), local_constraint=_constraints(row, where),
                       budget=int(_number(row, "budget", where)), query=_text(row, "query", where),
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
               **load_kwargs: Any) -> tuple[list[TravelQuery], list[dict]]:
    """``(queries, rows)`` of one hub split: query ``i`` (id ``id_offset + i``) and its raw row."""
    rows = read_hub_rows(source, split, **load_kwargs)
    name = Path(str(source)).name
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
