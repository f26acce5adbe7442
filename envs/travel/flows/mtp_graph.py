"""The manager's meta-task graph: the manager's answers (route, schedule, transport family)
decomposed into one meta-task per transport leg, per stay, per meal of each full day (and, when the
query asks for cuisines, an optional meal on travel days), per full day's attraction.

Each meta-task carries its local constraints; edges: leg j -> leg j+1, leg j -> stay j, meals and
attractions each in a chain (message passing: an outcome carries what its chain has used so far).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envs.travel.flows import mtp_prompts as P
from envs.travel.query import TravelQuery
from envs.travel.routes import Route
from envs.travel.schema import MEALS

__all__ = ["MetaTask", "decompose", "graph_record"]


@dataclass
class MetaTask:
    """One node of the manager's meta-task graph."""

    id: str
    kind: str  # transport | stay | meal | attraction
    brief: str  # the manager's (ambiguous) wording; the supervisor makes it concrete
    city: str
    day: int
    local: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)
    field: str = ""  # the plan field (transportation, accommodation, breakfast, ..., attraction)
    days: tuple[int, ...] = ()  # stays: the days whose accommodation it fills
    leg: tuple[str, str] = ("", "")
    optional: bool = False  # a travel-day meal: '-' allowed

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "brief": self.brief, "local": list(self.local), "needs": list(self.needs)}


def decompose(q: TravelQuery, route: Route, family: str) -> list[MetaTask]:
    """The meta-tasks of ``route`` travelled in the transport ``family``, in graph order."""
    lc = q.local_constraint
    tasks: list[MetaTask] = []
    for j, day, a, b in route.legs():
        local = [P.LOCAL["family"].format(family=family)]
        if lc.get("transportation"):
            local.insert(0, P.LOCAL["transportation"].format(rule=lc["transportation"]))
        tasks.append(MetaTask(f"leg{j}", "transport", P.BRIEFS["transport"].format(a=a, b=b, day=day), b, day,
                              local, [f"leg{j - 1}"] if j > 1 else [], "transportation", leg=(a, b)))
    for j, city, first, nights in route.stays():
        local = [P.LOCAL["nights"].format(nights=nights)]
        if lc.get("room type"):
            local.append(P.LOCAL["room type"].format(room_type=lc["room type"]))
        if lc.get("house rule"):
            local.append(P.LOCAL["house rule"].format(rule=lc["house rule"]))
        tasks.append(MetaTask(f"stay{j}", "stay", P.BRIEFS["stay"].format(city=city), city, first, local,
                              [f"leg{j}"], "accommodation", days=tuple(range(first, first + nights))))
    meal_local = [P.LOCAL["new restaurant"]] + ([P.LOCAL["cuisines"].format(cuisines=", ".join(lc["cuisine"]))]
                                                if lc.get("cuisine") else [])
    meals = [(d, c, m, False) for d, c in route.full_days() for m in MEALS]
    if lc.get("cuisine"):  # travel days may hold a meal for a cuisine still missing
        for _, day, a, b in route.legs():
            if a != q.org:
                meals.append((day, a, "breakfast", True))
            if b != q.org:
                meals.append((day, b, "dinner", True))
    prev = None
    for d, c, m, optional in meals:
        tid = f"day{d}.{m}"
        tasks.append(MetaTask(tid, "meal", P.BRIEFS["meal"].format(meal=m, day=d, city=c), c, d, list(meal_local),
                              [prev] if prev else [], m, optional=optional))
        prev = tid
    prev = None
    for d, c in route.full_days():
        tid = f"day{d}.attraction"
        tasks.append(MetaTask(tid, "attraction", P.BRIEFS["attraction"].format(day=d, city=c), c, d,
                              [P.LOCAL["new attraction"]], [prev] if prev else [], "attraction"))
        prev = tid
    return tasks


def graph_record(q: TravelQuery, route: Route, family: str, tasks: list[MetaTask]) -> dict[str, Any]:
    """The graph as the database keeps it (``mtp.graph``)."""
    return {"route": list(route.current_cities), "transport": family,
            "global": [P.GLOBAL_BUDGET.format(budget=q.budget)], "tasks": {t.id: t.as_dict() for t in tasks}}
