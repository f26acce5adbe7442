"""OKR-Agent's hierarchy: the objectives, the key results each can be expanded into, and the
tree of agents (:class:`rltf.flows.agents.okr.Agent`: one per objective, per key result, per key result and
day) with their criteria: the travel side of the OKR-Agent pattern."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from envs.travel.flows import okr_prompts as P
from envs.travel.query import TravelQuery
from envs.travel.schema import MEALS
from envs.travel.verdicts import PAPER_NAMES
from rltf.flows.agents.okr import Agent

__all__ = ["FIELDS", "OBJECTIVES", "Agent", "agent_tree", "candidate_key_results", "key_result_choices",
           "objective_orders"]

OBJECTIVES = ("route", "transport", "accommodation", "dining", "sightseeing", "budget")
FIELDS = {"transport": ("transportation",), "accommodation": ("accommodation",), "dining": MEALS,
          "sightseeing": ("attraction",)}
"""The plan fields each objective that fills slots of the solution writes."""


def candidate_key_results(q: TravelQuery) -> dict[str, list[str]]:
    """Per objective, the named constraints that can be its key results for query ``q``."""
    lc = q.local_constraint
    return {
        "route": ["reasonable_city_route", "complete_information"],
        "transport": ["non_conflicting_transportation"] + (["transportation"] if lc.get("transportation") else []),
        "accommodation": (["minimum_nights_stay"] + (["room_rule"] if lc.get("house rule") else [])
                          + (["room_type"] if lc.get("room type") else [])),
        "dining": ["diverse_restaurants"] + (["cuisine"] if lc.get("cuisine") else []),
        "sightseeing": ["diverse_attractions"],
        "budget": ["budget"],
    }


def objective_orders() -> list[str]:
    """The leading agent's options: every order of the objectives with the route first."""
    return ["route, " + ", ".join(p) for p in itertools.permutations(OBJECTIVES[1:])]


def key_result_choices(candidates: Sequence[str]) -> dict[str, list[str]]:
    """An objective's options: every non-empty set of its candidate key results (largest first),
    by its text (the constraints' paper names)."""
    subsets = [list(c) for k in range(len(candidates), 0, -1) for c in itertools.combinations(candidates, k)]
    return {", ".join(PAPER_NAMES[n] for n in s): s for s in subsets}


def agent_tree(objectives: Sequence[str], key_results: dict[str, list[str]], levels: int, days: int) -> list[Agent]:
    """The agents in execution order: each objective, then (``levels >= 2``) its key results, each
    followed (``levels == 3``, route and budget excepted) by one agent per day."""
    agents: list[Agent] = []
    for obj in objectives:
        agents.append(Agent(obj, obj, 1, list(key_results[obj]), P.TITLES[obj], P.criterion(obj, key_results[obj])))
        if levels < 2:
            continue
        for kr in key_results[obj]:
            a = Agent(f"{obj}/{kr}", obj, 2, [kr], P.KEY_RESULT_TITLE.format(name=PAPER_NAMES[kr]),
                      P.criterion(obj, [kr]), obj)
            agents.append(a)
            if levels >= 3 and obj != "budget" and obj != "route":
                for d in range(1, days + 1):
                    agents.append(Agent(f"{obj}/{kr}/day{d}", obj, 3, [kr],
                                        P.DAY_KEY_RESULT_TITLE.format(name=PAPER_NAMES[kr], day=d),
                                        P.criterion(obj, [kr], d), a.name, d))
    return agents
