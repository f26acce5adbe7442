"""Flows: LLM "thought processes" as graphs of prompt nodes (AgentKit), on pluggable backends.

A :class:`Flow` holds nodes (a prompt each), edges between them (``data``: pass the answer on;
``order``: only go first), a shared :class:`Database` and a backend. :meth:`Flow.run` evaluates
every node once in topological order (one *pass*): compose the messages -> query the backend ->
after-query (parse, validate, write the database, edit the graph for this pass). A node whose
answer does not parse raises :class:`NodeRetry` and is asked again, with its answer and the
message, a bounded number of times. Every pass returns a :class:`PassResult` and writes a JSON
trace (:func:`load_trace` reads it). The semantics in full: :mod:`rltf.flows.engine.flow`.

Example::

    from rltf.flows import Flow, FlowConfig, NodeRetry, make_backend

    flow = Flow(make_backend({"kind": "hf", "model": "path/to/model"}), config=FlowConfig(trace_dir="traces"))
    flow.db["task"] = "3 days from Seattle to Boise"
    flow.add_node("cities", "List the cities to visit for: $db.task$")
    def parse_days(ctx, answer):
        if not answer.strip().isdigit():
            raise NodeRetry("Answer with a number only.")
        return int(answer)
    flow.add_node("days", "How many days in each city?", needs=["cities"], after_query=parse_days,
                  output_key="plan.days")
    flow.add_node("go", "Shall we book now?", needs=["days"], choices=["yes", "no"])
    result = flow.run()          # result["days"].value, result.usage, result.trace_path

Backends (:mod:`rltf.flows.backends`): ``hf`` (:class:`HFBackend`, a local transformers model),
``openai`` (:class:`OpenAIBackend`, any OpenAI-compatible endpoint), ``planner``
(:class:`PlannerBackend`, rltf's trainable planner with constrained decoding: a node's
``choices`` or ``grammar`` makes its answer come from a :class:`ChoiceGrammar` / any
:class:`constrained_decoding.protocol.Grammar`, with the exact log π_c and the decoded rows for
:func:`rescore`), and :class:`ScriptedBackend` (canned answers, for tests).

Agent patterns over a domain (loaded on first use): :class:`MetaTaskPlanning` (Meta-Task Planning,
:mod:`rltf.flows.agents.mtp`), :class:`OKRAgent` (OKR-Agent, :mod:`rltf.flows.agents.okr`),
:class:`ReActAgent` (ReAct, :mod:`rltf.flows.agents.react`), :func:`run_flat` (one constrained decode,
:mod:`rltf.flows.agents.flat`); what they ask of a domain, :class:`FlowDomain` (the flow methods it
offers, :class:`FlowMethod`; :mod:`rltf.flows.agents.domain`), handed over by an env's ``flow_domain()``
(the travel sandbox's flow plug-in); sequential agents as generator programs (:class:`Ask`,
:func:`run_program`, :mod:`rltf.flows.engine.program`); their evaluation, ``python -m rltf.flows.evaluate
config=configs/travel-mtp.yaml`` (:func:`evaluate_flows`, the ``flow:`` section :class:`FlowSettings`).

Training a flow with RLTF: a pass is a trajectory of its constrained decisions
(:mod:`rltf.flows.training.trajectory`), trained by :class:`rltf.flows.training.trainer.FlowRLTFTrainer` after a warm
start on the domain's reference answers (:mod:`rltf.flows.training.teacher`), optionally with one LoRA adapter per role
(:mod:`rltf.flows.training.roles`); the main job ``train/rltf.py config=configs/travel-mtp.yaml`` runs it all
(:mod:`rltf.stages.flow_job`).

Layering: this package uses ``constrained_decoding`` and the env interface (``envs``); the concrete
envs' flow plug-ins use it, never the other way round.
"""

import importlib

from rltf.flows import backends
from rltf.flows.engine.choice import ChoiceError, ChoiceGrammar, choice_grammar
from rltf.flows.engine.config import Backoff, FlowConfig
from rltf.flows.engine.context import NodeContext, default_compose
from rltf.flows.engine.database import Database, PlaceholderError, placeholders, render_value
from rltf.flows.engine.errors import FlowError, GraphCycleError, GraphEditError, GraphError, NodeFail, NodeRetry
from rltf.flows.engine.flow import Flow
from rltf.flows.engine.graph import Edge, EdgeKind, Node, find_cycle
from rltf.flows.engine.results import NodeResult, PassResult, Usage
from rltf.flows.engine.trace import AttemptTrace, NodeTrace, PassTrace, load_trace

# where each name that is not imported above lives, relative to rltf.flows: every name of the
# backends package (its own list; the heavy backends load on first use) and the agent patterns
_ELSEWHERE = {name: "backends" for name in backends.__all__} | {
    "Ask": "engine.program", "ProgramRun": "engine.program", "run_program": "engine.program",
    "FlowRun": "agents.domain", "FlowDomain": "agents.domain", "FlowMethod": "agents.domain",
    "run_flat": "agents.flat", "MetaTaskPlanning": "agents.mtp", "OKRAgent": "agents.okr",
    "ReActAgent": "agents.react", "evaluate_flows": "evaluation",
}

__all__ = [
    "AttemptTrace", "Backoff", "ChoiceError", "ChoiceGrammar", "Database", "Edge", "EdgeKind", "Flow", "FlowConfig",
    "FlowError", "GraphCycleError", "GraphEditError", "GraphError", "Node", "NodeContext", "NodeFail", "NodeResult",
    "NodeRetry", "NodeTrace", "PassResult", "PassTrace", "PlaceholderError", "Usage", "choice_grammar",
    "default_compose", "find_cycle", "load_trace", "placeholders", "render_value", *_ELSEWHERE,
]


def __getattr__(name: str):
    """The backends' names (torch / transformers / openai load with their backend) and the agent
    patterns, on first use."""
    if name in _ELSEWHERE:
        return getattr(importlib.import_module(f"rltf.flows.{_ELSEWHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
