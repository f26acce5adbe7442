"""OKR-Agent (Zheng et al. 2023) on the travel sandbox: the travel side of the OKR-Agent pattern
(:class:`rltf.flows.agents.okr.OKRAgent`, whose docstring says the flow's shape).

*Hierarchical generation.* The objectives are ``route``, ``transport``, ``accommodation``,
``dining``, ``sightseeing``, ``budget``; the leading agent orders them with the route first (every
other objective needs it). An objective's candidate key results are the sandbox's named
constraints the query makes relevant (dining -> diverse restaurants and, when asked, the
cuisines...); with ``levels == 3`` every key result is expanded once more into one key result per
day. ``criteria: evaluator``: a template naming its constraint. The tree:
:mod:`~envs.travel.flows.okr_tree`.

*Execution.* The solution is a structure keyed by the objectives (``db["okr.solution"]``,
:mod:`~envs.travel.flows.okr_solution`); an agent expands it by choosing a value for every slot of its
objective still empty (``r<round>.<slot>``: a choice among the search tools' results, cheapest first;
the route agent chooses the cities and the schedule), reviews it (``criteria: evaluator``: the
evaluator's verdicts on the partial plan, each failed constraint with its reason,
:mod:`~envs.travel.flows.okr_review`; ``criteria: model``: the model answers ``pass`` or which slot to
revise) and revises (``r<round>.revise<k>.<slot>``: a choice among the alternatives that fix the
violation without breaking a criterion that held, up to ``max_revisions`` slots). A version's score:
the share of all criteria it meets.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from envs.travel.flows import okr_prompts
from envs.travel.flows.okr_review import fixes, review, score
from envs.travel.flows.okr_solution import Slot, Solution
from envs.travel.flows.okr_tree import (
    FIELDS,
    OBJECTIVES,
    agent_tree,
    candidate_key_results,
    key_result_choices,
    objective_orders,
)
from envs.travel.flows.setup import travel_setup
from envs.travel.flows.texts import option_lines, route_text, schedule_text
from envs.travel.routes import city_orders, schedules
from envs.travel.verdicts import PAPER_NAMES
from rltf.config.flow import OKRSettings
from rltf.flows.agents.domain import FlowRun
from rltf.flows.agents.okr import Agent, OKRAgent
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.program import Ask

__all__ = ["OBJECTIVES", "TravelOKR", "candidate_key_results", "run_okr"]

P = okr_prompts


class TravelOKR(OKRAgent):
    """The OKR-Agent flow of one travel query (see the module docstring)."""

    prompts = okr_prompts

    def __init__(self, env, query, backend, settings: OKRSettings | None = None, *,
                 config: FlowConfig | None = None, system_prompts: bool = False):
        setup, self.cat = travel_setup(env, query, backend, config, system_prompts)
        super().__init__(setup, Solution(self.cat), settings)
        self.q = self.cat.q
        self.evaluator = env.evaluator

    # ------------------------------------------------------------------- hierarchical generation
    def objective_orders(self) -> list[str]:
        return objective_orders()

    def key_result_candidates(self) -> dict[str, list[str]]:
        return candidate_key_results(self.q)

    def key_result_choices(self, candidates: Sequence[str]) -> dict[str, list[str]]:
        return key_result_choices(candidates)

    def agent_tree(self, objectives: Sequence[str], key_results: dict[str, list[str]]) -> list[Agent]:
        return agent_tree(objectives, key_results, self.settings.levels, self.q.days)

    # ---------------------------------------------------------------------------- execution
    def expand(self, a: Agent, rnd: int) -> Iterator[Ask]:
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

    def stalled(self) -> bool:
        """No route: nothing to plan."""
        return self.solution.route is None

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
    def review_and_revise(self, a: Agent, working: list[str], rnd: int) -> Iterator[Ask]:
        """``a`` reviews the solution against the working criteria (the evaluator's verdicts) and
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

    def model_review(self, a: Agent, rnd: int) -> Iterator[Ask]:
        """The model judges ``a``'s part of the solution (``pass``, or the slot to revise, then its
        new value); True when it passed."""
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

    def score(self, agents: Sequence[Agent], values: dict[str, str]) -> float:
        return score(self.evaluator, self.solution, agents, values)


def run_okr(env, query, backend, settings: OKRSettings | None = None, *, config: FlowConfig | None = None,
            system_prompts: bool = False, trace_path: str | Path | None = None) -> FlowRun:
    """Plan ``query`` with OKR-Agent on ``backend`` (see the module docstring)."""
    return TravelOKR(env, query, backend, settings, config=config, system_prompts=system_prompts).run(trace_path)
