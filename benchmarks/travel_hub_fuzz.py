"""Fuzz: hostile hub query files and seeded mutations of a real ``reference_information`` string,
each read as the loaders read them; every outcome must be a clean load or one ``HubFormatError``.

Base data: the benchmark's real train queries (``$RLTF_TRAVELPLANNER_QUERIES``, or
``../shared/data/travelplanner-queries`` beside the checkout; hub CSV layout). A *hub case* is a
file (CSV / JSONL / JSON) made from one real row with one field or the file itself damaged; it is
loaded (:func:`envs.travel.hub.load_split`), its annotated plans read, each query's reference
database and index built and the solver run. A *mutation* replaces a number, inserts a token,
deletes, repeats or truncates part of the reference information of a real 3-day query; it is parsed
(:func:`envs.travel.reference_info.reference_database`) and indexed.

    python benchmarks/travel_hub_fuzz.py [--mutations 2000] [--seed 0]

Last lines: ``hub cases: <clean or refused> of <N> clean (<crashes> crashes)`` and
``reference-information mutations: <clean or refused> of <M> clean (<crashes> crashes)``, after one
line per crash (the case and the exception).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

QUERIES_SETTING = "RLTF_TRAVELPLANNER_QUERIES"
_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(_ROOT))

from envs.travel import hub as _hub  # noqa: E402
from envs.travel.hub import HubFormatError, load_split, parse_annotated_plan  # noqa: E402
from envs.travel.index import SandboxIndex  # noqa: E402
from envs.travel.reference_info import reference_database  # noqa: E402
from envs.travel.solver import TravelSolver  # noqa: E402

_is_structured = getattr(_hub, "is_structured", lambda q: True)  # the same script measures older code
CLEAN = "clean"
REFUSED = "refused"
_DEEP = "[" * 10_000 + "]" * 10_000
_HOSTILE_NUMBERS = ("nan", "inf", "-inf", "-5", "1e30", "1e999", "9" * 5000, "", "0", "-0.0", "NaN", "2.5",
                    "9" * 400, "1e-300", "-1e308")
_HOSTILE_TOKENS = ("'", '"', "[", "]", "{", "}", "\\n", "{[1]: 2}", ",", ":", " nan ", "None", "\x00", "\n",
                   "distance: -3 km", "1e999", "((((", "'Content': ", "'Description': ")


def real_queries_dir() -> Path | None:
    """The folder of the real train queries (``train.csv``), or None where it is not found."""
    setting = os.environ.get(QUERIES_SETTING)
    folder = Path(setting) if setting else _ROOT.parent / "shared" / "data" / "travelplanner-queries"
    return folder if (folder / "train.csv").is_file() else None


def base_row(folder: Path, days: int = 3) -> dict:
    """The first real train row of a ``days``-day trip, as the CSV holds it (text cells)."""
    with (folder / "train.csv").open(encoding="utf-8", newline="") as f:
        csv.field_size_limit(sys.maxsize)
        return next(r for r in csv.DictReader(f) if r["days"] == str(days))


# ----------------------------------------------------------------------------------- hub cases
def _csv(rows: list[dict]) -> str:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    return out.getvalue()


def _jsonl(rows: list) -> str:
    return "\n".join(json.dumps(r) for r in rows) + "\n"


_FIELD_VALUES: dict[str, tuple] = {
    "days": ("9" * 400, 0, -3, 4, "3.5", None, [], "nan", 1e308, True, 10 ** 400),
    "people_number": ("9" * 400, 0, -2, 1e300, "1e3", None, 10 ** 400, "two"),
    "visiting_city_number": (0, 50, -1, 2, "9" * 400),
    "budget": (-100, 0, "nan", "inf", 10 ** 400, "1e999", "9" * 5000, [1], None),
    "date": ("['2022-02-28', '2022-03-01', '2022-02-30']", "['2022-03-03', '2022-03-09', '2022-03-05']",
             "['2022-03-05', '2022-03-04', '2022-03-03']", "[]", "{[1]: 2}", _DEEP, "['2022-13-01'] * 3",
             ["2022-03-03", "2022-03-03", "2022-03-03"]),
    "org": ("", None, 5, "Stockton"),  # the base row's destination
    "local_constraint": ("{[1]: 2}", _DEEP, "{'house rule': ['a']}", "None", "[]", "{'cuisine': [1]}"),
    "level": ("EASY", None),
    "query": ("", None, 5),
    "reference_information": ("{[1]: 2}", "", "nan", _DEEP, "[]",
                              "[{'Description': 'Taxi from A to B', 'Content': "
                              "'taxi, from A to B, duration: 1 hours, distance: 1e999 km, cost: 5'}]"),
    "annotated_plan": ("{[1]: 2}", _DEEP, "[1, 2]"),
}


def hub_cases(base: dict) -> list[tuple[str, str, str]]:
    """``(name, file name, text)`` of every hub case (about 80): the base row as CSV and JSONL, one
    field damaged (JSONL), and damaged files."""
    cases = [("base.csv", "train.csv", _csv([base])), ("base.jsonl", "train.jsonl", _jsonl([base]))]
    for field, values in _FIELD_VALUES.items():
        for k, v in enumerate(values):
            cases.append((f"{field}[{k}]", "train.jsonl", _jsonl([{**base, field: v}])))
    reduced = {k: base[k] for k in ("level", "days", "query", "reference_information")}
    cols = {k: [v, v] for k, v in base.items()}
    header = ",".join(base) + "\n"
    cases += [
        ("empty.csv", "train.csv", ""), ("header-only.csv", "train.csv", header), ("empty.jsonl", "train.jsonl", ""),
        ("blank-lines.jsonl", "train.jsonl", "\n \n"), ("deep-line.jsonl", "train.jsonl", _DEEP + "\n"),
        ("list-line.jsonl", "train.jsonl", "[1, 2]\n"), ("not-json.jsonl", "train.jsonl", "{'a': 1}\n"),
        ("empty-object.json", "train.json", "{}"), ("empty-list.json", "train.json", "[]"),
        ("unequal-columns.json", "train.json", json.dumps({**cols, "query": [base["query"]]})),
        ("scalar-column.json", "train.json", json.dumps({**cols, "days": 3})),
        ("columns.json", "train.json", json.dumps(cols)), ("scalar.json", "train.json", "5"),
        ("deep.json", "train.json", _DEEP), ("big-int.json", "train.json", "9" * 5000),
        ("extra-cells.csv", "train.csv", _csv([base]).rstrip("\r\n") + ",surplus\r\n"),
        ("nul.csv", "train.csv", _csv([base]).replace("Las", "L\x00as", 1)),
        ("missing-cells.csv", "train.csv", header + "Las Vegas,Stockton\n"),
        ("bom.csv", "train.csv", "\ufeff" + _csv([base])),
        ("test-columns.jsonl", "train.jsonl", _jsonl([reduced, reduced])),
        ("test-columns.csv", "train.csv", _csv([reduced])),
        ("mixed-layouts.jsonl", "train.jsonl", _jsonl([base, reduced])),
    ]
    return cases


def _outcome(run: Callable[[], object]) -> str:
    try:
        run()
    except HubFormatError:
        return REFUSED
    except BaseException as exc:  # noqa: BLE001 -- a crash is what the fuzz counts
        if isinstance(exc, KeyboardInterrupt):
            raise
        first = (str(exc).splitlines() or [""])[0][:120]
        return f"crash {type(exc).__name__}: {first}"
    return CLEAN


def _load_and_solve(path: Path) -> None:
    queries, rows = load_split(path, "train")
    for i, (q, r) in enumerate(zip(queries, rows)):
        parse_annotated_plan(r.get("annotated_plan"), f"row {i}")
        index = SandboxIndex(reference_database(q, r.get("reference_information")))
        if _is_structured(q):  # a query of the test split's layout has nothing to solve
            TravelSolver(index).solve(q)


def hub_outcomes(base: dict, folder: Path) -> dict[str, str]:
    """Case name -> :data:`CLEAN`, :data:`REFUSED` or ``crash <type>: <message>``; files under ``folder``."""
    out = {}
    for k, (name, file_name, text) in enumerate(hub_cases(base)):
        case = folder / f"case{k}"
        case.mkdir(parents=True, exist_ok=True)
        path = case / file_name
        path.write_text(text, encoding="utf-8")
        out[name] = _outcome(lambda: _load_and_solve(path))
    return out


# ----------------------------------------------------------------------------------- mutations
def reference_mutations(text: str, n: int, seed: int = 0) -> list[str]:
    """``n`` seeded mutations of a ``reference_information`` string."""
    rng = np.random.default_rng(seed)
    numbers = [m.span() for m in re.finditer(r"-?\d[\d,.]*", text)]
    out = []
    for _ in range(n):
        op = int(rng.integers(0, 6))
        if op <= 1:  # a number replaced (the commonest damage: a cell's value)
            a, b = numbers[int(rng.integers(0, len(numbers)))]
            token = _HOSTILE_NUMBERS[int(rng.integers(0, len(_HOSTILE_NUMBERS)))]
            token = token.rjust(b - a) if len(token) < b - a else token  # keep the table's columns aligned
            out.append(text[:a] + token + text[b:])
            continue
        i = int(rng.integers(0, len(text)))
        if op == 2:
            token = _HOSTILE_TOKENS[int(rng.integers(0, len(_HOSTILE_TOKENS)))]
            out.append(text[:i] + token + text[i:])
        elif op == 3:
            out.append(text[:i] + text[i + int(rng.integers(1, 50)):])
        elif op == 4:
            j = i + int(rng.integers(1, 200))
            out.append(text[:j] + text[i:j] + text[j:])
        else:
            out.append(text[:i])
    return out


def reference_outcomes(base: dict, n: int, seed: int = 0) -> list[str]:
    """The outcome of each of ``n`` mutations of ``base``'s reference information (parsed, indexed)."""
    queries, _ = _query_of(base)
    q = queries[0]
    return [_outcome(lambda m=m: SandboxIndex(reference_database(q, m)))
            for m in reference_mutations(base["reference_information"], n, seed)]


