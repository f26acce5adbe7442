"""OKR-Agent's solution: the route and one value per slot (a leg's transport, a stay, a meal, a
day's attraction), what it costs, the plan it writes and the structure keyed by objectives the
database keeps (``okr.solution``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envs.travel.catalog import Catalog, Option
from envs.travel.flows.texts import attraction_text
from envs.travel.plans import Plan
from envs.travel.routes import Route, assemble
from envs.travel.schema import MEALS
from envs.travel.trip_costs import choice_cost

__all__ = ["Slot", "Solution"]


@dataclass
class Slot:
    """One value of the solution: a leg's transport, a stay, a meal, a day's attraction."""

    id: str
    objective: str
    kind: str  # transport | stay | meal | attraction
    city: str
    day: int
    field: str
    days: tuple[int, ...] = ()  # a stay's nights
    leg: tuple[str, str] = ("", "")

    @property
    def cells(self) -> list[tuple[int, str]]:
        return [(d, "accommodation") for d in self.days] if self.kind == "stay" else [(self.day, self.field)]


def route_slots(r: Route) -> dict[str, Slot]:
    """The slots of route ``r``: legs, stays, every full day's meals, then its attractions."""
    slots = [Slot(f"leg{j}", "transport", "transport", b, d, "transportation", leg=(a, b))
             for j, d, a, b in r.legs()]
    slots += [Slot(f"stay{j}", "accommodation", "stay", c, first, "accommodation",
                   days=tuple(range(first, first + n))) for j, c, first, n in r.stays()]
    slots += [Slot(f"day{d}.{m}", "dining", "meal", c, d, m) for d, c in r.full_days() for m in MEALS]
    slots += [Slot(f"day{d}.attraction", "sightseeing", "attraction", c, d, "attraction") for d, c in r.full_days()]
    return {s.id: s for s in slots}


@dataclass
class Solution:
    """The team's solution so far: the route (None before the route agent chose it), its slots
    and the option text of each slot filled."""

    cat: Catalog
    route: Route | None = None
    slots: dict[str, Slot] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)

    def set_route(self, route: Route) -> None:
        self.route = route
        self.slots = route_slots(route)

    def options(self, s: Slot) -> list[Option]:
        """Every tool result for slot ``s``, cheapest first (attractions: in the tool's order)."""
        found = self.cat.results(s.kind, s.city, s.day, s.leg)
        return list(found) if s.kind == "attraction" else sorted(found, key=lambda o: o.cost)

    def plan(self, values: dict[str, str] | None = None) -> Plan:
        values = self.values if values is None else values
        cells: dict[tuple[int, str], str] = {}
        for sid, text in values.items():
            s = self.slots[sid]
            v = attraction_text([self.cat.lookup(text)]) if s.kind == "attraction" else text
            for c in s.cells:
                cells[c] = v
        return assemble(self.route, cells)

    def cost(self, values: dict[str, str] | None = None) -> float:
        return choice_cost(self.cat, self.values if values is None else values, self.slots)

    def complete(self, values: dict[str, str]) -> bool:
        return self.route is not None and set(self.slots) <= set(values)

    def record(self) -> dict[str, Any]:
        """The solution keyed by objectives (what the database, and so the trace, keeps)."""
        sol: dict[str, Any] = {"route": list(self.route.current_cities) if self.route else None}
        for obj in ("transport", "accommodation", "dining", "sightseeing"):
            sol[obj] = {sid: self.values[sid] for sid, s in self.slots.items()
                        if s.objective == obj and sid in self.values}
        if self.route is not None:
            sol["budget"] = {"total": self.cost(), "limit": self.cat.q.budget}
        return sol
