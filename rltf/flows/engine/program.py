"""Sequential agent programs as flows: a Python generator yields one :class:`Ask` per model query.

Agents whose next question depends on every answer so far (ReAct's think / act / observe loop,
OKR-Agent's expand / review / revise rounds) are easiest to write as straight-line Python::

    def program():
        action = yield Ask("step1.act", prompt, choices=["FlightSearch[A, B, 2022-03-08]", "Finish"])
        ...
        return plan

:func:`run_program` turns it into one pass of a :class:`~rltf.flows.engine.flow.Flow`: the first
``Ask`` is the flow's node, and each node's after-query sends its value into the generator and
adds the next ``Ask`` as a node of this pass (an order edge from the node that asked, AgentKit's
dynamic graph). So every query is a node of the trace with its messages, answer, retries, usage
and (constrained backends) the completion a trainer re-scores (:meth:`PassResult.constrained`).
An ``Ask``'s ``parse`` may raise :class:`~rltf.flows.engine.flow.NodeRetry` to re-query with a
message (the generator is resumed only with an accepted value). The program's return value is
:attr:`ProgramRun.value` (None when the pass stopped first: a node failed).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rltf.flows.backends.base import Message, Sampling
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.context import NodeContext
from rltf.flows.engine.database import Database
from rltf.flows.engine.flow import Flow
from rltf.flows.engine.graph import Node
from rltf.flows.engine.results import PassResult

__all__ = ["Ask", "Program", "ProgramRun", "run_program"]


@dataclass
class Ask:
    """One model query of a program (one node). ``messages`` default to one user message holding
    ``prompt``; ``choices`` / ``grammar`` constrain the answer as a node's do; ``parse(answer)``
    turns the answer into the value sent back (default: the chosen option, the grammar's action,
    or the text)."""

    name: str
    prompt: str
    messages: Sequence[Message] | None = None
    choices: Sequence[str] | None = None
    grammar: Any = None
    parse: Callable[[str], Any] | None = None
    sampling: Sampling | None = None
    max_attempts: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)


Program = Generator[Ask, Any, Any]


@dataclass
class ProgramRun:
    result: PassResult
    value: Any = None
    finished: bool = False  # the generator returned (every Ask answered)


class _Driver:
    def __init__(self, gen: Program):
        self.gen = gen
        self.finished = False
        self.value: Any = None

    def node(self, ask: Ask) -> Node:
        messages = [dict(m) for m in ask.messages] if ask.messages else [{"role": "user", "content": ask.prompt}]

        def compose(ctx: NodeContext) -> list[Message]:
            return [dict(m) for m in messages]

        def after(ctx: NodeContext, answer: str) -> Any:
            if ask.parse is not None:
                value = ask.parse(answer)  # may raise NodeRetry: the generator is not resumed
            elif ask.choices is not None:
                value = answer.strip()
            elif ask.grammar is not None and ctx.completion is not None and ctx.completion.value is not None:
                value = ctx.completion.value
            else:
                value = answer
            try:
                nxt = self.gen.send(value)
            except StopIteration as stop:
                self.finished, self.value = True, stop.value
                return value
            ctx.add_node(self.node(nxt), after=[ctx.name])
            return value

        return Node(ask.name, ask.prompt, compose=compose, after_query=after,
                    choices=list(ask.choices) if ask.choices is not None else None, grammar=ask.grammar,
                    sampling=ask.sampling, max_attempts=ask.max_attempts, meta=dict(ask.meta))


def run_program(backend, program: Program, *, db: Database | Mapping[str, Any] | None = None,
                config: FlowConfig | None = None, name: str = "program",
                trace_path: str | Path | None = None) -> ProgramRun:
    """Run ``program`` (a started-or-not generator of :class:`Ask`) as one pass of a flow on ``backend``."""
    driver = _Driver(program)
    try:
        first = next(program)
    except StopIteration as stop:  # nothing to ask: an empty pass
        flow = Flow(backend, db=db, config=config, name=name)
        return ProgramRun(flow.run(trace_path=trace_path), stop.value, True)
    flow = Flow(backend, db=db, config=config, name=name)
    flow.add_node(driver.node(first))
    result = flow.run(trace_path=trace_path)
    return ProgramRun(result, driver.value, driver.finished)
