"""The flat planner as a flow: the whole itinerary in one constrained decode.

One node, ``plan``: with a backend that constrains (planner, hf) the answer is decoded under the
query's whole-plan grammar (:meth:`envs.travel.env.TravelPlannerEnv.grammar`: the route, then
every day's slots), so it is always a delivered plan inside the sandbox and its log-probability is
exact (the same policy ``train/rltf.py config=configs/travel-flat.yaml`` trains). With an openai
backend the plan is free JSON text, parsed, and asked again with the parse error when it does not
parse (sole planning without reference information).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from envs.travel.plans import PlanParseError, parse_plan
from rltf.flows.agents.agent_setup import delivered
from rltf.flows.agents.react import PLAN_FORMAT
from rltf.flows.agents.travel_nodes import FlowRun
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.database import Database
from rltf.flows.engine.errors import NodeRetry
from rltf.flows.engine.program import Ask, run_program

__all__ = ["run_flat"]


def _program(env, q, backend, system_prompts: bool) -> Iterator[Ask]:
    msgs = [{"role": "system", "content": "You are a travel planner."}] if system_prompts else []
    tok = getattr(backend, "tokenizer", None)
    if getattr(backend, "supports_grammar", False) and tok is not None:
        msgs.append({"role": "user", "content": q.query})
        return (yield Ask("plan", q.query, messages=msgs, grammar=env.grammar(tok, q)))

    def parse(text: str):
        try:
            return parse_plan(text)
        except PlanParseError as e:
            raise NodeRetry(f"That is not a plan ({e}). {PLAN_FORMAT}") from None

    msgs.append({"role": "user", "content": f"{q.query}\n{PLAN_FORMAT}"})
    return (yield Ask("plan", q.query, messages=msgs, parse=parse))


def run_flat(env, query, backend, *, config: FlowConfig | None = None, system_prompts: bool = False,
             trace_path: str | Path | None = None) -> FlowRun:
    """Plan ``query`` in one decode on ``backend`` (see the module docstring)."""
    q = env.get_query(query)
    db = Database({"task": q.query})
    pr = run_program(backend, _program(env, q, backend, system_prompts), db=db, config=config, name=f"flat-q{q.id}",
                     trace_path=trace_path)
    plan, error = delivered(pr)
    return FlowRun(plan, pr.result, error)
