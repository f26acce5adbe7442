"""The flat planner on the travel sandbox (the pattern: :mod:`rltf.flows.agents.flat`): the whole
itinerary in one constrained decode under the query's whole-plan grammar
(:meth:`envs.travel.env.TravelPlannerEnv.grammar`: the route, then every day's slots), or, with an
openai backend, free JSON text parsed by :func:`envs.travel.plans.parse_plan`.

In the benchmark track (``env.travel.track: benchmark``) the planner reads the official sole-planning
prompt of the query's text and its own reference information (``Given information: <notes>\nQuery:
<text>``: :attr:`envs.travel.query.QueryView.prompt`; a grammar holds the query's own reference options:
:meth:`envs.travel.env.TravelPlannerEnv.grammar`) and its first answer is the plan: no retry with the
parse error (a hint), nothing repairs it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from envs.travel.flows.react import PLAN_FORMAT
from envs.travel.plans import PlanParseError, parse_plan
from envs.travel.tracks import BENCHMARK
from rltf.flows.agents.domain import FlowRun
from rltf.flows.agents.flat import WholePlan
from rltf.flows.agents.flat import run_flat as run_whole_plan
from rltf.flows.engine.config import FlowConfig

__all__ = ["run_flat", "whole_plan"]

SYSTEM = "You are a travel planner."


def whole_plan(env, query) -> WholePlan:
    """What the flat pattern needs of ``query``."""
    if getattr(env, "track", None) == BENCHMARK:  # the query as the benchmark shows it, no structured field
        v = env.view(query)
        return WholePlan(v, v.id, v.prompt, SYSTEM, PLAN_FORMAT, parse_plan, PlanParseError)
    q = env.get_query(query)
    return WholePlan(q, q.id, q.query, SYSTEM, PLAN_FORMAT, parse_plan, PlanParseError)


def run_flat(env, query, backend, *, config: FlowConfig | None = None, system_prompts: bool = False,
             trace_path: str | Path | None = None) -> FlowRun:
    """Plan ``query`` in one decode on ``backend`` (see the module docstring)."""
    if getattr(env, "track", None) == BENCHMARK:  # one answer: no retry prompt carrying the parse error
        config = replace(config or FlowConfig(), max_attempts=1)
    return run_whole_plan(env, whole_plan(env, query), backend, config=config, system_prompts=system_prompts,
                          trace_path=trace_path)
