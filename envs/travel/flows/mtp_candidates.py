"""An MTP executor's options: its meta-task's tool results that meet the local constraints.

Transport: the query's transportation rule and the trip's family; stays: room type, house rule,
minimum nights; meals: a restaurant its chain has not chosen, serving a wanted cuisine still
missing when one does (a travel day's optional meal: ``-`` or such a restaurant); attractions:
not visited before. Cheapest first; when none meets them, every result is shown (and the note says so).
"""

from __future__ import annotations

from typing import Any

from envs.travel.catalog import SKIP, Catalog, Option
from envs.travel.flows import mtp_prompts as P
from envs.travel.flows.mtp_graph import MetaTask
from envs.travel.local_checks import hotel_problems, transport_problems

__all__ = ["candidates", "missing_cuisines"]


def missing_cuisines(cat: Catalog, prev: dict[str, Any]) -> list[str]:
    """The query's wanted cuisines its meal chain has not covered yet (``prev``: the last meal's outcome)."""
    wanted = list(cat.q.local_constraint.get("cuisine") or ())
    have = set(prev.get("covered", ()))
    return [c for c in wanted if c not in have]


def candidates(cat: Catalog, t: MetaTask, prev: dict[str, Any], family: str | None) -> tuple[list[Option], str]:
    """Every tool result meeting ``t``'s local constraints (cheapest first) and what the tool call found."""
    q = cat.q
    found = cat.results(t.kind, t.city, t.day, t.leg)
    call = P.TOOL_CALLS[t.kind].format(a=t.leg[0], b=t.leg[1], date=q.date[t.day - 1], city=t.city)
    if t.kind == "attraction":
        used = set(prev.get("used", ()))
        return [o for o in found if o.text not in used] or list(found), P.FOUND.format(call=call, found=len(found))
    if t.kind == "transport":
        ok = [o for o in found if not transport_problems(o, q, family)]
    elif t.kind == "stay":
        ok = [o for o in found if not hotel_problems(o, q, len(t.days))]
    else:
        used = set(prev.get("used", ()))
        ok = [o for o in found if o.text not in used]
        missing = set(missing_cuisines(cat, prev))
        serving = [o for o in ok if missing & set(o.cuisines)]
        if t.optional:
            ok = [SKIP, *serving] if missing else [SKIP]
        elif serving:
            ok = serving
    note = P.FOUND_MEETING.format(call=call, found=len(found), meeting=len([o for o in ok if o is not SKIP]))
    if not ok:
        ok, note = list(found), note + P.NONE_MEETS
    return sorted(ok, key=lambda o: o.cost), note
