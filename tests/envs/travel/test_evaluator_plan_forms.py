"""What a plan is to the evaluator, as to the official code (issue #52 item 8): days past the trip's
are cut, the ``days`` values are not read, and a submission record scores the same given as a
Python dict or as its JSON text. The official mode is checked against the row-by-row
re-implementation of the official code (``row_by_row_eval.py``)."""

from __future__ import annotations

import copy
import json

import pytest

from envs.travel.evaluator import TravelEvaluator
from envs.travel.queries import default_queries
from envs.travel.row_by_row_eval import RowByRowEvaluator
from envs.travel.solver import TravelSolver

IX, QUERIES = default_queries(0)
MODES = pytest.mark.parametrize("official", [True, False], ids=["official", "default"])


@pytest.fixture(scope="module")
def solved():
    """Two queries of each trip length and their solver plans (every constraint passed)."""
    solver = TravelSolver(IX)
    out = []
    for days in (3, 5, 7):
        for q in [q for q in QUERIES if q.days == days][:2]:
            out.append((q, solver.solve(q).plan))
    return out


def verdicts(e):
    return e.delivered, e.verdicts(), e.total_cost


def row_by_row(q, plan):
    got = RowByRowEvaluator(IX.db).evaluate(q.as_dict(), plan)
    return got["commonsense"], got["hard"], got["total_cost"]


@MODES
def test_days_past_the_trip_are_not_judged(solved, official):
    """The official rules read ``range(min(query['days'], len(plan)))``: an extra day, however wrong
    (another city, repeated restaurants, a flight that does not exist), changes no verdict."""
    ev = TravelEvaluator(IX, official_quirks=official)
    for q, plan in solved:
        longer = copy.deepcopy(plan) + [dict(copy.deepcopy(plan[0]), days=q.days + 1,
                                             transportation="Flight Number: F9999999, from Nowhere to Elsewhere")]
        base, extra = ev.evaluate(q, plan), ev.evaluate(q, longer)
        assert base.final_pass and verdicts(extra) == verdicts(base)
        if official and q is solved[-1][0]:  # one 7-day plan: the row-by-row check takes seconds
            assert row_by_row(q, longer) == row_by_row(q, plan)
        shorter = plan[:-1]
        assert not ev.evaluate(q, shorter).commonsense["complete_information"].passed  # too few days still fail


@MODES
def test_days_values_are_not_read(solved, official):
    """Days are taken in list order: renumbered days, a ``day`` key for ``days`` (as in the official
    example submission) or text numbers change no verdict."""
    ev = TravelEvaluator(IX, official_quirks=official)
    for q, plan in solved:
        base = ev.evaluate(q, plan)
        for renumber in (lambda i, d: dict(d, days=9), lambda i, d: dict(d, days=str(len(plan) - i)),
                         lambda i, d: {("day" if k == "days" else k): v for k, v in d.items()}):
            other = [renumber(i, d) for i, d in enumerate(copy.deepcopy(plan))]
            assert verdicts(ev.evaluate(q, other)) == verdicts(base)
            if official and q is solved[-1][0]:
                assert row_by_row(q, other) == row_by_row(q, plan)


@MODES
def test_a_record_as_dict_or_as_text_scores_the_same(solved, official):
    """eval.py reads each submission line as a record ``{"idx", "query", "plan"}``; the record as a
    Python dict used to be undelivered ('plan must be text or a list') while its JSON text passed."""
    ev = TravelEvaluator(IX, official_quirks=official)
    for i, (q, plan) in enumerate(solved, 1):
        record = {"idx": i, "query": q.query, "plan": plan}
        forms = [plan, json.dumps(plan), record, json.dumps(record), repr(record)]
        results = [verdicts(ev.evaluate(q, f)) for f in forms]
        assert results[0][0] and all(r == results[0] for r in results), q.id
        assert ev.evaluate(q, record).final_pass


def test_what_the_official_code_cannot_read_is_undelivered_with_its_reason(solved):
    """The official code crashes on a record whose plan is text, or on days that are not objects;
    here those are undelivered, with the reason."""
    ev = TravelEvaluator(IX, official_quirks=True)
    q, plan = solved[0]
    text_plan = ev.evaluate(q, {"idx": 1, "query": q.query, "plan": json.dumps(plan)})
    assert not text_plan.delivered and "got str" in text_plan.error
    no_plan = ev.evaluate(q, {"idx": 1, "query": q.query})
    assert not no_plan.delivered and "without a 'plan' key" in no_plan.error
    assert not ev.evaluate(q, {"idx": 1, "query": q.query, "plan": []}).delivered  # eval.py: not delivered
