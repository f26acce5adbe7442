"""The TravelPlanner evaluator, rule for rule the official one (``evaluation/commonsense_constraint.py``,
``hard_constraint.py`` and ``eval.py`` of OSU-NLP-Group/TravelPlanner), on indexed lookups.

Eight commonsense constraints -- within sandbox, complete information, within current city,
reasonable city route, diverse restaurants, diverse attractions, non-conflicting transportation,
minimum nights stay -- are judged on every delivered plan; the five hard ones -- budget, room rule,
room type, cuisine, transportation -- only when the plan has complete information and stays within
the sandbox, exactly as ``eval.py`` does (a hard constraint the query does not set is ``None``).
Every failed constraint carries its reason (the day and the entity).

Two modes (``official_quirks``; every travel results data line names the one it was scored in,
``envs/travel/provenance.py``):

* ``official_quirks=True`` -- **the benchmark's mode** (``official``): TravelPlanner figures (the
  official metrics, ``official_metrics.py``) are reported in it. It reproduces the current official
  code's verdicts byte for byte, including its slips: (1) entity names match by substring:
  ``get_valid_name_city`` (``utils/func.py``) reads 'Name, City' with a regular expression whose
  name group stops at a newline, so the name is the text before the last comma *on its last line*,
  stripped, and the city the text after it; each rule then uses the first row of the city whose name
  *contains* that name (``str.contains(re.escape(name))`` on the tables as ``tools/*/apis.py`` load
  them, ``read_csv().dropna()``), and the minimum-nights rule is judged only when exactly one row
  does; (2) in "within current city" a non-travel day's city is iterated character by character (any
  one letter of the city in the entity string passes); (3) the attraction list drops whatever
  follows the last ';' (``split(';')[:-1]``) and is not stripped; (4) a meal in the origin city
  skips the rest of that day's meals in the cuisine check, and the cuisine rule passes when as many
  cuisines are found as the query lists; (5) the hard transportation rule is case-sensitive
  ('Flight', 'Self-driving'); (6) a flight's date is not checked. Use it to reproduce leaderboard
  numbers.
* ``official_quirks=False`` -- the project's **default rules** (``default``; the reward's default),
  *not* the benchmark's verdicts: it applies the rules as intended: a plan's
  'Name, City' is the row of that name -- the whole text before the last comma (newlines
  included), compared with the row's name up to surrounding and repeated whitespace and Unicode
  normal form NFC (``text.name_key``), so the real tables' names that end in a space or hold a
  newline are found; a name the city repeats is its first row, as in the official code -- and the
  minimum-nights rule is judged on that row whether or not another row's name contains the same
  text; the entity's own city must be one of the day's cities, attractions are the
  non-empty ';'-separated items, only origin-city meals are skipped for cuisine and every wanted
  cuisine must be served, transport modes are matched case-insensitively, and a flight must fly on
  the day it is used.

So on the real tables the two modes differ on a plan only where (1) makes the official code read
another row than the one the plan names: a name contained in an earlier row's name of the city,
or a name holding a newline (the official code reads its last line: 'Apt' of Austin's '1 Bedroom ,
Beautiful Spacious Brownstone' + newline + ' Apt') -- then the budget, cuisine, room rule and room type
read that row -- or hides the minimum nights (several rows contain the name); and where quirks
(2)-(6) apply. Mis-encoded characters (a 'Café' stored as 'Caf' + U+6106) are names like any
other: a plan that copies them matches. ``tests/envs/travel/test_real_tables_evaluator.py`` checks
this on solver plans over real cities and on the same plans with the tables' awkward rows swapped
in (issue #36).

Both modes check all five house rules. The official ``hard_constraint.py`` tested the misspelt
'parities' until 2024-04-26, so 'parties' never failed there; its current code fails 'parties' on a
'No parties' accommodation, and so does this evaluator (``official_quirks`` no longer reproduces
the typo).

Checked against the official code of OSU-NLP-Group/TravelPlanner at these commits:
``evaluation/commonsense_constraint.py`` at 3038ffd4aae5266cf5595c905f8bb4011cb39f86 -- quirks (1),
(2), (3), (6) and the eight commonsense rules; ``evaluation/hard_constraint.py`` at
ed379c497eb8e4d12a3fc988f6f1efb84982499f -- quirks (1), (4), (5), the five hard rules and the house
rules ('No parties' for 'parties'); ``evaluation/eval.py`` at
24e017eb10004b83e6a543eb61bd54638c2a2be8 -- which constraints are judged when, and the metrics.
The text parsers (``text.py``) reproduce the official regular expressions of those files.

Where the official code would crash (e.g. 'from' without 'to', a flight without 'Flight Number: '),
the constraint fails with that reason instead.

What a plan is, in both modes as in the official code (issue #52 item 8):

* **Extra days are cut.** Every official rule reads ``tested_data[i]`` for ``i`` in
  ``range(min(query['days'], len(plan)))``, so days past the trip's are never judged: a plan with
  extra days scores as its first ``days`` days do. Too few days fail complete information.
* **The ``days`` values are not read.** No rule looks at a day's ``days`` number (the official
  example submission spells it ``day`` on some lines): days are taken in list order. The only trace
  of the key is the 50% count of complete information, which counts every given field of a day, a
  truthy ``days`` value included, as ``is_not_absent`` does.
* **A plan is a list of day records**, or a submission record ``{"idx", "query", "plan": [...]}``
  (``eval.py`` reads each line of a submission file as such a record); either given as Python
  objects or as their JSON text (or Python literal) scores the same. ``eval.py`` delivers a plan when
  ``record['plan']`` is a non-empty list; a ``plan`` that is text, or day records that are not
  objects, make the official code crash -- here they are undelivered, with the reason.

Modules: ``verdicts.py`` (constraint names, :class:`Verdict`, :class:`PlanEvaluation`),
``eval_mode.py`` (how the two modes read a plan), ``commonsense.py`` and ``hard_rules.py`` (the
rules: one plain function per constraint, and their tables :data:`COMMONSENSE_RULES` and
:data:`HARD_RULES`, name -> rule), this one (:class:`TravelEvaluator`, which applies every rule
of the tables as ``eval.py`` does), ``official_metrics.py`` (the official metrics over many
evaluations, counted as ``eval.py`` counts them; :func:`summarize` reports them for either mode)
and ``submission.py`` (the official submission file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from envs.travel.commonsense import COMMONSENSE_RULES, CommonsenseRule
from envs.travel.eval_mode import EvalMode
from envs.travel.hard_rules import HARD_RULES, HardRule, total_cost
from envs.travel.index import SandboxIndex
from envs.travel.official_metrics import metrics
from envs.travel.plans import Plan, PlanParseError, parse_plan
from envs.travel.query import TravelQuery
from envs.travel.verdicts import COMMONSENSE, PlanEvaluation, Verdict


class TravelEvaluator:
    """Judges plans against queries on one sandbox index: ``TravelEvaluator(index,
    official_quirks=False)``.

    Every commonsense rule of ``commonsense_rules`` is applied to a delivered plan; when the plan
    has complete information and stays within the sandbox, every hard rule of ``hard_rules`` too,
    with the plan's total cost (``eval.py``'s order). The tables default to
    :data:`~envs.travel.commonsense.COMMONSENSE_RULES` and :data:`~envs.travel.hard_rules.HARD_RULES`
    (name -> rule, in ``verdicts.COMMONSENSE`` / ``verdicts.HARD`` order); another table swaps a
    rule for one evaluator without touching the others, and must keep
    ``complete_information`` and ``within_sandbox``, which gate the hard rules."""

    def __init__(self, index: SandboxIndex, official_quirks: bool = False, *,
                 commonsense_rules: Mapping[str, CommonsenseRule] = COMMONSENSE_RULES,
                 hard_rules: Mapping[str, HardRule] = HARD_RULES):
        self.mode = EvalMode(index, official_quirks)
        self.index, self.quirks = index, official_quirks
        self.commonsense_rules, self.hard_rules = commonsense_rules, hard_rules

    def evaluate(self, query: TravelQuery, plan: Plan | str | Any) -> PlanEvaluation:
        """The verdicts on ``plan``: day records, a submission record holding them, or the text of
        either (module docstring: what a plan is)."""
        try:
            days = parse_plan(plan)
        except PlanParseError as exc:
            return PlanEvaluation(query.id, False, str(exc), exc.reason, hard_applicable=query.hard_constraint_count,
                                  evaluator_mode=self.mode.name)
        return self.evaluate_parsed(query, days)

    def evaluate_parsed(self, query: TravelQuery, plan: Plan) -> PlanEvaluation:
        days = plan[: min(query.days, len(plan))]  # extra days are not judged, as in the official code
        if not plan:
            return PlanEvaluation(query.id, False, "plan has no days", "empty",
                                  hard_applicable=query.hard_constraint_count, evaluator_mode=self.mode.name)
        mode = self.mode
        cs = {name: rule(mode, query, days) for name, rule in self.commonsense_rules.items()}
        ev = PlanEvaluation(query.id, True, commonsense=cs, hard_applicable=query.hard_constraint_count,
                            evaluator_mode=mode.name)
        if cs["complete_information"].passed and cs["within_sandbox"].passed:
            cost = total_cost(mode, query, days)
            ev.total_cost = cost
            ev.hard = {name: rule(mode, query, days, cost) for name, rule in self.hard_rules.items()}
        return ev

    def judge(self, name: str, query: TravelQuery, days: Plan) -> Verdict:
        """The verdict of one constraint, by name, on ``days`` (already cut to the query's days),
        whatever the other constraints say (what an agent reviewing a partial plan asks)."""
        if name in self.commonsense_rules:
            return self.commonsense_rules[name](self.mode, query, days)
        return self.hard_rules[name](self.mode, query, days, None)

    def total_cost(self, query: TravelQuery, plan: Plan) -> float:
        """The plan's total cost (:func:`envs.travel.hard_rules.total_cost`; what the budget is judged on)."""
        return total_cost(self.mode, query, plan)

    def evaluate_many(self, pairs: Sequence[tuple[TravelQuery, Plan | str]]) -> list[PlanEvaluation]:
        return [self.evaluate(q, p) for q, p in pairs]


# ------------------------------------------------------------------------------------ metrics
def summarize(queries: Sequence[TravelQuery], evaluations: Sequence[PlanEvaluation]) -> dict[str, float]:
    """The official metrics over aligned queries and evaluations, counted as ``eval.py`` counts
    them (:func:`envs.travel.official_metrics.metrics`): delivery rate, commonsense micro / macro,
    hard micro / macro, final pass rate (fractions in [0, 1]) and ``n``. They are the benchmark's
    figures only over verdicts of the official mode (:func:`~envs.travel.official_metrics.official_metrics`
    checks it)."""
    return metrics(queries, evaluations)


def summarize_by_group(queries: Sequence[TravelQuery], evaluations: Sequence[PlanEvaluation]) -> dict[str, dict]:
    """:func:`summarize` per level and per days (keys like 'easy', 'days=3') and 'all'."""
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(queries):
        groups.setdefault(q.level, []).append(i)
        groups.setdefault(f"days={q.days}", []).append(i)
    out = {"all": summarize(queries, evaluations)}
    for key in sorted(groups):
        idx = groups[key]
        out[key] = summarize([queries[i] for i in idx], [evaluations[i] for i in idx])
    return out


def constraint_pass_rates(queries: Sequence[TravelQuery], evaluations: Sequence[PlanEvaluation]) -> dict[str, float]:
    """Per-constraint pass rate: commonsense over all plans, a hard constraint over the queries
    that set it (budget: all); a hard constraint not judged counts as failed."""
    n = max(1, len(evaluations))
    out = {k: sum(bool(e.delivered and e.commonsense.get(k, Verdict(False)).passed) for e in evaluations) / n
           for k in COMMONSENSE}
    keys = {"budget": None, "room_rule": "house rule", "room_type": "room type", "cuisine": "cuisine",
            "transportation": "transportation"}
    for k, lc_key in keys.items():
        idx = [i for i, q in enumerate(queries) if lc_key is None or q.local_constraint.get(lc_key)]
        ok = sum(evaluations[i].hard is not None and evaluations[i].hard[k].passed is True for i in idx)
        out[k] = ok / len(idx) if idx else float("nan")
    return out
