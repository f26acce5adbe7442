"""Meta-Task Planning (Zhang et al. 2024) on the travel sandbox: the travel side of the MTP pattern
(:class:`rltf.flows.agents.mtp.MetaTaskPlanning`, whose docstring says the flow's shape).

1. **Manager** (three choice nodes, every answer decoded by the model under a grammar of the
   options the sandbox allows -- a :class:`~rltf.flows.engine.choice.ChoiceGrammar` with the planner
   backend, so each has an exact log-probability): ``manager.route`` the cities in order
   (:func:`~envs.travel.routes.city_orders`), ``manager.schedule`` the days the traveller
   moves (:func:`~envs.travel.routes.schedules`), ``manager.transport`` the transport family
   (flights and taxis, or self-driving: what makes "non-conflicting transportation" local to each
   leg). The last one's after-query builds the meta-task graph (:mod:`~envs.travel.flows.mtp_graph`):
   one meta-task per transport leg, per stay (accommodation), per meal of each full day (and, when the
   query asks for cuisines, an optional meal on travel days), per full day's attraction. Each
   meta-task carries its local constraints (transportation rule and family; room type, house rule,
   minimum nights; cuisines still to cover and no repeated restaurant; no repeated attraction); the
   budget stays global, for the deliverer. Edges: leg j -> leg j+1, leg j -> stay j, meals and
   attractions each in a chain. The graph is written to ``db["mtp.graph"]``.
2. **Supervisor**: the template rewrite (:mod:`~envs.travel.flows.mtp_rewrite`): arrival transport
   for a stay, the previous leg's mode, restaurants already chosen and cuisines still missing.
3. **Executors**: the search tools' results (:class:`~envs.travel.catalog.Catalog`) that meet the
   local constraints (cheapest first, ``max_options``: :mod:`~envs.travel.flows.mtp_candidates`).
4. **Deliverer**: the official JSON plan under the global budget: when the chosen items cost too
   much it offers the repaired variants that fit (greedy swaps to the cheapest alternatives that
   keep every local constraint: stays, meals, transport, or all; :mod:`envs.travel.repair`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envs.travel.catalog import SKIP, Option
from envs.travel.flows import mtp_prompts
from envs.travel.flows.mtp_candidates import candidates, missing_cuisines
from envs.travel.flows.mtp_credit import local_results
from envs.travel.flows.mtp_graph import MetaTask, decompose, graph_record
from envs.travel.flows.mtp_rewrite import rewrite
from envs.travel.flows.setup import travel_setup
from envs.travel.flows.texts import attraction_text, constraints_text, option_lines, route_text, schedule_text
from envs.travel.local_checks import covered_cuisines
from envs.travel.repair import repaired_variants
from envs.travel.routes import Route, assemble, city_orders, families, schedules
from envs.travel.trip_costs import TripCosts, choice_cost
from rltf.config.flow import MTPSettings
from rltf.flows.agents.domain import FlowRun
from rltf.flows.agents.mtp import MetaTaskPlanning
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.context import NodeContext
from rltf.flows.engine.flow import Flow

__all__ = ["MetaTask", "TravelMTP", "run_mtp"]

INF = float("inf")
P = mtp_prompts


class TravelMTP(MetaTaskPlanning):
    """The MTP flow of one travel query (see the module docstring)."""

    prompts = mtp_prompts

    def __init__(self, env, query, backend, settings: MTPSettings | None = None, *,
                 config: FlowConfig | None = None, system_prompts: bool = False):
        setup, self.cat = travel_setup(env, query, backend, config, system_prompts)
        super().__init__(setup, settings)
        self.q = self.cat.q
        self.costs = TripCosts(env, self.cat)  # the manager's cost hints, each computed once per query
        self.cities: tuple[str, ...] = ()
        self.route: Route | None = None
        self.family: str | None = None
        self._schedule_options: tuple[tuple[str, ...], dict[str, Route]] | None = None

    # ----------------------------------------------------------------------------- manager
    def manager(self, flow: Flow) -> None:
        """The manager's three nodes: route, schedule, transport family."""
        flow.db["constraints"] = constraints_text(self.q)
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
            self.decompose_pass(ctx)
            return self.family

        flow.add_node("manager.transport", P.MANAGER_TRANSPORT_NODE, needs=["manager.schedule"],
                      compose=lambda ctx: self._messages("manager", P.MANAGER_TRANSPORT.format(
                          head=self.setup.head(), schedule=schedule_text(self.route), options="\n".join(
                              self._family_line(f) for f in families(self.cat, self.route)))),
                      choices=lambda ctx: families(self.cat, self.route), after_query=transport_after)

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

    def meta_tasks(self, ctx: NodeContext) -> list[MetaTask]:
        tasks = decompose(self.q, self.route, self.family)
        ctx.db["mtp.graph"] = graph_record(self.q, self.route, self.family, tasks)
        return tasks

    # ------------------------------------------------------------------ supervisor + executors
    def candidates(self, t: MetaTask) -> tuple[list[Option], str]:
        return candidates(self.cat, t, self._prev(t), self.family)

    def concrete_brief(self, t: MetaTask) -> str:
        prev = self._prev(t)
        return rewrite(self.q, t, prev, missing_cuisines(self.cat, prev))

    def option_lines(self, options: list[Option]) -> str:
        return option_lines(options)

    def outcome(self, t: MetaTask, chosen: Option) -> dict[str, Any]:
        """The choice, its cost, the transport mode, the restaurants / attractions used and the
        cuisines covered so far."""
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

    def deliverer_variants(self, chosen: dict[str, str]) -> list[dict[str, Any]]:
        """The itinerary as chosen and its repaired variants under the budget."""
        return repaired_variants(self.cat, self.q.budget, chosen, self.tasks, self.alternatives)

    def deliverer_request(self, options: str) -> str:
        return P.DELIVERER.format(query=self.q.query, budget=self.q.budget, options=options)

    def deliver(self, ctx: NodeContext, variant: dict[str, Any]) -> Any:
        plan = assemble(self.route, self._cells(variant["choice"]))
        ctx.db["mtp.delivered"] = {"label": variant["label"], "cost": variant["cost"],
                                   "within_budget": variant["within_budget"]}
        return plan

    def local_results(self) -> dict[str, float]:
        """Each executed meta-task's local-constraint result (:func:`~envs.travel.flows.mtp_credit.local_results`)."""
        return local_results(self.cat, self.tasks, {tid: o["choice"] for tid, o in self.outcomes.items()}, self.family)


def run_mtp(env, query, backend, settings: MTPSettings | None = None, *, config: FlowConfig | None = None,
            system_prompts: bool = False, trace_path: str | Path | None = None) -> FlowRun:
    """Plan ``query`` with Meta-Task Planning on ``backend`` (see the module docstring)."""
    return TravelMTP(env, query, backend, settings, config=config, system_prompts=system_prompts).run(trace_path)
