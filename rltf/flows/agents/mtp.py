"""Meta-Task Planning (Zhang et al. 2024) as a pattern: a manager decomposes the query into a graph of
meta-tasks, a supervisor makes each concrete with its predecessors' outcomes, an executor per
meta-task chooses among the options meeting its local constraints, and a deliverer assembles the
plan under the global ones.

One query is one pass of a :class:`~rltf.flows.engine.flow.Flow`:

1. **Manager** (:meth:`MetaTaskPlanning.manager`, the domain's): choice nodes whose last answer
   calls :meth:`MetaTaskPlanning.decompose_pass`, which *builds the meta-task graph* from the answers
   (:meth:`~MetaTaskPlanning.meta_tasks`) and adds it to the pass (AgentKit's dynamic graph). A
   meta-task has an ``id``, a ``kind``, a ``brief`` (the manager's wording), its ``local``
   constraints and the meta-tasks it ``needs`` (message passing: an outcome carries what its chain
   has used so far).
2. **Supervisor**: before a meta-task runs it is rewritten with its direct predecessors'
   outcomes (:meth:`~MetaTaskPlanning.concrete_brief`): ``supervisor: template`` does it in the
   executor's composition (the trace's messages show the rewrite), ``supervisor: model`` adds a
   free-text node ``supervise.<task>`` whose answer the executor reads (an LLM backend).
3. **Executors** (one choice node per meta-task): the domain's options meeting the local
   constraints (:meth:`~MetaTaskPlanning.candidates`, the first ``max_options`` shown); the model
   chooses one; its outcome (:meth:`~MetaTaskPlanning.outcome`) goes to ``db["mtp.outcomes.<task>"]``.
4. **Deliverer** (a choice node): the domain's plans of the chosen options under the global
   constraints (:meth:`~MetaTaskPlanning.deliverer_variants`: e.g. repaired to fit a budget); the
   model picks one; its value (and ``db["mtp.plan"]``) is the plan.

Every choice is a constrained completion of the pass (:meth:`PassResult.constrained`), ready
for re-scoring with gradients by a trainer. The travel sandbox's MTP (its flow plug-in) fills the
pattern in: the route, schedule and transport
family as the manager, one meta-task per leg, stay, meal and attraction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rltf.config.flow import MTPSettings
from rltf.flows.agents.agent_setup import AgentSetup
from rltf.flows.agents.domain import FlowRun
from rltf.flows.backends.base import Message, Sampling
from rltf.flows.engine.context import NodeContext
from rltf.flows.engine.database import Database
from rltf.flows.engine.errors import NodeFail
from rltf.flows.engine.flow import Flow
from rltf.flows.engine.graph import Node

__all__ = ["MetaTaskPlanning"]


class MetaTaskPlanning:
    """The MTP pattern for one query (see the module docstring): :meth:`build` the manager's nodes,
    whose last answer decomposes the query into meta-tasks (:meth:`decompose_pass`), each run by a
    (supervised) executor, then the deliverer; :meth:`run` one pass.

    A domain subclasses it with its manager, meta-tasks, options, outcomes and plans; ``prompts``
    (the domain's texts) holds ``ROLES`` (manager, supervisor, executor, deliverer system messages),
    ``SUPERVISOR_NODE`` / ``SUPERVISOR`` / ``OUTCOME`` / ``NO_OUTCOMES``, ``EXECUTOR`` /
    ``MODEL_SUPERVISED``, ``DELIVERER_NODE`` and ``OPTION``."""

    prompts: Any = None

    def __init__(self, setup: AgentSetup, settings: MTPSettings | None = None):
        self.setup = setup
        self.settings = settings or MTPSettings()
        self.tasks: dict[str, Any] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.shown: dict[str, list[Any]] = {}  # task -> the options its executor was offered
        self.alternatives: dict[str, list[Any]] = {}  # task -> every option meeting its local constraints
        self.variants: dict[str, list[dict]] = {}
        self.notes: dict[str, str] = {}  # task -> what its tool call found

    def _messages(self, role: str, text: str) -> list[Message]:
        return self.setup.messages(self.prompts.ROLES[role], text)

    # --------------------------------------------------------------- the domain's part
    def manager(self, flow: Flow) -> None:
        """Add the manager's nodes to ``flow``; the last one's after-query calls :meth:`decompose_pass`."""
        raise NotImplementedError

    def meta_tasks(self, ctx: NodeContext) -> list[Any]:
        """The meta-tasks of the manager's answers, in graph order (written to the database as the
        domain keeps its graph)."""
        raise NotImplementedError

    def candidates(self, t: Any) -> tuple[list[Any], str]:
        """Every option meeting ``t``'s local constraints, in the order shown (each has a ``text``), and
        a note of what the tools found."""
        raise NotImplementedError

    def concrete_brief(self, t: Any) -> str:
        """``t`` made concrete with its predecessors' outcomes (the template supervisor)."""
        raise NotImplementedError

    def option_lines(self, options: list[Any]) -> str:
        """The executor's options as the request lists them."""
        raise NotImplementedError

    def outcome(self, t: Any, chosen: Any) -> dict[str, Any]:
        """What the executor's choice passes down ``t``'s chain (``choice``: the option's text)."""
        raise NotImplementedError

    def deliverer_variants(self, chosen: dict[str, str]) -> list[dict[str, Any]]:
        """The deliverer's options for the executors' ``chosen`` texts: each a dict with its ``label``."""
        raise NotImplementedError

    def deliverer_request(self, options: str) -> str:
        """The deliverer's request, ``options`` its lines."""
        raise NotImplementedError

    def deliver(self, ctx: NodeContext, variant: dict[str, Any]) -> Any:
        """The plan of the deliverer's chosen ``variant`` (and what the database keeps of it)."""
        raise NotImplementedError

    def local_results(self) -> dict[str, float]:
        """Each executed meta-task's local-constraint result in [0, 1] (``flow.credit: local+global``)."""
        return {}

    # ----------------------------------------------------------------------------- manager
    def build(self, db: Database | None = None) -> Flow:
        """The flow: the manager's nodes (the rest of the graph is their output)."""
        db = db if db is not None else Database()
        db["task"] = self.setup.task
        flow = Flow(self.setup.backend, db=db, config=self.setup.config, name=f"mtp-q{self.setup.query_id}")
        self.manager(flow)
        return flow

    def decompose_pass(self, ctx: NodeContext) -> None:
        """The meta-task graph of the manager's answers, added to this pass: a (supervised)
        executor per meta-task, then the deliverer."""
        P = self.prompts
        tasks = self.meta_tasks(ctx)
        self.tasks = {t.id: t for t in tasks}
        for t in tasks:
            after = [] if t.needs else [ctx.name]
            if self.settings.supervisor == "model":
                ctx.add_node(Node(f"supervise.{t.id}", P.SUPERVISOR_NODE.format(task=t.id),
                                  compose=self._supervise_compose(t),
                                  sampling=Sampling(max_new_tokens=self.settings.supervisor_tokens)),
                             needs=t.needs, after=after)
                ctx.add_node(self._executor(t), needs=[f"supervise.{t.id}"])
            else:
                ctx.add_node(self._executor(t), needs=t.needs, after=after)
        ctx.add_node(Node("deliverer", P.DELIVERER_NODE, compose=self._deliver_compose,
                          choices=self._deliver_choices, after_query=self._deliver_after),
                     needs=[t.id for t in tasks])

    # ------------------------------------------------------------------ supervisor + executors
    def _prev(self, t: Any) -> dict[str, Any]:
        """The outcome of ``t``'s first predecessor (none: it starts its chain)."""
        return self.outcomes.get(t.needs[0], {}) if t.needs else {}

    def _supervise_compose(self, t: Any):
        P = self.prompts

        def compose(ctx: NodeContext) -> list[Message]:
            outcomes = "\n".join(P.OUTCOME.format(task=d.name, answer=d.answer) for d in ctx.dependencies)
            return self._messages("supervisor", P.SUPERVISOR.format(
                head=self.setup.head(), brief=t.brief, local="; ".join(t.local), outcomes=outcomes or P.NO_OUTCOMES))
        return compose

    def _offer(self, t: Any) -> list[Any]:
        if t.id not in self.shown:
            ok, note = self.candidates(t)
            if not ok:
                raise NodeFail(f"meta-task {t.id}: the tools found nothing")
            self.alternatives[t.id] = ok
            self.shown[t.id] = ok[: self.settings.max_options]
            self.notes[t.id] = note
        return self.shown[t.id]

    def _executor(self, t: Any) -> Node:
        P = self.prompts

        def compose(ctx: NodeContext) -> list[Message]:
            options = self._offer(t)
            brief = self.concrete_brief(t)
            sup = [d for d in ctx.dependencies if d.name == f"supervise.{t.id}"]
            if sup and sup[0].ok:
                brief = P.MODEL_SUPERVISED.format(rewrite=sup[0].answer.strip(), brief=brief)
            # (the meta-task as the supervisor made it concrete, not the whole query: MTP's executors
            # see their own task, and the planner's prompts stay short)
            return self._messages("executor", P.EXECUTOR.format(brief=brief, note=self.notes[t.id],
                                                                options=self.option_lines(options)))

        def after(ctx: NodeContext, answer: str) -> Any:
            chosen = next(o for o in self.shown[t.id] if o.text == answer.strip())
            self.outcomes[t.id] = self.outcome(t, chosen)
            ctx.db[f"mtp.outcomes.{t.id}"] = self.outcomes[t.id]
            return chosen.text

        return Node(t.id, t.brief, compose=compose, choices=lambda ctx: [o.text for o in self._offer(t)],
                    after_query=after, meta={"kind": t.kind})

    # ---------------------------------------------------------------------------- deliverer
    def _deliver_offer(self) -> list[dict[str, Any]]:
        if "offer" not in self.variants:
            missing = [t for t in self.tasks if t not in self.outcomes]
            if missing:
                raise NodeFail(f"meta-tasks without an outcome: {missing}")
            self.variants["offer"] = self.deliverer_variants({tid: o["choice"] for tid, o in self.outcomes.items()})
        return self.variants["offer"]

    def _deliver_choices(self, ctx: NodeContext) -> list[str]:
        return [v["label"] for v in self._deliver_offer()]

    def _deliver_compose(self, ctx: NodeContext) -> list[Message]:
        lines = "\n".join(self.prompts.OPTION.format(option=v["label"], hint="") for v in self._deliver_offer())
        return self._messages("deliverer", self.deliverer_request(lines))

    def _deliver_after(self, ctx: NodeContext, answer: str) -> Any:
        v = next(x for x in self._deliver_offer() if x["label"] == answer.strip())
        plan = self.deliver(ctx, v)
        ctx.db["mtp.plan"] = plan
        return plan

    # --------------------------------------------------------------------------------- run
    def run(self, trace_path: str | Path | None = None) -> FlowRun:
        flow = self.build()
        result = flow.run(trace_path=trace_path)
        plan = result["deliverer"].value if "deliverer" in result.results and result["deliverer"].ok else None
        error = None if plan is not None else "; ".join(f"{r.name}: {r.error}" for r in result.failures()) or None
        return FlowRun(plan, result, error, {"graph": flow.db.get("mtp.graph"),
                                             "delivered": flow.db.get("mtp.delivered"),
                                             "local": self.local_results()})
