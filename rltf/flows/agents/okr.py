"""OKR-Agent (Zheng et al. 2023) on the travel sandbox: objectives, key results, one agent each
with its own evaluation criterion, execution with review and revision, refinement rounds.

One query is one pass of a flow written as a program (:mod:`rltf.flows.engine.program`: every model
query is a node; the graph grows as the agents work):

*Hierarchical generation.* The leading agent writes the objectives -- ``route``, ``transport``,
``accommodation``, ``dining``, ``sightseeing``, ``budget`` -- as a choice of their order
(``lead.objectives``; the route first: every other objective needs it). With ``levels >= 2``
each objective is expanded into key results (``<objective>.key_results``: a choice among the
non-empty sets of its candidate key results, each one of the sandbox's named constraints the
query makes relevant: dining -> diverse restaurants and, when asked, the cuisines...); with
``levels == 3`` every key result is expanded once more into one key result per day. One agent
per objective / key result, with a job title and a one-sentence evaluation criterion
(``criteria: evaluator``: a template naming its constraint; ``criteria: model``: written by the
model, ``<agent>.criterion``). The tree goes to ``db["okr.agents"]``
(:mod:`~rltf.flows.agents.okr_tree`).

*Execution.* Agents in order (objective, then its key results, depth first), each:
expanding the solution -- a structure keyed by the objectives (``db["okr.solution"]``) -- by
choosing a value for every slot of its objective still empty (``r<round>.<slot>``: a choice
among the search tools' results, cheapest first; the route agent chooses the cities and the
schedule); reviewing it against its own criterion and every preceding agent's (the working
criteria, :mod:`~rltf.flows.agents.okr_review`; ``criteria: evaluator``: the evaluator's verdicts on the partial plan,
each failed constraint with its reason; ``criteria: model``: the model answers ``pass`` or which slot to
revise); and revising (``r<round>.revise<k>.<slot>``: a choice among the alternatives that fix
the violation without breaking a criterion that held, up to ``max_revisions`` slots). Refinement
repeats the execution ``rounds`` times on the solution so far and keeps the best-scored version
(the share of all criteria it meets; model mode: of the agents whose review passed).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from envs.travel.routes import city_orders, schedules
from envs.travel.verdicts import PAPER_NAMES
from rltf.config.flow import OKRSettings
from rltf.flows.agents import okr_prompts as P
from rltf.flows.agents.agent_setup import AgentSetup, delivered
from rltf.flows.agents.okr_review import fixes, review, score
from rltf.flows.agents.okr_solution import Slot, Solution
from rltf.flows.agents.okr_tree import (
    FIELDS,
    OBJECTIVES,
    Agent,
    agent_tree,
    candidate_key_results,
    key_result_choices,
    objective_orders,
)
from rltf.flows.agents.travel_nodes import FlowRun, option_lines, route_text, schedule_text
from rltf.flows.backends.base import Sampling
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.database import Database
from rltf.flows.engine.program import Ask, run_program

__all__ = ["OBJECTIVES", "Agent", "OKRAgent", "candidate_key_results", "run_okr"]


class OKRAgent:
    """The OKR-Agent flow of one query (see the module docstring): :meth:`program` reads as the
    paper's algorithm -- objectives, key results, agents and criteria, then execution rounds of
    expand, review and revise, the best round kept."""

    def __init__(self, env, query, backend, settings: OKRSettings | None = None, *,
                 config: FlowConfig | None = None, system_prompts: bool = False):
        self.setup = AgentSetup.create(env, query, backend, config, system_prompts)
        self.cat, self.q = self.setup.cat, self.setup.q
        self.settings = settings or OKRSettings()
        self.evaluator = env.evaluator
        self.db = Database()
        self.agents: list[Agent] = []
        self.solution = Solution(self.cat)
        self.versions: list[dict[str, Any]] = []

    def _ask(self, name: str, role: str, text: str, **kw: Any) -> Ask:
        """A node asking ``text`` (the query's head, then the agent's request); its trace prompt is
        the request's first line."""
        head = self.setup.head()
        body = text[len(head):].strip() if text.startswith(head) else text
        return Ask(name, body.splitlines()[0] if body else name,
                   messages=self.setup.messages(P.SYSTEM.format(role=role), text), **kw)

    def _sync(self) -> None:
        self.db["okr.solution"] = self.solution.record()

    # ---------------------------------------------------------------------------- program
    def program(self) -> Iterator[Ask]:
        st, sol = self.settings, self.solution
        objectives = yield from self._write_objectives()
        key_results = yield from self._expand_key_results(objectives)
        agents = agent_tree(objectives, key_results, st.levels, self.q.days)
        if st.criteria == "model":
            yield from self._write_criteria(agents)
        self.agents = agents
        self.db["okr.agents"] = [a.as_dict() for a in agents]
        for rnd in range(1, st.rounds + 1):  # execution rounds
            working: list[str] = []
            passed_reviews = 0
            for a in agents:
                working += [c for c in a.constraints if c not in working]
                yield from self._expand(a, rnd)
                if sol.route is None:
                    return None
                if st.criteria == "model":
                    passed_reviews += yield from self._model_review(a, rnd)
                else:
                    yield from self._review_and_revise(a, working, rnd)
            s = passed_reviews / len(agents) if st.criteria == "model" else score(self.evaluator, sol, agents,
                                                                                   sol.values)
            self.versions.append({"round": rnd, "score": s, "values": dict(sol.values), "cost": sol.cost()})
            self.db[f"okr.rounds.r{rnd}"] = {"score": s, "cost": sol.cost()}
            if s >= 1.0:
                break
        best = max(self.versions, key=lambda v: v["score"])  # the first of the best
        sol.values = dict(best["values"])
        self._sync()
        plan = sol.plan()
        self.db["okr.best_round"] = best["round"]
        self.db["okr.plan"] = plan
        return plan

    # ------------------------------------------------------------------- hierarchical generation
    def _write_objectives(self) -> Iterator[Ask]:
        """The leading agent orders the objectives (the route first)."""
        order = yield self._ask("lead.objectives", P.LEAD_ROLE, P.OBJECTIVES.format(head=self.setup.head()),
                                choices=objective_orders())
        objectives = [o.strip() for o in order.split(",")]
        self.db["okr.objectives"] = objectives
        return objectives

    def _expand_key_results(self, objectives: list[str]) -> Iterator[Ask]:
        """Each objective's key results: chosen among its candidate sets (``levels >= 2``), else all of them."""
        candidates = candidate_key_results(self.q)
        key_results: dict[str, list[str]] = {}
        for obj in objectives:
            if self.settings.levels < 2:
                key_results[obj] = list(candidates[obj])
                continue
            texts = key_result_choices(candidates[obj])
            pick = yield self._ask(f"{obj}.key_results", P.TITLES[obj], P.KEY_RESULTS.format(
                head=self.setup.head(), title=P.TITLES[obj], objective=obj,
                options="\n".join(P.OPTION.format(option=t) for t in texts)), choices=list(texts))
            key_results[obj] = texts[pick]
        return key_results

    def _write_criteria(self, agents: list[Agent]) -> Iterator[Ask]:
        """``criteria: model``: every agent's criterion in the model's words."""
        for a in agents:
            text = yield self._ask(f"{a.name}.criterion", a.title, P.MODEL_CRITERION.format(
                head=self.setup.head(), title=a.title, objective=a.objective, names=P.paper_names(a.constraints)),
                sampling=Sampling(max_new_tokens=self.settings.criterion_tokens))
            a.criterion = text.strip() or a.criterion

    # ---------------------------------------------------------------------------- execution
    def _expand(self, a: Agent, rnd: int) -> Iterator[Ask]:
        """``a`` expands the solution: the route agent chooses the cities and the schedule, an
        objective's agent a value for every slot of its objective still empty."""
        sol = self.solution
        if a.objective == "route":
            if sol.route is None and a.level == 1:
                yield from self._choose_route(a, rnd)
            return
        if a.level != 1 or a.objective not in FIELDS:
            return
        for sid, s in sol.slots.items():
            if s.objective != a.objective or sid in sol.values:
                continue
            opts = sol.options(s)[: self.settings.max_options]
            pick = yield self._ask(f"r{rnd}.{sid}", a.title, P.EXPAND.format(
                head=self.setup.head(), title=a.title, criterion=a.criterion, what=self._describe(s),
                options=option_lines(opts)), choices=[o.text for o in opts])
            sol.values[sid] = pick
            self._sync()

    def _choose_route(self, a: Agent, rnd: int) -> Iterator[Ask]:
        orders = {route_text(c): c for c in city_orders(self.cat)}
        if not orders:
            return
        pick = yield self._ask(f"r{rnd}.route.cities", a.title, P.ROUTE_CITIES.format(
            head=self.setup.head(), title=a.title, criterion=a.criterion,
            options="\n".join(P.OPTION.format(option=o) for o in orders)), choices=list(orders))
        routes = {schedule_text(r): r for r in schedules(self.cat, orders[pick])}
        pick = yield self._ask(f"r{rnd}.route.schedule", a.title, P.ROUTE_SCHEDULE.format(
            head=self.setup.head(), title=a.title, route=pick,
            options="\n".join(P.OPTION.format(option=o) for o in routes)), choices=list(routes))
        self.solution.set_route(routes[pick])
        self._sync()

    @staticmethod
    def _describe(s: Slot) -> str:
        return P.SLOTS[s.kind].format(a=s.leg[0], b=s.leg[1], day=s.day, city=s.city, meal=s.field,
                                      first=s.days[0] if s.days else "", last=s.days[-1] if s.days else "")

    # ------------------------------------------------------------------------- review and revise
    def _review_and_revise(self, a: Agent, working: list[str], rnd: int) -> Iterator[Ask]:
        """``criteria: evaluator``: ``a`` reviews the solution against the working criteria and
        revises up to ``max_revisions`` blamed slots, reviewing again after each."""
        sol, node = self.solution, a.name.replace("/", "-")
        rv = review(self.evaluator, sol, a, working)
        self.db[f"okr.reviews.r{rnd}.{node}"] = {"failed": {n: v.reason for n, v in rv.verdicts.items()
                                                            if v.passed is False},
                                                 "blamed": [s for s, _ in rv.blamed]}
        done = 0
        for sid, name in rv.blamed:
            if done >= self.settings.max_revisions:
                break
            opts = fixes(self.evaluator, sol, sid, name, rv, self.settings.max_options)
            if not opts:
                continue
            done += 1
            pick = yield self._ask(f"r{rnd}.{node}.revise{done}.{sid}", a.title, P.REVISE.format(
                head=self.setup.head(), title=a.title, constraint=PAPER_NAMES[name],
                reason=rv.verdicts[name].reason or PAPER_NAMES[name], slot=sid, value=sol.values.get(sid),
                options=option_lines(opts)), choices=[o.text for o in opts])
            sol.values[sid] = pick
            self._sync()
            rv = review(self.evaluator, sol, a, working)

    def _model_review(self, a: Agent, rnd: int) -> Iterator[Ask]:
        """``criteria: model``: the model judges ``a``'s part of the solution (``pass``, or the slot
        to revise, then its new value); True when it passed."""
        sol, node = self.solution, a.name.replace("/", "-")
        scope = [sid for sid, s in sol.slots.items() if (a.objective in FIELDS and s.objective == a.objective)
                 or a.objective == "budget"]
        if a.day is not None:
            scope = [sid for sid in scope if sol.slots[sid].day == a.day or a.day in sol.slots[sid].days]
        shown = "\n".join(P.SOLUTION_LINE.format(slot=sid, value=sol.values.get(sid, "-")) for sid in scope)
        options = [P.PASS] + [P.REVISE_CHOICE.format(slot=sid) for sid in scope][: self.settings.max_options]
        verdict = yield self._ask(f"r{rnd}.{node}.review", a.title, P.MODEL_REVIEW.format(
            head=self.setup.head(), title=a.title, criterion=a.criterion, total=int(sol.cost()),
            solution=shown or P.NOTHING_OF_ITS_OWN), choices=options)
        if verdict == P.PASS:
            return True
        sid = verdict.split(" ", 1)[1]
        opts = [o for o in sol.options(sol.slots[sid]) if o.text != sol.values.get(sid)][: self.settings.max_options]
        if opts:
            pick = yield self._ask(f"r{rnd}.{node}.revise.{sid}", a.title, P.MODEL_REVISE.format(
                head=self.setup.head(), title=a.title, criterion=a.criterion, slot=sid, value=sol.values.get(sid),
                options=option_lines(opts)), choices=[o.text for o in opts])
            sol.values[sid] = pick
            self._sync()
        return False

    # --------------------------------------------------------------------------------- run
    def run(self, trace_path: str | Path | None = None) -> FlowRun:
        self.db["task"] = self.q.query
        pr = run_program(self.setup.backend, self.program(), db=self.db, config=self.setup.config,
                         name=f"okr-q{self.q.id}", trace_path=trace_path)
        plan, error = delivered(pr)
        return FlowRun(plan, pr.result, error, {"versions": [{k: v for k, v in x.items() if k != "values"}
                                                             for x in self.versions],
                                                "agents": len(self.agents)})


def run_okr(env, query, backend, settings: OKRSettings | None = None, *, config: FlowConfig | None = None,
            system_prompts: bool = False, trace_path: str | Path | None = None) -> FlowRun:
    """Plan ``query`` with OKR-Agent on ``backend`` (see the module docstring)."""
    return OKRAgent(env, query, backend, settings, config=config, system_prompts=system_prompts).run(trace_path)
