"""Repairing an itinerary over budget: greedy swaps to cheaper options that keep every local constraint.

An itinerary here is a choice of option texts per plan item (a leg, a stay, a meal, an
attraction: :class:`~envs.travel.trip_costs.PlanItem`), each item with its alternatives (every
option meeting its local constraints, cheapest first). :func:`repair` swaps, while the total is
over the budget, the item (of the kinds allowed) whose cheapest valid alternative saves the most;
a meal swap is valid when it repeats no other meal's restaurant and loses no wanted cuisine.
:func:`repaired_variants` lists the itineraries the strategies of :data:`STRATEGIES` give, the
ones within the budget (or, when none is, the cheapest one marked over budget).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from envs.travel.catalog import SKIP, Catalog, Option
from envs.travel.local_checks import covered_cuisines
from envs.travel.trip_costs import PlanItem, choice_cost, paid_times

__all__ = ["STRATEGIES", "repair", "repaired_variants", "valid_swap"]

STRATEGIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("as chosen", ()), ("cheaper stays", ("stay",)), ("cheaper meals", ("meal",)),
    ("cheaper transport", ("transport",)), ("cheapest overall", ("stay", "meal", "transport")))
"""The repair strategies, in the order their itineraries are offered: a label and the item kinds it may swap."""


def valid_swap(cat: Catalog, items: Mapping[str, PlanItem], choice: Mapping[str, str], item_id: str,
               alt: Option) -> bool:
    """Whether ``alt`` may replace the choice of ``item_id``: a meal must repeat no other meal's
    restaurant and keep every wanted cuisine the meals cover; any other item may always swap."""
    if items[item_id].kind != "meal":
        return True
    others = {v for k, v in choice.items() if k != item_id and items[k].kind == "meal" and v != "-"}
    if alt is not SKIP and alt.text in others:
        return False
    meals = [v for k, v in choice.items() if items[k].kind == "meal"]
    before = covered_cuisines(cat, meals)
    after = covered_cuisines(cat, [v for v in meals if v != choice[item_id]] + [alt.text])
    return before <= after


def repair(cat: Catalog, budget: float, choice: Mapping[str, str], items: Mapping[str, PlanItem],
           alternatives: Mapping[str, Sequence[Option]], kinds: Sequence[str]) -> dict[str, str]:
    """Greedy budget repair: while over budget, swap the item (of ``kinds``) whose cheapest
    valid alternative saves the most; stop when within budget or nothing saves."""
    choice = dict(choice)
    while choice_cost(cat, choice, items) > budget:
        best: tuple[float, str, str] | None = None
        for item_id, text in choice.items():
            item = items[item_id]
            if item.kind not in kinds:
                continue
            times = paid_times(item)
            cur = (cat.lookup(text) or SKIP).cost * times
            for alt in alternatives.get(item_id, ()):
                if alt.cost * times >= cur:
                    break
                if valid_swap(cat, items, choice, item_id, alt):
                    saving = cur - alt.cost * times
                    if best is None or saving > best[0]:
                        best = (saving, item_id, alt.text)
                    break
        if best is None:
            break
        choice[best[1]] = best[2]
    return choice


def repaired_variants(cat: Catalog, budget: float, choice: Mapping[str, str], items: Mapping[str, PlanItem],
                      alternatives: Mapping[str, Sequence[Option]]) -> list[dict[str, Any]]:
    """The distinct itineraries of :data:`STRATEGIES` within ``budget`` (``label`` with the
    total, ``choice``, ``cost``, ``within_budget``); none within it: the cheapest, its label
    starting ``over budget:``."""
    out, seen = [], set()
    for label, kinds in STRATEGIES:
        c = repair(cat, budget, choice, items, alternatives, kinds) if kinds else dict(choice)
        key = tuple(sorted(c.items()))
        if key in seen:
            continue
        seen.add(key)
        cost = choice_cost(cat, c, items)
        out.append({"label": f"{label}, total ${int(round(cost))}", "choice": c, "cost": cost,
                    "within_budget": cost <= budget})
    fits = [v for v in out if v["within_budget"]]
    if not fits:
        cheapest = min(out, key=lambda v: v["cost"])
        return [dict(cheapest, label=f"over budget: {cheapest['label']}")]
    return fits
