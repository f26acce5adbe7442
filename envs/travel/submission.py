"""The official submission file: what the TravelPlanner leaderboard (the test split) and the
repository's ``evaluation/eval.py`` (train, validation) read.

One JSON object per line, one line per query of the split, in the split's order::

    {"idx": 1, "query": "Please plan a 3-day trip ...", "plan": [{"days": 1, "current_city": ...}, ...]}

as the repository's ``postprocess/combination.py`` writes it (``json.dumps`` of ``idx`` counted
from 1, the query's text and the parsed plan) and its ``postprocess/example_submission.jsonl``
shows. ``eval.py`` reads the lines by position (line ``i`` is the split's query ``i``) and delivers
a plan when ``plan`` is a non-empty list; a plan that could not be parsed is written ``null``
(undelivered). Plans given as text are parsed as the evaluator parses them
(:func:`envs.travel.plans.parse_plan`).

The file is written atomically (:func:`common.atomic.write_atomic`): a killed run leaves the old
file or the new one, never half of it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.atomic import write_atomic
from common.errors import UserError
from envs.travel.official_metrics import OFFICIAL_DENOMINATORS
from envs.travel.plans import Plan, PlanParseError, parse_plan
from envs.travel.query import TravelQuery

OFFICIAL_SPLIT_SIZES = {split: sizes[0] for split, sizes in OFFICIAL_DENOMINATORS.items()}
"""How many lines ``eval.py`` / the leaderboard read for each hub split."""


class SubmissionError(UserError, ValueError):
    """A submission file that cannot be written or read as the official one."""


def submitted_plan(plan: Plan | str | dict | None) -> Plan | None:
    """A plan as the file holds it: its day records (text parsed as the evaluator parses it), or
    None for no plan or one that does not parse (undelivered)."""
    if plan is None:
        return None
    try:
        return parse_plan(plan)
    except PlanParseError:
        return None


def submission_records(queries: Sequence[TravelQuery], plans: Sequence[Plan | str | dict | None]) -> list[dict]:
    """The file's records: ``{"idx": i, "query": text, "plan": day records or None}``, ``i`` from 1."""
    if len(queries) != len(plans):
        raise SubmissionError(f"{len(queries)} queries but {len(plans)} plans; expected one plan (or None) per query")
    return [{"idx": i, "query": q.query, "plan": submitted_plan(p)} for i, (q, p) in enumerate(zip(queries, plans), 1)]


def write_submission(path: str | Path, queries: Sequence[TravelQuery], plans: Sequence[Plan | str | dict | None],
                     split: str | None = None) -> Path:
    """Write the submission file of ``queries`` (in the split's order) and their plans to ``path``,
    atomically. ``split``: a hub split name (train, validation, test) -- the file must then hold one
    line per query of that split, as ``eval.py`` reads it (test: 1000)."""
    if split is not None:
        want = OFFICIAL_SPLIT_SIZES.get(split)
        if want is None:
            raise SubmissionError(f"split {split!r} is not a hub split; expected one of {sorted(OFFICIAL_SPLIT_SIZES)}")
        if len(queries) != want:
            raise SubmissionError(f"split {split!r} has {want} queries in the official evaluation, got {len(queries)}; "
                                  "a submission holds one line per query of the whole split")
    records = submission_records(queries, plans)
    return write_atomic(path, "".join(json.dumps(r) + "\n" for r in records))


def read_submission(path: str | Path) -> list[dict[str, Any]]:
    """The records of a submission file (blank lines skipped); a line that is not a JSON object with
    ``idx``, ``query`` and ``plan`` is one error naming the file and line."""
    path = Path(path)
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise SubmissionError(f"{path.name} line {n} is not JSON ({str(exc).split(':')[0]}); "
                                  "expected {\"idx\", \"query\", \"plan\"}") from None
        if not isinstance(record, dict) or not {"idx", "query", "plan"} <= set(record):
            raise SubmissionError(f"{path.name} line {n} is not a record with idx, query and plan; "
                                  "expected {\"idx\", \"query\", \"plan\"}")
        records.append(record)
    return records
