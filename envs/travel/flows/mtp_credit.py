"""MTP's per-decision credit: each executed meta-task's local-constraint result for the option its
executor chose -- the share of its local constraints met, by the evaluator's rules. What
``flow.credit: local+global`` gives each executor decision."""

from __future__ import annotations

from collections.abc import Mapping

from envs.travel.catalog import SKIP, Catalog
from envs.travel.flows.mtp_graph import MetaTask
from envs.travel.local_checks import covered_cuisines, hotel_problems, transport_problems

__all__ = ["local_results"]


def local_results(cat: Catalog, tasks: Mapping[str, MetaTask], chosen: Mapping[str, str],
                  family: str | None) -> dict[str, float]:
    """Per meta-task of ``chosen`` (task id -> option text): transport, the query's transportation
    rule and the trip's ``family``; stay, room type, house rule, minimum nights; meal, a
    restaurant no other meal of the trip repeats, and, when the query asks for cuisines, every
    wanted cuisine covered by the trip's meals (a constraint of the meal chain, so it credits each
    of its meals); attraction, not repeated."""
    q = cat.q
    counts: dict[str, int] = {}
    for tid, text in chosen.items():
        if tasks[tid].kind in ("meal", "attraction") and text != "-":
            counts[text] = counts.get(text, 0) + 1
    wanted = set(q.local_constraint.get("cuisine") or ())
    meals = [text for tid, text in chosen.items() if tasks[tid].kind == "meal"]
    cuisines_ok = not wanted or wanted <= covered_cuisines(cat, meals)
    out: dict[str, float] = {}
    for tid, text in chosen.items():
        t = tasks[tid]
        o = SKIP if text == "-" else cat.lookup(text)
        if t.kind == "transport":
            checks = [o is not None and not transport_problems(o, q, family)]
        elif t.kind == "stay":
            checks = [o is not None and not hotel_problems(o, q, len(t.days))]
        elif t.kind == "meal":
            checks = [text == "-" or counts.get(text, 0) == 1] + ([cuisines_ok] if wanted else [])
        else:
            checks = [counts.get(text, 0) == 1]
        out[tid] = sum(checks) / len(checks)
    return out