def _query_of(base: dict):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.jsonl"
        path.write_text(_jsonl([base]), encoding="utf-8")
        return load_split(path, "train")


def _summary(label: str, outcomes: list[str]) -> str:
    clean = sum(o in (CLEAN, REFUSED) for o in outcomes)
    return f"{label}: {clean} of {len(outcomes)} clean ({len(outcomes) - clean} crashes)"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mutations", type=int, default=2000, help="reference-information mutations")
    p.add_argument("--seed", type=int, default=0, help="seed of the mutations")
    args = p.parse_args(argv)
    folder = real_queries_dir()
    if folder is None:
        raise SystemExit(f"the real train queries were not found: set {QUERIES_SETTING} to the folder holding "
                         "train.csv (hub CSV layout)")
    base = base_row(folder)
    with tempfile.TemporaryDirectory() as tmp:
        hub = hub_outcomes(base, Path(tmp))
    for name, o in hub.items():
        if o.startswith("crash"):
            print(f"hub case {name}: {o}")
    refs = reference_outcomes(base, args.mutations, args.seed)
    crashes: dict[str, int] = {}
    for o in refs:
        if o.startswith("crash"):
            crashes[o] = crashes.get(o, 0) + 1
    for o, k in sorted(crashes.items(), key=lambda kv: -kv[1]):
        print(f"mutation x{k}: {o}")
    print(f"hub cases refused: {sum(o == REFUSED for o in hub.values())}, loaded: "
          f"{sum(o == CLEAN for o in hub.values())}")
    print(_summary("hub cases", list(hub.values())))
    print(_summary("reference-information mutations", refs))


if __name__ == "__main__":
    main()
