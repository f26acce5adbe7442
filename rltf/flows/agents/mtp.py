"""Meta-Task Planning (Zhang et al. 2024) on the travel sandbox, as a flow.

One query is one pass of a :class:`~rltf.flows.engine.flow.Flow`:

1. **Manager** (three choice nodes, every answer decoded by the model under a grammar of the
   options the sandbox allows -- a :class:`~rltf.flows.engine.choice.ChoiceGrammar` with the planner
   backend, so each has an exact log-probability): ``manager.route`` the cities in order
   (:func:`~envs.travel.routes.city_orders`), ``manager.schedule`` the days the traveller
   moves (:func:`~envs.travel.routes.schedules`), ``manager.transport`` the transport family
   (flights and taxis, or self-driving: what makes "non-conflicting transportation" local to each
   leg). The last one's after-query *builds the meta-task graph* from those answers and adds it to
   the pass (AgentKit's dynamic graph, :mod:`~rltf.flows.agents.mtp_graph`): one meta-task per transport leg, per stay
   (accommodation), per meal of each full day (and, when the query asks for cuisines, an optional meal on travel
   days), per full day's attraction. Each meta-task carries its local constraints (transportation
   rule and family; room type, house rule, minimum nights; cuisines still to cover and no repeated
   restaurant; no repeated attraction); the budget stays global, for the deliverer. Edges: leg j
   -> leg j+1, leg j -> stay j, meals and attractions each in a chain (message passing: an
   outcome carries what its chain has used so far). The graph is written to ``db["mtp.graph"]``.
2. **Supervisor**: before a meta-task runs it is rewritten with its direct predecessors'
   outcomes (arrival transport for a stay, the previous leg's mode, restaurants already chosen and
   cuisines still missing): ``supervisor: template`` does it in the executor's composition (the
   trace's messages show the rewrite), ``supervisor: model`` adds a free-text node
   ``supervise.<task>`` whose answer the executor reads (an LLM backend).
3. **Executors** (one choice node per meta-task): call the search tools
   (:class:`~envs.travel.catalog.Catalog`), keep the results that meet the local constraints
   (cheapest first, ``max_options``) and the model chooses one; the outcome goes to
   ``db["mtp.outcomes.<task>"]``.
4. **Deliverer** (a choice node): assembles the official JSON plan under the global budget:
   when the chosen items cost too much it offers the repaired variants that fit (greedy swaps to
   the cheapest alternatives that keep every local constraint: stays, meals, transport, or all;
   :mod:`envs.travel.repair`),
   and the model picks one; its value (and ``db["mtp.plan"]``) is the plan.

Every choice is a constrained completion of the pass (:meth:`PassResult.constrained`), ready
for re-scoring with gradients by a trainer.
"""


from __future__ import annotations

from pathlib import Path
from typing import Any

from envs.travel.catalog import SKIP, Option
from envs.travel.local_checks import covered_cuisines
from envs.travel.repair import repaired_variants
from envs.travel.routes import Route, assemble, city_orders, families, schedules
from envs.travel.trip_costs import TripCosts, choice_cost
from rltf.config.flow import MTPSettings
from rltf.flows.agents import mtp_prompts as P
from rltf.flows.agents.agent_setup import AgentSetup
from rltf.flows.agents.mtp_candidates import candidates, missing_cuisines
from rltf.flows.agents.mtp_credit import local_results
from rltf.flows.agents.mtp_graph import MetaTask, decompose, graph_record
from rltf.flows.agents.mtp_rewrite import rewrite
from rltf.flows.agents.travel_nodes import (
    FlowRun,
    attraction_text,
    constraints_text,
    option_lines,
    route_text,
    schedule_text,
)
from rltf.flows.backends.base import Message, Sampling
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.context import NodeContext
from rltf.flows.engine.database import Database
from rltf.flows.engine.errors import NodeFail
from rltf.flows.engine.flow import Flow
from rltf.flows.engine.graph import Node

__all__ = ["MetaTask", "MetaTaskPlanning", "run_mtp"]

INF = float("inf")


