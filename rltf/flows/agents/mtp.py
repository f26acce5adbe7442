"""Meta-Task Planning (Zhang et al. 2024) on the travel sandbox, as a flow.

One query is one pass of a :class:`~rltf.flows.engine.flow.Flow`:

1. **Manager** (three choice nodes, every answer decoded by the model under a grammar of the
   options the sandbox allows -- a :class:`~rltf.flows.engine.choice.ChoiceGrammar` with the planner
   backend, so each has an exact log-probability): ``manager.route`` the cities in order
   (:func:`~rltf.flows.agents.travel_nodes.city_orders`), ``manager.schedule`` the days the traveller
   moves (:func:`~rltf.flows.agents.travel_nodes.schedules`), ``manager.transport`` the transport family
   (flights and taxis, or self-driving: what makes "non-conflicting transportation" local to each
   leg). The last one's after-query *builds the meta-task graph* from those answers and adds it to
   the pass (AgentKit's dynamic graph): one meta-task per transport leg, per stay (accommodation),
   per meal of each full day (and, when the query asks for cuisines, an optional meal on travel
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
   (:class:`~rltf.flows.agents.travel_nodes.Catalog`), keep the results that meet the local constraints
   (cheapest first, ``max_options``) and the model chooses one; the outcome goes to
   ``db["mtp.outcomes.<task>"]``.
4. **Deliverer** (a choice node): assembles the official JSON plan under the global budget:
   when the chosen items cost too much it offers the repaired variants that fit (greedy swaps to
   the cheapest alternatives that keep every local constraint: stays, meals, transport, or all),
   and the model picks one; its value (and ``db["mtp.plan"]``) is the plan.

Every choice is a constrained completion of the pass (:meth:`PassResult.constrained`), ready
for re-scoring with gradients by a trainer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.travel.schema import MEALS
from rltf.flows.backends.base import Message, Sampling
from rltf.flows.engine.database import Database
from rltf.flows.engine.flow import Flow, FlowConfig, Node, NodeContext, NodeFail
from rltf.config.flow import MTPSettings
from rltf.flows.agents.travel_nodes import (
    Catalog,
    FlowRun,
    Option,
    Route,
    assemble,
    attraction_text,
    city_orders,
    constraints_text,
    covered_cuisines,
    families,
    hotel_problems,
    option_lines,
    route_text,
    schedule_text,
    schedules,
    transport_problems,
)

__all__ = ["MetaTask", "MetaTaskPlanning", "run_mtp"]

NONE = Option("none", "-", 0.0, "skip this meal")
ROLES = {
    "manager": "You are the manager agent of a travel-planning team: decompose the trip into meta-tasks.",
    "supervisor": "You are the supervisor agent: make a meta-task concrete with its predecessors' outcomes.",
    "executor": "You are an executor agent: complete one meta-task with the search tools under its local constraints.",
    "deliverer": "You are the deliverer agent: assemble the final itinerary under the global constraints.",
}


@dataclass
class MetaTask:
    """One node of the manager's meta-task graph."""

    id: str
    kind: str  # transport | stay | meal | attraction
    brief: str  # the manager's (ambiguous) wording; the supervisor makes it concrete
    city: str
    day: int
    local: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)
    field: str = ""  # the plan field (transportation, accommodation, breakfast, ..., attraction)
    days: tuple[int, ...] = ()  # stays: the days whose accommodation it fills
    leg: tuple[str, str] = ("", "")
    optional: bool = False  # a travel-day meal: '-' allowed

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "brief": self.brief, "local": list(self.local), "needs": list(self.needs)}


