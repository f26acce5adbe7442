"""Which plan items a failed named constraint points at: the ones a revision should change.

An itinerary is a choice of option texts per plan item (a leg, a stay, a meal, an attraction:
:class:`Item`); :func:`blamed_items` names, for one of the evaluator's named constraints, the
items that break it -- a repeated restaurant or attraction (every later repeat), meals serving
no wanted cuisine (as many as cuisines are missing), stays breaking the minimum nights / house
rule / room type, legs breaking the transportation rule or the non-conflicting one (the smaller
side), and for the budget every item with a cheaper option, largest saving first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from envs.travel.catalog import Catalog
from envs.travel.local_checks import covered_cuisines, house_rule_problem, room_type_problem
from envs.travel.trip_costs import paid_times

__all__ = ["Item", "blamed_items"]


class Item(Protocol):
    """A plan item as blame reads it."""

    kind: str  # transport | stay | meal | attraction
    city: str
    day: int
    days: tuple[int, ...]  # a stay's nights
    leg: tuple[str, str]  # a transport leg's (from, to)


def blamed_items(cat: Catalog, items: Mapping[str, Item], values: Mapping[str, str], name: str) -> list[str]:
    """The ids of the items of ``values`` (item id -> option text) that the constraint ``name`` blames."""
    q = cat.q
    if name in ("diverse_restaurants", "diverse_attractions"):
        kind = "meal" if name == "diverse_restaurants" else "attraction"
        seen, out = set(), []
        for item_id in sorted((k for k in values if items[k].kind == kind), key=lambda k: (items[k].day, k)):
            if values[item_id] in seen:
                out.append(item_id)
            seen.add(values[item_id])
        return out
    if name == "cuisine":
        wanted = set(q.local_constraint.get("cuisine") or ())
        got = covered_cuisines(cat, [t for k, t in values.items() if items[k].kind == "meal"])
        if wanted <= got:
            return []
        useless = [k for k, t in values.items() if items[k].kind == "meal"
                   and not (wanted & set(getattr(cat.lookup(t), "cuisines", ())))]
        return useless[: len(wanted - got)]
    if name in ("minimum_nights_stay", "room_rule", "room_type"):
        out = []
        for item_id, t in values.items():
            if items[item_id].kind != "stay":
                continue
            o = cat.lookup(t)
            if o is None:
                continue
            bad = {"minimum_nights_stay": o.min_nights > len(items[item_id].days),
                   "room_rule": house_rule_problem(o, q) is not None,
                   "room_type": room_type_problem(o, q) is not None}[name]
            if bad:
                out.append(item_id)
        return out
    if name in ("non_conflicting_transportation", "transportation"):
        legs = [k for k in values if items[k].kind == "transport"]
        modes = {k: getattr(cat.lookup(values[k]), "mode", None) for k in legs}
        if name == "transportation":
            banned = "Flight" if q.local_constraint.get("transportation") == "no flight" else "Self-driving"
            return [k for k in legs if modes[k] == banned]
        driving = [k for k in legs if modes[k] == "Self-driving"]
        other = [k for k in legs if modes[k] in ("Flight", "Taxi")]
        if not driving or not other:
            return []
        return driving if len(driving) <= len(other) else other
    if name == "budget":
        savings = []
        for item_id, t in values.items():
            item = items[item_id]
            if item.kind == "attraction":
                continue
            cur = getattr(cat.lookup(t), "cost", 0.0)
            cheapest = min((o.cost for o in cat.results(item.kind, item.city, item.day, item.leg)), default=cur)
            if cheapest < cur:
                savings.append(((cur - cheapest) * paid_times(item), item_id))
        return [item_id for _, item_id in sorted(savings, reverse=True)]
    return []