class MetaTaskPlanning:
    """The MTP flow of one query (see the module docstring): :meth:`build` the manager's nodes,
    whose last answer decomposes the trip into meta-tasks (:meth:`_decompose`), each run by a
    (supervised) executor, then the deliverer; :meth:`run` one pass."""

    def __init__(self, env, query, backend, settings: MTPSettings | None = None, *,
                 config: FlowConfig | None = None, system_prompts: bool = False):
        self.setup = AgentSetup.create(env, query, backend, config, system_prompts)
        self.cat, self.q = self.setup.cat, self.setup.q
        self.settings = settings or MTPSettings()
        self.costs = TripCosts(env, self.cat)  # the manager's cost hints, each computed once per query
        self.cities: tuple[str, ...] = ()
        self.route: Route | None = None
        self.family: str | None = None
        self.tasks: dict[str, MetaTask] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.shown: dict[str, list[Option]] = {}  # task -> the options its executor was offered
        self.alternatives: dict[str, list[Option]] = {}  # task -> every option meeting its local constraints
        self.variants: dict[str, list[dict]] = {}
        self.notes: dict[str, str] = {}  # task -> what its tool call found
        self._schedule_options: tuple[tuple[str, ...], dict[str, Route]] | None = None

    def _messages(self, role: str, text: str) -> list[Message]:
        return self.setup.messages(P.ROLES[role], text)

    # ----------------------------------------------------------------------------- manager
    def build(self, db: Database | None = None) -> Flow:
        """The flow: the manager's three nodes (the rest of the graph is their output)."""
        db = db if db is not None else Database()
        db["task"] = self.q.query
        db["constraints"] = constraints_text(self.q)
        flow = Flow(self.setup.backend, db=db, config=self.setup.config, name=f"mtp-q{self.q.id}")
        orders = self._orders()
        if not orders:
            raise ValueError(f"query {self.q.id}: the sandbox allows no route")

        def route_after(ctx: NodeContext, answer: str) -> Any:
            self.cities = orders[answer.strip()]
            ctx.db["mtp.manager.cities"] = list(self.cities)
            return list(self.cities)

        flow.add_node("manager.route", P.MANAGER_ROUTE_NODE, compose=lambda ctx: self._messages("manager", (
            P.MANAGER_ROUTE.format(head=self.setup.head(), options="\n".join(
                self._option_line(o, self.costs.city_order, c) for o, c in orders.items())))),
            choices=list(orders), after_query=route_after)

        def schedule_after(ctx: NodeContext, answer: str) -> Any:
            self.route = self._schedules()[answer.strip()]
            ctx.db["mtp.manager.current_city"] = list(self.route.current_cities)
            return list(self.route.current_cities)

        flow.add_node("manager.schedule", P.MANAGER_SCHEDULE_NODE, needs=["manager.route"],
                      compose=lambda ctx: self._messages("manager", P.MANAGER_SCHEDULE.format(
                          head=self.setup.head(), route=route_text(self.cities), options="\n".join(
                              self._option_line(o, self.costs.route, r) for o, r in self._schedules().items()))),
                      choices=lambda ctx: list(self._schedules()), after_query=schedule_after)

        def transport_after(ctx: NodeContext, answer: str) -> Any:
            self.family = answer.strip()
            self._decompose(ctx)
            return self.family

        flow.add_node("manager.transport", P.MANAGER_TRANSPORT_NODE, needs=["manager.schedule"],
                      compose=lambda ctx: self._messages("manager", P.MANAGER_TRANSPORT.format(
                          head=self.setup.head(), schedule=schedule_text(self.route), options="\n".join(
                              self._family_line(f) for f in families(self.cat, self.route)))),
                      choices=lambda ctx: families(self.cat, self.route), after_query=transport_after)
        return flow

    def _orders(self) -> dict[str, tuple[str, ...]]:
        """The manager's city orders (computed once per query and ranking: :meth:`Catalog.derived`)."""
        def compute() -> tuple:
            orders = {route_text(c): c for c in city_orders(self.cat)}
            return tuple(self._cheapest_first(orders, self.costs.city_order).items())
        return dict(self.cat.derived(("mtp.orders", *self._ranking()), compute))

    def _schedules(self) -> dict[str, Route]:
        if self._schedule_options is None or self._schedule_options[0] != self.cities:
            cities = self.cities

            def compute() -> tuple:
                routes = {schedule_text(r): r for r in schedules(self.cat, cities)}
                return tuple(self._cheapest_first(routes, self.costs.route).items())
            self._schedule_options = (cities, dict(self.cat.derived(("mtp.schedules", cities, *self._ranking()),
                                                                    compute)))
        return self._schedule_options[1]

    def _ranking(self) -> tuple[bool, int]:
        """What :meth:`_cheapest_first` depends on beside the query."""
        return bool(self.settings.cost_hints), int(self.settings.manager_options or 0)

    def _cheapest_first(self, options: dict[str, Any], cost) -> dict[str, Any]:
        """With cost hints and ``manager_options``: the options by their cheapest trip, the first N."""
        n = self.settings.manager_options
        if not (self.settings.cost_hints and n):
            return options
        costs = {k: cost(v) for k, v in options.items()}
        ranked = sorted(options, key=lambda k: costs[k])  # stable: ties keep the sandbox's order
        return {k: options[k] for k in ranked[:n]}

    def _hint(self, cost: float, template: str = P.COST_HINT) -> str:
        if not self.settings.cost_hints or cost == INF:
            return ""
        return template.format(cost=int(round(cost)), budget=self.q.budget)

    def _option_line(self, text: str, cost, option: Any) -> str:
        """A route / schedule option with the cheapest trip through it (cost hints)."""
        return P.OPTION.format(option=text, hint=self._hint(cost(option) if self.settings.cost_hints else INF))

    def _family_line(self, family: str) -> str:
        if not self.settings.cost_hints:
            return P.OPTION.format(option=family, hint="")
        cost = self.costs.family_transport(self.route, family)
        return P.OPTION.format(option=family, hint=self._hint(cost, P.TRANSPORT_COST_HINT))

    def _decompose(self, ctx: NodeContext) -> None:
        """The meta-task graph of the manager's answers, added to this pass: a (supervised)
        executor per meta-task, then the deliverer."""
        tasks = decompose(self.q, self.route, self.family)
        self.tasks = {t.id: t for t in tasks}
        ctx.db["mtp.graph"] = graph_record(self.q, self.route, self.family, tasks)
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
    def _prev(self, t: MetaTask) -> dict[str, Any]:
        return self.outcomes.get(t.needs[0], {}) if t.needs else {}

    def _supervise_compose(self, t: MetaTask):
        def compose(ctx: NodeContext) -> list[Message]:
            outcomes = "\n".join(P.OUTCOME.format(task=d.name, answer=d.answer) for d in ctx.dependencies)
            return self._messages("supervisor", P.SUPERVISOR.format(
                head=self.setup.head(), brief=t.brief, local="; ".join(t.local), outcomes=outcomes or P.NO_OUTCOMES))
        return compose

    def _offer(self, t: MetaTask) -> list[Option]:
        if t.id not in self.shown:
            ok, note = candidates(self.cat, t, self._prev(t), self.family)
            if not ok:
                raise NodeFail(f"meta-task {t.id}: the tools found nothing")
            self.alternatives[t.id] = ok
            self.shown[t.id] = ok[: self.settings.max_options]
            self.notes[t.id] = note
        return self.shown[t.id]

    def _executor(self, t: MetaTask) -> Node:
        def compose(ctx: NodeContext) -> list[Message]:
            options = self._offer(t)
            prev = self._prev(t)
            brief = rewrite(self.q, t, prev, missing_cuisines(self.cat, prev))
            sup = [d for d in ctx.dependencies if d.name == f"supervise.{t.id}"]
            if sup and sup[0].ok:
                brief = P.MODEL_SUPERVISED.format(rewrite=sup[0].answer.strip(), brief=brief)
            # (the meta-task as the supervisor made it concrete, not the whole query: MTP's executors
            # see their own task, and the planner's prompts stay short)
            return self._messages("executor", P.EXECUTOR.format(brief=brief, note=self.notes[t.id],
                                                                options=option_lines(options)))

        def after(ctx: NodeContext, answer: str) -> Any:
            chosen = next(o for o in self.shown[t.id] if o.text == answer.strip())
            self.outcomes[t.id] = self._outcome(t, chosen)
            ctx.db[f"mtp.outcomes.{t.id}"] = self.outcomes[t.id]
            return chosen.text

        return Node(t.id, t.brief, compose=compose, choices=lambda ctx: [o.text for o in self._offer(t)],
                    after_query=after, meta={"kind": t.kind})

    def _outcome(self, t: MetaTask, chosen: Option) -> dict[str, Any]:
        """What an executor's choice passes down its chain: the choice, its cost, the transport
        mode, the restaurants / attractions used and the cuisines covered so far."""
        p = self._prev(t)
        out: dict[str, Any] = {"choice": chosen.text, "cost": chosen.cost * (len(t.days) if t.days else 1)}
        if t.kind == "transport":
            out["mode"] = chosen.mode
        if t.kind in ("meal", "attraction"):
            out["used"] = list(p.get("used", ())) + ([chosen.text] if chosen is not SKIP else [])
        if t.kind == "meal":
            out["covered"] = sorted(set(p.get("covered", ())) | covered_cuisines(self.cat, [chosen.text]))
        return out

    # ---------------------------------------------------------------------------- deliverer
    def _cells(self, choice: dict[str, str]) -> dict[tuple[int, str], str]:
        cells: dict[tuple[int, str], str] = {}
        for tid, text in choice.items():
            t = self.tasks[tid]
            if t.kind == "stay":
                for d in t.days:
                    cells[(d, "accommodation")] = text
            elif t.kind == "attraction":
                cells[(t.day, "attraction")] = attraction_text([self.cat.lookup(text)]) if text != "-" else "-"
            else:
                cells[(t.day, t.field)] = text
        return cells

    def _cost(self, choice: dict[str, str]) -> float:
        return choice_cost(self.cat, choice, self.tasks)

    def _deliver_offer(self) -> list[dict[str, Any]]:
        if "offer" not in self.variants:
            missing = [t for t in self.tasks if t not in self.outcomes]
            if missing:
                raise NodeFail(f"meta-tasks without an outcome: {missing}")
            chosen = {tid: o["choice"] for tid, o in self.outcomes.items()}
            self.variants["offer"] = repaired_variants(self.cat, self.q.budget, chosen, self.tasks, self.alternatives)
        return self.variants["offer"]

    def _deliver_choices(self, ctx: NodeContext) -> list[str]:
        return [v["label"] for v in self._deliver_offer()]

    def _deliver_compose(self, ctx: NodeContext) -> list[Message]:
        lines = "\n".join(P.OPTION.format(option=v["label"], hint="") for v in self._deliver_offer())
        return self._messages("deliverer", P.DELIVERER.format(query=self.q.query, budget=self.q.budget, options=lines))

    def _deliver_after(self, ctx: NodeContext, answer: str) -> Any:
        v = next(x for x in self._deliver_offer() if x["label"] == answer.strip())
        plan = assemble(self.route, self._cells(v["choice"]))
        ctx.db["mtp.delivered"] = {"label": v["label"], "cost": v["cost"], "within_budget": v["within_budget"]}
        ctx.db["mtp.plan"] = plan
        return plan

    # --------------------------------------------------------------------------------- run
    def local_results(self) -> dict[str, float]:
        """Each executed meta-task's local-constraint result (:func:`~rltf.flows.agents.mtp_credit.local_results`)."""
        return local_results(self.cat, self.tasks, {tid: o["choice"] for tid, o in self.outcomes.items()}, self.family)

    def run(self, trace_path: str | Path | None = None) -> FlowRun:
        flow = self.build()
        result = flow.run(trace_path=trace_path)
        plan = result["deliverer"].value if "deliverer" in result.results and result["deliverer"].ok else None
        error = None if plan is not None else "; ".join(f"{r.name}: {r.error}" for r in result.failures()) or None
        return FlowRun(plan, result, error, {"graph": flow.db.get("mtp.graph"),
                                             "delivered": flow.db.get("mtp.delivered"),
                                             "local": self.local_results()})


def run_mtp(env, query, backend, settings: MTPSettings | None = None, *, config: FlowConfig | None = None,
            system_prompts: bool = False, trace_path: str | Path | None = None) -> FlowRun:
    """Plan ``query`` with Meta-Task Planning on ``backend`` (see the module docstring)."""
    return MetaTaskPlanning(env, query, backend, settings, config=config, system_prompts=system_prompts).run(trace_path)
