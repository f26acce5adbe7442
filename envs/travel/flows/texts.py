"""The texts the travel flows' prompts show (MTP, OKR-Agent, ReAct, flat).

The travel domain itself lives beside the solver in ``envs/travel``: every agent looks the sandbox
up through its search tools (:class:`envs.travel.catalog.Catalog` of priced options), decomposes
the trip into a route (:mod:`envs.travel.routes`), checks local constraints
(:mod:`envs.travel.local_checks`), costs and repairs itineraries (:mod:`envs.travel.trip_costs`,
:mod:`envs.travel.repair`, :mod:`envs.travel.blame`). The texts are plain ASCII: the embedded
planner's tokenizer knows printable ASCII only.
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.travel.catalog import Option, money
from envs.travel.query import TravelQuery
from envs.travel.routes import Route
from envs.travel.text import attractions_text

__all__ = ["attraction_text", "constraints_text", "option_lines", "route_text", "schedule_text"]


def option_lines(options: Sequence[Option]) -> str:
    """One ``- text (note)`` line per option."""
    return "\n".join(o.line() for o in options)


def route_text(cities: Sequence[str]) -> str:
    return ", then ".join(cities)


def schedule_text(route: Route) -> str:
    return "; ".join(f"{c} days {first}-{first + n}" for _, c, first, n in route.stays())


def constraints_text(q: TravelQuery) -> str:
    lc = q.local_constraint
    parts = [f"budget {money(q.budget)} for {q.people_number} people"]
    if lc.get("house rule"):
        parts.append(f"house rule: {lc['house rule']} allowed")
    if lc.get("room type"):
        parts.append(f"room type: {lc['room type']}")
    if lc.get("cuisine"):
        parts.append(f"cuisines: {', '.join(lc['cuisine'])}")
    if lc.get("transportation"):
        parts.append(f"transportation: {lc['transportation']}")
    return "; ".join(parts)


def attraction_text(options: Sequence[Option]) -> str:
    return attractions_text([o.text for o in options])