class MetaTaskPlanning:
    """The MTP flow of one query (see the module docstring)."""

    def __init__(self, env, query, backend, settings: MTPSettings | None = None, *,
                 config: FlowConfig | None = None, system_prompts: bool = False):
        self.env = env
        self.cat = Catalog(env, query)
        self.q = self.cat.q
        self.backend = backend
        self.settings = settings or MTPSettings()
        self.config = config or FlowConfig()
        self.system_prompts = system_prompts
        self.cities: tuple[str, ...] = ()
        self.route: Route | None = None
        self.family: str | None = None
        self.tasks: dict[str, MetaTask] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.shown: dict[str, list[Option]] = {}  # task -> the options its executor was offered
        self.alternatives: dict[str, list[Option]] = {}  # task -> every option meeting its local constraints
        self.variants: dict[str, list[dict]] = {}
        self.notes: dict[str, str] = {}  # task -> what its tool call found
        # the manager's cost hints, computed once per query: city order -> its cheapest trip, and the
        # schedule options of the order chosen (the choices and the prompt read one list)
        self._order_bounds: dict[tuple[str, ...], float] = {}
        self._schedule_options: tuple[tuple[str, ...], dict[str, Route]] | None = None

    # ----------------------------------------------------------------------------- helpers
    def _messages(self, role: str, text: str) -> list[Message]:
        msgs: list[Message] = []
        if self.system_prompts:
            msgs.append({"role": "system", "content": ROLES[role]})
        msgs.append({"role": "user", "content": text})
        return msgs

    def _head(self) -> str:
        return f"{self.q.query}\nConstraints: {constraints_text(self.q)}."

    # ----------------------------------------------------------------------------- manager
    def _orders(self) -> dict[str, tuple[str, ...]]:
        orders = {route_text(c): c for c in city_orders(self.cat)}
        return self._cheapest_first(orders, self._order_bound)

    def _schedules(self) -> dict[str, Route]:
        if self._schedule_options is None or self._schedule_options[0] != self.cities:
            self._schedule_options = (self.cities, self._cheapest_first(
                {schedule_text(r): r for r in schedules(self.cat, self.cities)}, self._bound))
        return self._schedule_options[1]

    def _cheapest_first(self, options: dict[str, Any], bound) -> dict[str, Any]:
        """With cost hints and ``manager_options``: the options by their cheapest trip, the first N."""
        n = self.settings.manager_options
        if not (self.settings.cost_hints and n):
            return options
        costs = {k: bound(v) for k, v in options.items()}
        ranked = sorted(options, key=lambda k: costs[k])  # stable: ties keep the sandbox's order
        return {k: options[k] for k in ranked[:n]}

    # cost hints: the cheapest trip through an option by the sandbox's prices (the solver's lower bound:
    # cheapest legs, stays meeting the local constraints and meals), what decides the budget
    def _bound(self, route: Route) -> float:
        if not hasattr(self, "_route_costs"):
            from envs.travel.route_costs import RouteCosts

            self._route_costs = RouteCosts(self.env.index, self.q)
        return self._route_costs.lower_bound(tuple(route.cities), tuple(route.moves))

    def _order_bound(self, cities: tuple[str, ...]) -> float:
        """The cheapest trip through a city order (its cheapest schedule), computed once per order:
        the ranking and the prompt's hint both read it."""
        if cities not in self._order_bounds:
            self._order_bounds[cities] = min((self._bound(r) for r in schedules(self.cat, cities)),
                                             default=float("inf"))
        return self._order_bounds[cities]

    def _hint(self, cost: float) -> str:
        if not self.settings.cost_hints or cost == float("inf"):
            return ""
        return f" (from ${int(round(cost))}, budget ${self.q.budget})"

    def _order_line(self, text: str, cities: tuple[str, ...]) -> str:
        return f"- {text}{self._hint(self._order_bound(cities) if self.settings.cost_hints else float('inf'))}"

    def _family_line(self, family: str) -> str:
        if not self.settings.cost_hints:
            return f"- {family}"
        total = 0.0
        for _, day, a, b in self.route.legs():
            ok = [o.cost for o in self.cat.transport(a, b, day) if not transport_problems(o, self.q, family)]
            total += min(ok) if ok else float("inf")
        return f"- {family}{self._hint(total).replace('from', 'transport from')}"

    def build(self, db: Database | None = None) -> Flow:
        """The flow: the manager's three nodes (the rest of the graph is their output)."""
        db = db if db is not None else Database()
        db["task"] = self.q.query
        db["constraints"] = constraints_text(self.q)
        flow = Flow(self.backend, db=db, config=self.config, name=f"mtp-q{self.q.id}")
        orders = self._orders()
        if not orders:
            raise ValueError(f"query {self.q.id}: the sandbox allows no route")

        def route_after(ctx: NodeContext, answer: str) -> Any:
            self.cities = orders[answer.strip()]
            ctx.db["mtp.manager.cities"] = list(self.cities)
            return list(self.cities)

        flow.add_node("manager.route", "Manager: which cities, in which order?",
                      compose=lambda ctx: self._messages("manager", (
                          f"{self._head()}\nManager: decompose the trip. Visit which cities, in which order?\n"
                          + "\n".join(self._order_line(o, c) for o, c in orders.items()))),
                      choices=list(orders), after_query=route_after)

        def schedule_after(ctx: NodeContext, answer: str) -> Any:
            self.route = self._schedules()[answer.strip()]
            ctx.db["mtp.manager.current_city"] = list(self.route.current_cities)
            return list(self.route.current_cities)

        flow.add_node("manager.schedule", "Manager: how many nights in each city?", needs=["manager.route"],
                      compose=lambda ctx: self._messages("manager", (
                          f"{self._head()}\nManager: the route is {route_text(self.cities)}. On which days do we "
                          "move? (city days first-last)\n" + "\n".join(
                              f"- {o}{self._hint(self._bound(r) if self.settings.cost_hints else float('inf'))}"
                              for o, r in self._schedules().items()))),
                      choices=lambda ctx: list(self._schedules()), after_query=schedule_after)

        def transport_after(ctx: NodeContext, answer: str) -> Any:
            self.family = answer.strip()
            self._decompose(ctx)
            return self.family

        flow.add_node("manager.transport", "Manager: which transport for the whole trip?", needs=["manager.schedule"],
                      compose=lambda ctx: self._messages("manager", (
                          f"{self._head()}\nManager: the schedule is {schedule_text(self.route)}. Which transport "
                          "for every leg (no self-driving with flights or taxis)?\n"
                          + "\n".join(self._family_line(f) for f in families(self.cat, self.route)))),
                      choices=lambda ctx: families(self.cat, self.route), after_query=transport_after)
        return flow

    def _decompose(self, ctx: NodeContext) -> None:
        """The meta-task graph of the manager's answers, added to this pass."""
        q, r, lc = self.q, self.route, self.q.local_constraint
        tasks: list[MetaTask] = []
        for j, day, a, b in r.legs():
            local = [f"transport family: {self.family}"]
            if lc.get("transportation"):
                local.insert(0, f"transportation: {lc['transportation']}")
            tasks.append(MetaTask(f"leg{j}", "transport", f"Find transportation from {a} to {b} on day {day}.", b, day,
                                  local, [f"leg{j - 1}"] if j > 1 else [], "transportation", leg=(a, b)))
        for j, city, first, nights in r.stays():
            local = [f"minimum nights at most {nights}"]
            if lc.get("room type"):
                local.append(f"room type: {lc['room type']}")
            if lc.get("house rule"):
                local.append(f"house rule: {lc['house rule']} allowed")
            tasks.append(MetaTask(f"stay{j}", "stay", f"Find accommodation in {city}.", city, first, local,
                                  [f"leg{j}"], "accommodation", days=tuple(range(first, first + nights))))
        meal_local = ["a restaurant not chosen before"] + ([f"cover the cuisines {', '.join(lc['cuisine'])}"]
                                                            if lc.get("cuisine") else [])
        meals = [(d, c, m, False) for d, c in r.full_days() for m in MEALS]
        if lc.get("cuisine"):  # travel days may hold a meal for a cuisine still missing
            for _, day, a, b in r.legs():
                if a != q.org:
                    meals.append((day, a, "breakfast", True))
                if b != q.org:
                    meals.append((day, b, "dinner", True))
        prev = None
        for d, c, m, optional in meals:
            tid = f"day{d}.{m}"
            tasks.append(MetaTask(tid, "meal", f"Choose {m} on day {d} in {c}.", c, d, list(meal_local),
                                  [prev] if prev else [], m, optional=optional))
            prev = tid
        prev = None
        for d, c in r.full_days():
            tid = f"day{d}.attraction"
            tasks.append(MetaTask(tid, "attraction", f"Choose an attraction on day {d} in {c}.", c, d,
                                  ["an attraction not visited before"], [prev] if prev else [], "attraction"))
            prev = tid
        self.tasks = {t.id: t for t in tasks}
        ctx.db["mtp.graph"] = {"route": list(r.current_cities), "transport": self.family,
                               "global": [f"budget: ${q.budget} for the whole trip"],
                               "tasks": {t.id: t.as_dict() for t in tasks}}
        model_sup = self.settings.supervisor == "model"
        for t in tasks:
            after = [] if t.needs else [ctx.name]
            if model_sup:
                ctx.add_node(Node(f"supervise.{t.id}", f"Supervisor: rewrite meta-task {t.id}.",
                                  compose=self._supervise_compose(t),
                                  sampling=Sampling(max_new_tokens=self.settings.supervisor_tokens)),
                             needs=t.needs, after=after)
                ctx.add_node(self._executor(t), needs=[f"supervise.{t.id}"])
            else:
                ctx.add_node(self._executor(t), needs=t.needs, after=after)
        ctx.add_node(Node("deliverer", "Deliverer: assemble the itinerary under the budget.",
                          compose=self._deliver_compose, choices=self._deliver_choices,
                          after_query=self._deliver_after), needs=[t.id for t in tasks])

    # ------------------------------------------------------------------ supervisor + executors
    def _prev(self, t: MetaTask) -> dict[str, Any]:
        return self.outcomes.get(t.needs[0], {}) if t.needs else {}

    def _rewrite(self, t: MetaTask) -> str:
        """The template supervisor: ``t`` made concrete with its direct predecessors' outcomes."""
        q, p = self.q, self._prev(t)
        party = f"{q.people_number} {'person' if q.people_number == 1 else 'people'}"
        if t.kind == "transport":
            a, b = t.leg
            s = f"Meta-task {t.id}: travel from {a} to {b} on day {t.day} ({q.date[t.day - 1]}) for {party}."
            if p:
                s += f" Previous leg: {p['choice']}."
        elif t.kind == "stay":
            s = (f"Meta-task {t.id}: accommodation in {t.city} for {len(t.days)} night(s), days "
                 f"{t.days[0]}-{t.days[-1]}, for {party}.")
            if p:
                s += f" Arriving by {p['choice']}."
        elif t.kind == "meal":
            s = f"Meta-task {t.id}: {t.field} on day {t.day} in {t.city} for {party}."
            if t.optional:
                s += " Optional: '-' skips it."
            if p.get("used"):
                s += f" Already chosen (not again): {'; '.join(p['used'])}."
            missing = self._missing(p)
            if missing:
                s += f" Cuisines still to cover: {', '.join(missing)}."
        else:
            s = f"Meta-task {t.id}: an attraction in {t.city} on day {t.day}."
            if p.get("used"):
                s += f" Already visited: {'; '.join(p['used'])}."
        return s + f" Local constraints: {'; '.join(t.local)}."

    def _missing(self, prev: dict[str, Any]) -> list[str]:
        wanted = list(self.q.local_constraint.get("cuisine") or ())
        have = set(prev.get("covered", ()))
        return [c for c in wanted if c not in have]

    def _candidates(self, t: MetaTask) -> tuple[list[Option], str]:
        """Every tool result meeting ``t``'s local constraints (cheapest first) and the tool call."""
        q, p, cat = self.q, self._prev(t), self.cat
        if t.kind == "transport":
            a, b = t.leg
            found = cat.transport(a, b, t.day)
            call = f"FlightSearch[{a}, {b}, {q.date[t.day - 1]}] + GoogleDistanceMatrix[{a}, {b}, self-driving|taxi]"
            ok = [o for o in found if not transport_problems(o, q, self.family)]
        elif t.kind == "stay":
            found = cat.hotels(t.city)
            call = f"AccommodationSearch[{t.city}]"
            ok = [o for o in found if not hotel_problems(o, q, len(t.days))]
        elif t.kind == "meal":
            found = cat.restaurants(t.city)
            call = f"RestaurantSearch[{t.city}]"
            used = set(p.get("used", ()))
            ok = [o for o in found if o.text not in used]
            missing = set(self._missing(p))
            serving = [o for o in ok if missing & set(o.cuisines)]
            if t.optional:
                ok = [NONE, *serving] if missing else [NONE]
            elif serving:
                ok = serving
        else:
            found = cat.attractions(t.city)
            call = f"AttractionSearch[{t.city}]"
            used = set(p.get("used", ()))
            return [o for o in found if o.text not in used] or list(found), f"{call}: {len(found)} results"
        note = f"{call}: {len(found)} results, {len([o for o in ok if o is not NONE])} meet the local constraints"
        if not ok:
            ok, note = list(found), note + " (none does: every result is shown)"
        return sorted(ok, key=lambda o: o.cost), note

    def _offer(self, t: MetaTask) -> list[Option]:
        if t.id not in self.shown:
            ok, note = self._candidates(t)
            if not ok:
                raise NodeFail(f"meta-task {t.id}: the tools found nothing")
            self.alternatives[t.id] = ok
            self.shown[t.id] = ok[: self.settings.max_options]
            self.notes[t.id] = note
        return self.shown[t.id]

    def _supervise_compose(self, t: MetaTask):
        def compose(ctx: NodeContext) -> list[Message]:
            outs = "\n".join(f"- {d.name}: {d.answer}" for d in ctx.dependencies) or "- (none: it starts the chain)"
            return self._messages("supervisor", (
                f"{self._head()}\nSupervisor: rewrite this meta-task so every parameter is concrete, using the "
                f"outcomes of the meta-tasks it depends on.\nMeta-task: {t.brief} Local constraints: "
                f"{'; '.join(t.local)}.\nOutcomes:\n{outs}\nRewritten meta-task:"))
        return compose

    def _executor(self, t: MetaTask) -> Node:
        def compose(ctx: NodeContext) -> list[Message]:
            options = self._offer(t)
            brief = self._rewrite(t)
            sup = [d for d in ctx.dependencies if d.name == f"supervise.{t.id}"]
            if sup and sup[0].ok:
                brief = f"Supervisor: {sup[0].answer.strip()}\n{brief}"
            # (the meta-task as the supervisor made it concrete, not the whole query: MTP's executors
            # see their own task, and the planner's prompts stay short)
            return self._messages("executor", (
                f"{brief}\n{self.notes[t.id]}. Options (cheapest first):\n"
                f"{option_lines(options)}\nAnswer with one option."))

        def after(ctx: NodeContext, answer: str) -> Any:
            chosen = next(o for o in self.shown[t.id] if o.text == answer.strip())
            p = self._prev(t)
            out: dict[str, Any] = {"choice": chosen.text, "cost": chosen.cost * (len(t.days) if t.days else 1)}
            if t.kind == "transport":
                out["mode"] = chosen.mode
            if t.kind in ("meal", "attraction"):
                out["used"] = list(p.get("used", ())) + ([chosen.text] if chosen is not NONE else [])
            if t.kind == "meal":
                out["covered"] = sorted(set(p.get("covered", ())) | covered_cuisines(self.cat, [chosen.text]))
            self.outcomes[t.id] = out
            ctx.db[f"mtp.outcomes.{t.id}"] = out
            return chosen.text

        return Node(t.id, t.brief, compose=compose, choices=lambda ctx: [o.text for o in self._offer(t)],
                    after_query=after, meta={"kind": t.kind})

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
        total = 0.0
        for tid, text in choice.items():
            t = self.tasks[tid]
            o = self.cat.lookup(text)
            if o is not None and t.kind != "attraction":
                total += o.cost * (len(t.days) if t.days else 1)
        return total

    def _valid_swap(self, t: MetaTask, alt: Option, choice: dict[str, str]) -> bool:
        if t.kind != "meal":
            return True
        others = {v for k, v in choice.items() if k != t.id and self.tasks[k].kind == "meal" and v != "-"}
        if alt is not NONE and alt.text in others:
            return False
        meals = [v for k, v in choice.items() if self.tasks[k].kind == "meal"]
        before = covered_cuisines(self.cat, meals)
        after = covered_cuisines(self.cat, [v for v in meals if v != choice[t.id]] + [alt.text])
        return before <= after

    def repair(self, choice: dict[str, str], kinds: Sequence[str]) -> dict[str, str]:
        """Greedy budget repair: while over budget, swap the meta-task (of ``kinds``) whose cheapest
        valid alternative saves the most; stop when within budget or nothing saves."""
        choice = dict(choice)
        while self._cost(choice) > self.q.budget:
            best: tuple[float, str, str] | None = None
            for tid, text in choice.items():
                t = self.tasks[tid]
                if t.kind not in kinds:
                    continue
                mult = len(t.days) if t.days else 1
                cur = (self.cat.lookup(text) or NONE).cost * mult
                for alt in self.alternatives.get(tid, ()):
                    if alt.cost * mult >= cur:
                        break
                    if self._valid_swap(t, alt, choice):
                        saving = cur - alt.cost * mult
                        if best is None or saving > best[0]:
                            best = (saving, tid, alt.text)
                        break
            if best is None:
                break
            choice[best[1]] = best[2]
        return choice

    def _variants(self) -> list[dict[str, Any]]:
        chosen = {tid: o["choice"] for tid, o in self.outcomes.items()}
        strategies = [("as chosen", ()), ("cheaper stays", ("stay",)), ("cheaper meals", ("meal",)),
                      ("cheaper transport", ("transport",)), ("cheapest overall", ("stay", "meal", "transport"))]
        out, seen = [], set()
        for label, kinds in strategies:
            c = self.repair(chosen, kinds) if kinds else chosen
            key = tuple(sorted(c.items()))
            if key in seen:
                continue
            seen.add(key)
            cost = self._cost(c)
            out.append({"label": f"{label}, total ${int(round(cost))}", "choice": c, "cost": cost,
                        "within_budget": cost <= self.q.budget})
        fits = [v for v in out if v["within_budget"]]
        if not fits:
            cheapest = min(out, key=lambda v: v["cost"])
            cheapest = dict(cheapest, label=f"over budget: {cheapest['label']}")
            return [cheapest]
        return fits

    def _deliver_offer(self) -> list[dict[str, Any]]:
        if "offer" not in self.variants:
            missing = [t for t in self.tasks if t not in self.outcomes]
            if missing:
                raise NodeFail(f"meta-tasks without an outcome: {missing}")
            self.variants["offer"] = self._variants()
        return self.variants["offer"]

    def _deliver_choices(self, ctx: NodeContext) -> list[str]:
        return [v["label"] for v in self._deliver_offer()]

    def _deliver_compose(self, ctx: NodeContext) -> list[Message]:
        offer = self._deliver_offer()
        lines = "\n".join(f"- {v['label']}" for v in offer)
        return self._messages("deliverer", (
            f"{self.q.query}\nDeliverer: every meta-task is done; the global constraint is the budget of "
            f"${self.q.budget}. Itineraries meeting it:\n{lines}\nAnswer with one option."))

    def _deliver_after(self, ctx: NodeContext, answer: str) -> Any:
        v = next(x for x in self._deliver_offer() if x["label"] == answer.strip())
        plan = assemble(self.route, self._cells(v["choice"]))
        ctx.db["mtp.delivered"] = {"label": v["label"], "cost": v["cost"], "within_budget": v["within_budget"]}
        ctx.db["mtp.plan"] = plan
        return plan

    # ------------------------------------------------------------------------- local credit
    def local_results(self) -> dict[str, float]:
        """Each executed meta-task's local-constraint result for the option its executor chose:
        the share of its local constraints met, by the evaluator's rules (transport: the query's
        transportation rule and the trip's family; stay: room type, house rule, minimum nights;
        meal: a restaurant no other meal of the trip repeats, and, when the query asks for
        cuisines, every wanted cuisine covered by the trip's meals -- a constraint of the meal
        chain, so it credits each of its meals; attraction: not repeated). What per-decision
        credit (``flow.credit: local+global``) gives each executor decision."""
        q, chosen = self.q, {tid: o["choice"] for tid, o in self.outcomes.items()}
        counts: dict[str, int] = {}
        for tid, text in chosen.items():
            if self.tasks[tid].kind in ("meal", "attraction") and text != "-":
                counts[text] = counts.get(text, 0) + 1
        wanted = set(q.local_constraint.get("cuisine") or ())
        meals = [text for tid, text in chosen.items() if self.tasks[tid].kind == "meal"]
        cuisines_ok = not wanted or wanted <= covered_cuisines(self.cat, meals)
        out: dict[str, float] = {}
        for tid, text in chosen.items():
            t = self.tasks[tid]
            o = NONE if text == "-" else self.cat.lookup(text)
            if t.kind == "transport":
                checks = [o is not None and not transport_problems(o, q, self.family)]
            elif t.kind == "stay":
                checks = [o is not None and not hotel_problems(o, q, len(t.days))]
            elif t.kind == "meal":
                checks = [text == "-" or counts.get(text, 0) == 1] + ([cuisines_ok] if wanted else [])
            else:
                checks = [counts.get(text, 0) == 1]
            out[tid] = sum(checks) / len(checks)
        return out

    # --------------------------------------------------------------------------------- run
    def run(self, trace_path: str | Path | None = None) -> FlowRun:
        flow = self.build()
        result = flow.run(trace_path=trace_path)
        plan = result["deliverer"].value if "deliverer" in result.results and result["deliverer"].ok else None
        error = None if plan is not None else "; ".join(f"{r.name}: {r.error}" for r in result.failures()) or None
        return FlowRun(plan, result, error, {"graph": flow.db.get("mtp.graph"), "delivered": flow.db.get("mtp.delivered"),
                                             "local": self.local_results()})


def run_mtp(env, query, backend, settings: MTPSettings | None = None, *, config: FlowConfig | None = None,
            system_prompts: bool = False, trace_path: str | Path | None = None) -> FlowRun:
    """Plan ``query`` with Meta-Task Planning on ``backend`` (see the module docstring)."""
    return MetaTaskPlanning(env, query, backend, settings, config=config, system_prompts=system_prompts).run(trace_path)
