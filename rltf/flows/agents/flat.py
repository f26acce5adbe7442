"""The flat planner as a flow pattern: the whole plan in one constrained decode.

One node, ``plan``: with a backend that constrains (planner, hf) the answer is decoded under the
env's whole-plan grammar of the query (``env.grammar(tokenizer, task)``: travel's route, then every
day's slots), so it is always a delivered plan inside the env's action space and its
log-probability is exact (the same policy the flat main job trains). With an openai backend the
plan is free text, parsed by the domain (:class:`WholePlan`), and asked again with the parse error
when it does not parse (sole planning without reference information). The travel sandbox's flow
plug-in runs it with its queries' texts, plan format and parser.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rltf.flows.agents.agent_setup import delivered
from rltf.flows.agents.domain import FlowRun
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.database import Database
from rltf.flows.engine.errors import NodeRetry
from rltf.flows.engine.program import Ask, run_program

__all__ = ["WholePlan", "run_flat"]


@dataclass(frozen=True)
class WholePlan:
    """What the flat pattern needs of a domain for one query: the query (``task``: what the env's
    grammar takes; ``query_id`` and ``text``: its id and its words), the role system message, the
    plan format a free-text planner is told, and ``parse(text) -> plan`` raising ``parse_error``."""

    task: Any
    query_id: Any
    text: str
    system: str
    plan_format: str
    parse: Callable[[str], Any]
    parse_error: type[Exception] = ValueError


def _program(env, p: WholePlan, backend, system_prompts: bool) -> Iterator[Ask]:
    msgs = [{"role": "system", "content": p.system}] if system_prompts else []
    tok = getattr(backend, "tokenizer", None)
    if getattr(backend, "supports_grammar", False) and tok is not None:
        msgs.append({"role": "user", "content": p.text})
        return (yield Ask("plan", p.text, messages=msgs, grammar=env.grammar(tok, p.task)))

    def parse(text: str):
        try:
            return p.parse(text)
        except p.parse_error as e:
            raise NodeRetry(f"That is not a plan ({e}). {p.plan_format}") from None

    msgs.append({"role": "user", "content": f"{p.text}\n{p.plan_format}"})
    return (yield Ask("plan", p.text, messages=msgs, parse=parse))


def run_flat(env, plan: WholePlan, backend, *, config: FlowConfig | None = None, system_prompts: bool = False,
             trace_path: str | Path | None = None) -> FlowRun:
    """Plan the query of ``plan`` in one decode on ``backend`` (see the module docstring)."""
    db = Database({"task": plan.text})
    pr = run_program(backend, _program(env, plan, backend, system_prompts), db=db, config=config,
                     name=f"flat-q{plan.query_id}", trace_path=trace_path)
    result, error = delivered(pr)
    return FlowRun(result, pr.result, error)
