"""MTP's template supervisor: a meta-task made concrete with its direct predecessor's outcome
(the previous leg's mode, the arrival transport of a stay, the restaurants already chosen and the
cuisines still missing, the attractions already visited)."""

from __future__ import annotations

from typing import Any

from envs.travel.flows import mtp_prompts as P
from envs.travel.flows.mtp_graph import MetaTask
from envs.travel.query import TravelQuery

__all__ = ["rewrite"]


def rewrite(q: TravelQuery, t: MetaTask, prev: dict[str, Any], missing: list[str]) -> str:
    """``t`` rewritten with ``prev`` (its predecessor's outcome) and ``missing`` (the wanted cuisines not covered
    yet)."""
    party = f"{q.people_number} {'person' if q.people_number == 1 else 'people'}"
    s = P.REWRITE[t.kind].format(task=t.id, a=t.leg[0], b=t.leg[1], day=t.day, date=q.date[t.day - 1], party=party,
                                 city=t.city, nights=len(t.days), first=t.days[0] if t.days else "",
                                 last=t.days[-1] if t.days else "", meal=t.field)
    if t.kind == "transport" and prev:
        s += P.PREVIOUS_LEG.format(choice=prev["choice"])
    elif t.kind == "stay" and prev:
        s += P.ARRIVING_BY.format(choice=prev["choice"])
    elif t.kind == "meal":
        if t.optional:
            s += P.OPTIONAL_MEAL
        if prev.get("used"):
            s += P.ALREADY_CHOSEN.format(used="; ".join(prev["used"]))
        if missing:
            s += P.CUISINES_MISSING.format(missing=", ".join(missing))
    elif t.kind == "attraction" and prev.get("used"):
        s += P.ALREADY_VISITED.format(used="; ".join(prev["used"]))
    return s + P.REWRITE_END.format(local="; ".join(t.local))
