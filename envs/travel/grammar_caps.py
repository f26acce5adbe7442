"""The options a query's plan grammar offers under the option caps (``env.travel.max_options`` /
``max_cities``): :func:`envs.travel.candidates.capped_candidates` plus what keeps a capped grammar
complete without reading a held-out query's plan (:func:`complete_route`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from envs.travel.candidates import QueryCandidates, capped_candidates

__all__ = ["complete_route", "grammar_caps"]


def complete_route(c: QueryCandidates, seed: int) -> tuple[str, ...] | None:
    """The first route (its days' ``current_city``) of ``c`` with an option for every slot of every
    day, the route cities tried in an order drawn with ``(seed, query id)``; None if none."""
    from envs.travel.grammar import SLOT_FIELDS, enumerate_routes, slot_options  # deferred: grammar imports torch

    order = np.random.default_rng([seed, c.query_id]).permutation(len(c.route_cities))
    shuffled = replace(c, route_cities=[c.route_cities[i] for i in order])
    found: dict[tuple[int, str, str], bool] = {}

    def has(d: int, cc: str, f: str) -> bool:
        if (d, cc, f) not in found:
            found[(d, cc, f)] = bool(slot_options(shuffled, d, cc, f, max_attractions=1))
        return found[(d, cc, f)]

    return next((r for r in enumerate_routes(shuffled) if all(has(d, cc, f) for d, cc in enumerate(r, 1)
                                                              for f in SLOT_FIELDS)), None)


def grammar_caps(c: QueryCandidates, limit: int, cities: int, plan: str, seed: int) -> QueryCandidates:
    """The options a query's grammar offers under the caps (``env.travel.max_options`` / ``max_cities``):
    :func:`capped_candidates` keeping what ``plan`` names (a train query's solver's plan, or ``""``),
    never fewer cities than the query visits. With no plan (``""``: every held-out query), the
    cities of one complete itinerary of the query's own options (:func:`complete_route`) are kept, so
    that the sample -- drawn without any plan -- still holds an itinerary."""
    if limit <= 0 and cities <= 0:
        return c
    cities = max(cities, c.visiting_city_number) if cities > 0 else 0
    if not plan and 0 < cities < len(c.route_cities):
        plan = " ".join(complete_route(c, seed) or ())
    return capped_candidates(c, limit, plan, seed, cities)
