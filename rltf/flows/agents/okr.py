"""OKR-Agent (Zheng et al. 2023) as a pattern: objectives, key results, one agent each with its own
evaluation criterion, execution with review and revision, refinement rounds.

One query is one pass of a flow written as a program (:mod:`rltf.flows.engine.program`: every model
query is a node; the graph grows as the agents work):

*Hierarchical generation.* The leading agent writes the objectives as a choice of their order
(``lead.objectives``, among the domain's :meth:`~OKRAgent.objective_orders`). With ``levels >= 2``
each objective is expanded into key results (``<objective>.key_results``: a choice among the
domain's sets of its candidate key results, :meth:`~OKRAgent.key_result_choices`); the domain's
:meth:`~OKRAgent.agent_tree` makes one :class:`Agent` per objective / key result (/ day with
``levels == 3``), with a job title and a one-sentence evaluation criterion (``criteria:
evaluator``: the domain's template; ``criteria: model``: written by the model,
``<agent>.criterion``). The tree goes to ``db["okr.agents"]``.

*Execution.* Agents in order, each: expanding the solution (the domain's :meth:`~OKRAgent.expand`:
a choice for every part of its objective still empty); reviewing it against its own criterion and
every preceding agent's (the working criteria) and revising (``criteria: evaluator``: the domain's
:meth:`~OKRAgent.review_and_revise`; ``criteria: model``: :meth:`~OKRAgent.model_review`, the
model answers ``pass`` or what to revise). Refinement repeats the execution ``rounds`` times on the
solution so far and keeps the best-scored version (``criteria: evaluator``: the domain's
:meth:`~OKRAgent.score`; model mode: the share of agents whose review passed).

The domain's solution (:attr:`OKRAgent.solution`) has ``values`` (what each part holds), ``cost()``,
``plan()`` and ``record()`` (what ``db["okr.solution"]`` keeps). The travel sandbox's OKR-Agent (its
flow plug-in) subclasses it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rltf.config.flow import OKRSettings
from rltf.flows.agents.agent_setup import AgentSetup, delivered
from rltf.flows.agents.domain import FlowRun
from rltf.flows.backends.base import Sampling
from rltf.flows.engine.database import Database
from rltf.flows.engine.program import Ask, run_program

__all__ = ["Agent", "OKRAgent"]


@dataclass
class Agent:
    """One agent of the OKR tree: an objective (level 1), a key result (2) or a key result on one day (3)."""

    name: str
    objective: str
    level: int
    constraints: list[str]
    title: str
    criterion: str
    parent: str | None = None
    day: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "level": self.level, "title": self.title, "criterion": self.criterion,
                "constraints": self.constraints, "parent": self.parent, "day": self.day}


class OKRAgent:
    """The OKR-Agent pattern for one query (see the module docstring): :meth:`program` reads as the
    paper's algorithm -- objectives, key results, agents and criteria, then execution rounds of
    expand, review and revise, the best round kept.

    A domain subclasses it (its solution, tree, expansion and reviews); ``prompts`` (the domain's
    texts) holds ``SYSTEM`` (``{role}``), ``LEAD_ROLE``, ``OBJECTIVES``, ``TITLES`` (per objective),
    ``KEY_RESULTS``, ``OPTION``, ``MODEL_CRITERION`` and ``paper_names(constraints)``."""

    prompts: Any = None

    def __init__(self, setup: AgentSetup, solution: Any, settings: OKRSettings | None = None):
        self.setup = setup
        self.settings = settings or OKRSettings()
        self.db = Database()
        self.agents: list[Agent] = []
        self.solution = solution
        self.versions: list[dict[str, Any]] = []

    # --------------------------------------------------------------- the domain's part
    def objective_orders(self) -> list[str]:
        """The leading agent's options: orders of the objectives (``"a, b, c"``)."""
        raise NotImplementedError

    def key_result_candidates(self) -> dict[str, list[str]]:
        """Per objective, the constraints that can be its key results for this query."""
        raise NotImplementedError

    def key_result_choices(self, candidates: Sequence[str]) -> dict[str, list[str]]:
        """An objective's options: sets of its candidate key results, by their text."""
        raise NotImplementedError

    def agent_tree(self, objectives: Sequence[str], key_results: dict[str, list[str]]) -> list[Agent]:
        """The agents in execution order (``settings.levels`` deep)."""
        raise NotImplementedError

    def expand(self, a: Agent, rnd: int) -> Iterator[Ask]:
        """``a`` expands the solution in round ``rnd``."""
        raise NotImplementedError

    def stalled(self) -> bool:
        """The solution cannot go on (no plan to deliver) after an expansion."""
        return False

    def review_and_revise(self, a: Agent, working: list[str], rnd: int) -> Iterator[Ask]:
        """``criteria: evaluator``: ``a`` reviews the solution against the ``working`` criteria and revises it."""
        raise NotImplementedError

    def model_review(self, a: Agent, rnd: int) -> Iterator[Ask]:
        """``criteria: model``: the model judges ``a``'s part of the solution (and revises); True when it passed."""
        raise NotImplementedError

    def score(self, agents: Sequence[Agent], values: dict[str, str]) -> float:
        """``criteria: evaluator``: the share of every agent's criteria the solution of ``values`` meets."""
        raise NotImplementedError

    # ---------------------------------------------------------------------------- program
    def _ask(self, name: str, role: str, text: str, **kw: Any) -> Ask:
        """A node asking ``text`` (the query's head, then the agent's request); its trace prompt is
        the request's first line."""
        head = self.setup.head()
        body = text[len(head):].strip() if text.startswith(head) else text
        return Ask(name, body.splitlines()[0] if body else name,
                   messages=self.setup.messages(self.prompts.SYSTEM.format(role=role), text), **kw)

    def _sync(self) -> None:
        self.db["okr.solution"] = self.solution.record()

    def program(self) -> Iterator[Ask]:
        st, sol = self.settings, self.solution
        objectives = yield from self._write_objectives()
        key_results = yield from self._expand_key_results(objectives)
        agents = self.agent_tree(objectives, key_results)
        if st.criteria == "model":
            yield from self._write_criteria(agents)
        self.agents = agents
        self.db["okr.agents"] = [a.as_dict() for a in agents]
        for rnd in range(1, st.rounds + 1):  # execution rounds
            working: list[str] = []
            passed_reviews = 0
            for a in agents:
                working += [c for c in a.constraints if c not in working]
                yield from self.expand(a, rnd)
                if self.stalled():
                    return None
                if st.criteria == "model":
                    passed_reviews += yield from self.model_review(a, rnd)
                else:
                    yield from self.review_and_revise(a, working, rnd)
            s = passed_reviews / len(agents) if st.criteria == "model" else self.score(agents, sol.values)
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
        """The leading agent orders the objectives."""
        P = self.prompts
        order = yield self._ask("lead.objectives", P.LEAD_ROLE, P.OBJECTIVES.format(head=self.setup.head()),
                                choices=self.objective_orders())
        objectives = [o.strip() for o in order.split(",")]
        self.db["okr.objectives"] = objectives
        return objectives

    def _expand_key_results(self, objectives: list[str]) -> Iterator[Ask]:
        """Each objective's key results: chosen among its candidate sets (``levels >= 2``), else all of them."""
        P = self.prompts
        candidates = self.key_result_candidates()
        key_results: dict[str, list[str]] = {}
        for obj in objectives:
            if self.settings.levels < 2:
                key_results[obj] = list(candidates[obj])
                continue
            texts = self.key_result_choices(candidates[obj])
            pick = yield self._ask(f"{obj}.key_results", P.TITLES[obj], P.KEY_RESULTS.format(
                head=self.setup.head(), title=P.TITLES[obj], objective=obj,
                options="\n".join(P.OPTION.format(option=t) for t in texts)), choices=list(texts))
            key_results[obj] = texts[pick]
        return key_results

    def _write_criteria(self, agents: list[Agent]) -> Iterator[Ask]:
        """``criteria: model``: every agent's criterion in the model's words."""
        P = self.prompts
        for a in agents:
            text = yield self._ask(f"{a.name}.criterion", a.title, P.MODEL_CRITERION.format(
                head=self.setup.head(), title=a.title, objective=a.objective, names=P.paper_names(a.constraints)),
                sampling=Sampling(max_new_tokens=self.settings.criterion_tokens))
            a.criterion = text.strip() or a.criterion

    # --------------------------------------------------------------------------------- run
    def run(self, trace_path: str | Path | None = None) -> FlowRun:
        self.db["task"] = self.setup.task
        pr = run_program(self.setup.backend, self.program(), db=self.db, config=self.setup.config,
                         name=f"okr-q{self.setup.query_id}", trace_path=trace_path)
        plan, error = delivered(pr)
        return FlowRun(plan, pr.result, error, {"versions": [{k: v for k, v in x.items() if k != "values"}
                                                             for x in self.versions],
                                                "agents": len(self.agents)})
