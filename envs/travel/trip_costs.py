"""What a trip costs the party against its budget, by the sandbox's prices.

* :class:`TripCosts` -- one query's cost hints for the decisions that decide the budget: the
  cheapest trip through a route (the solver's lower bound, :meth:`RouteCosts.lower_bound
  <envs.travel.route_costs.RouteCosts.lower_bound>`: cheapest legs, stays meeting the local
  constraints and meals), through a city order (its cheapest schedule), and the cheapest
  transport of a route in one transport family;
* :func:`choice_cost` -- what a set of chosen plan items (legs, stays, meals, attractions) costs;
* :func:`plan_cost` -- what a written plan costs (the budget's arithmetic on tool prices).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from envs.travel.catalog import Catalog
from envs.travel.local_checks import transport_problems
from envs.travel.plans import Plan
from envs.travel.route_costs import RouteCosts
from envs.travel.routes import Route, schedules
from envs.travel.schema import MEALS

__all__ = ["PlanItem", "TripCosts", "choice_cost", "paid_times", "plan_cost"]


class PlanItem(Protocol):
    """One value a trip plan needs: a transport leg, a stay (``days``: its nights), a meal or an attraction."""

    kind: str  # transport | stay | meal | attraction
    days: tuple[int, ...]


def paid_times(item: PlanItem) -> int:
    """How many times an item's option is paid: a stay's nights, anything else once."""
    return len(item.days) if item.days else 1


def choice_cost(cat: Catalog, choice: Mapping[str, str], items: Mapping[str, PlanItem]) -> float:
    """What the chosen option texts (item id -> text) cost the party; attractions and unknown texts
    (``-``) are free."""
    total = 0.0
    for item_id, text in choice.items():
        item = items[item_id]
        o = cat.lookup(text)
        if o is not None and item.kind != "attraction":
            total += o.cost * paid_times(item)
    return total


def plan_cost(cat: Catalog, plan: Plan) -> float:
    """What ``plan`` costs the party by the tool prices (the official cost rules); unknown entries cost 0."""
    total = 0.0
    for day in plan:
        for f in ("transportation", *MEALS, "accommodation"):
            o = cat.lookup(str(day.get(f, "-")))
            if o is not None:
                total += o.cost
    return total


class TripCosts:
    """One query's cheapest trips (the solver's tables are built on first use, each bound once;
    both shared by the catalogs of the query, :meth:`Catalog.derived
    <envs.travel.catalog.Catalog.derived>`). ``env`` is the catalog's."""

    def __init__(self, env, cat: Catalog):
        if env is not cat.env:
            raise ValueError(f"TripCosts: env {env!r} is not the catalog's env {cat.env!r}; expected the same env")
        self.env = env
        self.cat = cat

    def route(self, route: Route) -> float:
        """The cheapest trip along ``route`` (``inf``: none the sandbox allows)."""
        costs = self.cat.derived("trip_costs.route_costs", lambda: RouteCosts(self.env.index, self.cat.q))
        return costs.lower_bound(tuple(route.cities), tuple(route.moves))

    def city_order(self, cities: tuple[str, ...]) -> float:
        """The cheapest trip through a city order: its cheapest schedule's."""
        cities = tuple(cities)
        return self.cat.derived(("trip_costs.city_order", cities), lambda: min(
            (self.route(r) for r in schedules(self.cat, cities)), default=float("inf")))

    def family_transport(self, route: Route, family: str) -> float:
        """The cheapest transport of every leg of ``route`` within the transport ``family`` and the
        query's transportation rule (``inf``: a leg has none)."""
        total = 0.0
        for _, day, a, b in route.legs():
            ok = [o.cost for o in self.cat.transport(a, b, day) if not transport_problems(o, self.cat.q, family)]
            total += min(ok) if ok else float("inf")
        return total
