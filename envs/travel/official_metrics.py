"""TravelPlanner's six metrics, counted as the official ``evaluation/eval.py`` counts them
(OSU-NLP-Group/TravelPlanner at 24e017eb10004b83e6a543eb61bd54638c2a2be8).

Over ``n`` queries, one plan each (an undelivered plan counts in every denominator and in no
numerator):

* **delivery rate** -- plans that are delivered (``eval.py``: ``if tested_plan['plan']``, a
  non-empty list; here: a plan that parses to at least one day) / ``n``;
* **commonsense micro** -- the commonsense verdicts that are ``True``, summed over the delivered
  plans / ``8 n`` (every query has the 8 commonsense constraints);
* **hard micro** -- the hard verdicts that are ``True``, summed over the plans whose hard
  constraints were judged (delivered, complete information, within the sandbox) / the number of hard
  constraints that apply: the budget of every query, plus the local constraints a query sets as
  ``eval.py`` counts them -- house rule, cuisine, room type and transportation on a *hard*
  query, house rule, cuisine and room type on a *medium* one, none on an *easy* one
  (:func:`counted_hard_constraints`; a constraint a query does not set is ``None``: neither passed nor
  counted);
* **commonsense macro** -- plans with no failed commonsense verdict *and* judged hard constraints
  (``eval.py`` skips a plan whose hard constraints were not judged before counting it; a plan with
  all 8 commonsense constraints passed always has them judged, so this is the plans passing all 8) / ``n``;
* **hard macro** -- plans whose hard constraints were judged with none failed / ``n``;
* **final pass rate** -- plans passing both / ``n``.

``eval.py`` divides by numbers fixed for each whole split -- train 45 / 360 / 105, validation
180 / 1440 / 420, test 1000 / 8000 / 2290 (``n`` / ``8 n`` / hard constraints) -- which are the counts
above for those splits (:data:`OFFICIAL_DENOMINATORS`; e.g. train: 45 budgets + 15 medium queries
with one local constraint + 15 hard ones with three = 105). Here the denominators are counted from
the queries given, so a subset of a split (a re-split) is scored by the same formula.

:func:`official_metrics` takes evaluations made in the official mode (``official_quirks=True``: the
benchmark's own verdicts) and refuses the default mode's; :func:`metrics` is the same count over
verdicts of either mode (what ``evaluator.summarize`` reports, whose data line names the mode).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envs.travel.eval_mode import DEFAULT_MODE, OFFICIAL_MODE
from envs.travel.query import TravelQuery
from envs.travel.verdicts import COMMONSENSE, PlanEvaluation

METRICS = ("delivery_rate", "commonsense_micro", "commonsense_macro", "hard_micro", "hard_macro", "final_pass")
"""The metrics' keys, in the benchmark's order."""
OFFICIAL_NAMES = {"delivery_rate": "Delivery Rate", "commonsense_micro": "Commonsense Constraint Micro Pass Rate",
                  "commonsense_macro": "Commonsense Constraint Macro Pass Rate",
                  "hard_micro": "Hard Constraint Micro Pass Rate", "hard_macro": "Hard Constraint Macro Pass Rate",
                  "final_pass": "Final Pass Rate"}
"""The metrics' names as ``eval.py`` prints them."""
OFFICIAL_DENOMINATORS = {"train": (45, 360, 105), "validation": (180, 1440, 420), "test": (1000, 8000, 2290)}
"""``eval.py``'s fixed denominators per split: (queries, commonsense constraints, hard constraints)."""
COUNTED_LOCAL = {"hard": ("house rule", "cuisine", "room type", "transportation"),
                 "medium": ("house rule", "cuisine", "room type"), "easy": ()}
"""The local constraints ``eval.py`` counts in the hard micro denominator, per level."""


def counted_hard_constraints(query: TravelQuery) -> int:
    """The query's share of the hard micro denominator: its budget, plus the local constraints it
    sets among those ``eval.py`` counts for its level (:data:`COUNTED_LOCAL`)."""
    keys = COUNTED_LOCAL.get(query.level, ())
    return 1 + sum(query.local_constraint.get(k) is not None for k in keys)


LOCAL_VERDICT = {"house rule": "room_rule", "room type": "room_type", "cuisine": "cuisine",
                 "transportation": "transportation"}
"""A query's local-constraint key -> the name of its hard verdict."""


def counted_constraints(query: TravelQuery) -> tuple[str, ...]:
    """The constraints ``eval.py`` counts for the query's plan, by the evaluator's names: the 8
    commonsense ones, the budget and the local constraints of :func:`counted_hard_constraints`
    (what the reward's micro pass term is over: ``envs/travel/reward.py``)."""
    local = tuple(LOCAL_VERDICT[k] for k in COUNTED_LOCAL.get(query.level, ())
                  if query.local_constraint.get(k) is not None)
    return (*COMMONSENSE, "budget", *local)


def _commonsense_pass(e: PlanEvaluation) -> bool:
    """No commonsense verdict failed (``eval.py``: a ``None`` verdict is no failure)."""
    return e.delivered and all(v.passed is not False for v in e.commonsense.values())


def _hard_pass(e: PlanEvaluation) -> bool:
    return e.hard is not None and all(v.passed is not False for v in e.hard.values())


def metrics(queries: Sequence[TravelQuery], evaluations: Sequence[PlanEvaluation]) -> dict[str, Any]:
    """The six metrics (fractions in [0, 1], module docstring) and ``n``, over aligned queries and
    evaluations of either mode; no queries: every metric 0."""
    if len(queries) != len(evaluations):
        raise ValueError(f"{len(queries)} queries but {len(evaluations)} evaluations; "
                         "expected one evaluation per query")
    n = len(queries)
    if n == 0:
        return dict.fromkeys(METRICS, 0.0) | {"n": 0}
    delivered = [e for e in evaluations if e.delivered]
    judged = [e for e in delivered if e.hard is not None]
    hard_total = sum(counted_hard_constraints(q) for q in queries)
    return {
        "delivery_rate": len(delivered) / n,
        "commonsense_micro": sum(v.passed is True for e in delivered for v in e.commonsense.values())
        / (len(COMMONSENSE) * n),
        "commonsense_macro": sum(_commonsense_pass(e) for e in judged) / n,
        "hard_micro": sum(v.passed is True for e in judged for v in e.hard.values()) / hard_total,
        "hard_macro": sum(_hard_pass(e) for e in judged) / n,
        "final_pass": sum(_commonsense_pass(e) and _hard_pass(e) for e in judged) / n,
        "n": n,
    }


def official_metrics(queries: Sequence[TravelQuery], evaluations: Sequence[PlanEvaluation]) -> dict[str, Any]:
    """:func:`metrics` over evaluations made in the official mode (``TravelEvaluator(index,
    official_quirks=True)``), with ``evaluator_mode: "official"``; an evaluation of the default mode
    is refused (its verdicts are not the benchmark's). An evaluation no evaluator made (a planner
    that failed before delivering a plan) is accepted: it is undelivered in either mode."""
    for q, e in zip(queries, evaluations):
        if e.evaluator_mode == DEFAULT_MODE:
            raise ValueError(f"query {q.id} was judged in the evaluator's default mode; official metrics need "
                             "verdicts of the official mode (TravelEvaluator(index, official_quirks=True))")
    return metrics(queries, evaluations) | {"evaluator_mode": OFFICIAL_MODE}


def as_official_names(values: dict[str, Any]) -> dict[str, float]:
    """The six metrics under ``eval.py``'s printed names (fractions, as its ``result`` dict holds them)."""
    return {OFFICIAL_NAMES[k]: values[k] for k in METRICS}
