"""``TravelPlanner-Sandbox-v0``: one episode is one travel query; the action is a plan text.

``reset()`` picks a query of the configured split (or ``options={"query": id}``) and returns its
natural-language text; ``info`` holds the structured query. ``step(plan_text)`` judges the plan with
the official rules (:mod:`envs.travel.evaluator`) and ends the episode. Text that is not a plan
scores 0 with the reason in ``info["error"]``; nothing a planner emits can crash the env.

Reward (:func:`envs.travel.reward.plan_reward`, weights configurable), in [0, 1]::

    reward = (w_pass * final_pass + w_commonsense * commonsense_passed / len(COMMONSENSE)
              + w_hard * hard_passed / hard_set) / (w_pass + w_commonsense + w_hard)

where ``COMMONSENSE`` lists the 8 commonsense constraints, ``hard_set`` counts the budget plus the
local constraints the query sets, and hard constraints that are not judged (plan incomplete or
outside the sandbox) count as failed. Defaults 0.5 / 0.25 / 0.25: a plan that passes everything
scores 1, an undelivered one 0.

For RL, :meth:`TravelPlannerEnv.score` scores many (query, plan) pairs in one call. Planners that
look things up use :attr:`TravelPlannerEnv.tools` (flights, restaurants, accommodations,
attractions, distances, cities); :meth:`TravelPlannerEnv.candidates` lists, per query, every entity
string a plan may use, and :meth:`TravelPlannerEnv.grammar` is the query's plan grammar for
constrained decoding built on them (``max_attractions`` per stay day); :meth:`reference_plan` is
the exact solver's plan (for supervised warm start).

``database_dir=`` loads the real TravelPlanner database from the public repository's CSVs (or,
``database_dir="reference_information"``, sole-planning: the union of the queries' own reference
rows, :mod:`envs.travel.reference_info`) and ``queries_source=`` (default ``osunlp/TravelPlanner``)
the queries of ``split``: ``train`` / ``validation`` / ``test`` are the hub's splits,
``<hub split>:re-split:<part>`` a part of its seeded re-split, ``all`` every query of ``queries_split``.

``track=`` (:mod:`envs.travel.tracks`): ``benchmark`` -- a planner reads each query as a
:class:`~envs.travel.query.QueryView` (text, level, days, its own ``reference_notes``): ``reset``'s
``info`` and :meth:`get_task` hold nothing else, and :meth:`candidates` / :meth:`grammar` are built
from that query's own notes (:mod:`envs.travel.query_view`), never from the merged database nor a
plan; ``scaffolded`` / ``sandbox`` -- the structured query in ``info``, candidates from the whole
database. In every track an option cap (``max_options`` / ``max_cities``) reads the solver's plan of
a query only when ``cap_keep="train_plans"`` and the query is one of ``plan_ids`` (the train
queries; default: every query of a ``train`` env, none of any other); any other query's cap is a
seeded sample of its options.
"""

from __future__ import annotations

import string
import weakref
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.base import RLTFEnvBase
from envs.episodes import ansi_text, episode_task
from envs.travel.candidates import query_candidates
from envs.travel.config import RewardSettings
from envs.travel.evaluator import PlanEvaluation, TravelEvaluator, summarize
from envs.travel.grammar_caps import grammar_caps
from envs.travel.hub import HUB_ID, parse_split_name
from envs.travel.index import SandboxIndex
from envs.travel.official_metrics import counted_constraints
from envs.travel.plans import MAX_PLAN_CHARS, format_plan
from envs.travel.queries import default_queries
from envs.travel.query import QueryView, TravelQuery
from envs.travel.query_view import option_texts, rare_letters, view_candidates, view_index
from envs.travel.reference_info import SOLE_PLANNING, reference_database, union_database
from envs.travel.reward import plan_reward
from envs.travel.sandbox import load_database
from envs.travel.schema import PLAN_FIELDS
from envs.travel.solver import TravelSolver
from envs.travel.split import SPLITS, hub_split, load_split
from envs.travel.tasks import TravelTask
from envs.travel.text import entity
from envs.travel.tools import TravelTools
from envs.travel.tracks import BENCHMARK, CAP_KEEPS, SANDBOX, TRAIN_PLANS, TrackError, check_track

CHARSET = frozenset(string.printable)
# summarize()'s keys -> the results table's columns, in the benchmark's order
TABLE_COLUMNS = {"delivery_rate": "delivery", "commonsense_micro": "commonsense micro",
                 "commonsense_macro": "commonsense macro", "hard_micro": "hard micro",
                 "hard_macro": "hard macro", "final_pass": "final pass"}


@dataclass
class TravelResult:
    query_id: int
    plan_text: str
    reward: float
    evaluation: PlanEvaluation = field(repr=False)

    @property
    def valid(self) -> bool:
        return self.evaluation.delivered

    @property
    def error(self) -> str | None:
        return self.evaluation.error

    @property
    def sample_errors(self) -> tuple[()]:
        return ()  # nothing is executed (OpenAGI's results list the experts that failed per sample)

    def info(self) -> dict[str, Any]:
        ev = self.evaluation
        return {
            "query_id": self.query_id, "plan": self.plan_text, "valid": ev.delivered, "error": ev.error,
            "error_reason": ev.error_reason, "final_pass": ev.final_pass,
            "commonsense_pass": ev.commonsense_pass, "hard_pass": ev.hard_pass, "total_cost": ev.total_cost,
            "verdicts": ev.verdicts(), "violations": ev.violations(),
            "constraints": ev.as_dict()["commonsense"] | (ev.as_dict()["hard"] or {}),
        }


class TravelPlannerEnv(RLTFEnvBase):
    """The travel sandbox's queries as an env (:class:`envs.protocol.RLTFEnv`); from
    :class:`envs.base.RLTFEnvBase`: no execution cache (the evaluator reads the sandbox's tables), free
    text read as it is (the evaluator parses a plan text; unparsable text scores 0), no reward workers."""

    headline = "final pass"  # the results table column a run's last line reports
    oracle_name = "solver"  # what this env's oracle is (the exact solver's plans)

    def __init__(
        self,
        split: str = "train",
        seed: int = 0,
        reward_weights: RewardSettings | dict | None = None,
        official_quirks: bool = False,
        database_dir: str | Path | None = None,
        queries_source: str | Path | None = None,
        queries_split: str = "validation",
        queries: Sequence[TravelQuery] | None = None,
        render_mode: str | None = None,
        max_attractions: int = 2,
        max_options: int = 0,
        max_cities: int = 0,
        index: SandboxIndex | None = None,
        query_ids: Sequence[int] | None = None,
        track: str = SANDBOX,
        reference_notes: Mapping[int, Any] | None = None,
        plan_ids: Collection[int] | None = None,
        cap_keep: str = TRAIN_PLANS,
    ):
        self.track = check_track(track, "track")
        if cap_keep not in CAP_KEEPS:
            raise TrackError(f"bad value for 'cap_keep': {cap_keep!r}; expected one of {list(CAP_KEEPS)}")
        if self.track == BENCHMARK and cap_keep == TRAIN_PLANS and (max_options or max_cities):
            raise TrackError("option caps with 'cap_keep: train_plans' read the solver's plans; the benchmark track "
                             "reads no plan: expected cap_keep='sample'")
        notes = dict(reference_notes or {})
        if database_dir is not None:  # hub queries: split names as envs/travel/hub.py defines them
            if split != "all":
                parse_split_name(split)
            if queries is not None:
                all_q, rows = list(queries), []
                self.query_ids = [q.id for q in all_q]
            else:
                all_q, rows, self.query_ids = hub_split(queries_source or HUB_ID,
                                                        queries_split if split == "all" else split, seed)
                notes = {q.id: r.get("reference_information") for q, r in zip(all_q, rows)} | notes
            if index is None and str(database_dir) == SOLE_PLANNING:
                index = SandboxIndex(union_database((q, r.get("reference_information")) for q, r in zip(all_q, rows)))
            self.index = index or SandboxIndex(load_database(database_dir, flights="auto", flights_seed=seed))
        else:
            if split not in (*SPLITS, "all") and (queries is None or query_ids is None):
                raise ValueError(f"unknown split {split!r}; expected one of {', '.join((*SPLITS, 'all'))} (the "
                                 "synthetic sandbox's persisted split; <hub split>:re-split:<part> names need hub "
                                 "queries: database_dir=)")
            if index is not None and queries is not None:
                self.index, default = index, list(queries)
            else:
                self.index, default = default_queries(seed)
            all_q = list(queries) if queries is not None else default
            if queries is not None or split == "all":
                self.query_ids = [q.id for q in all_q]
            else:
                self.query_ids = load_split(seed)[split]
        self.queries_by_id = {q.id: q for q in all_q}
        if query_ids is not None:  # an explicit selection (the factory's split / day / level filter)
            unknown = [i for i in query_ids if i not in self.queries_by_id]
            if unknown:
                raise ValueError(f"query ids {unknown[:5]} are not among the env's {len(all_q)} queries")
            self.query_ids = list(query_ids)
        self.split = split
        self.reference_notes = notes
        self.cap_keep = cap_keep
        self.plan_ids = frozenset(self.query_ids if plan_ids is None and split == "train" else plan_ids or ())
        self._views: dict[int, tuple[QueryView, SandboxIndex | None]] = {}
        if isinstance(reward_weights, dict):
            reward_weights = RewardSettings(**reward_weights)
        self.weights = reward_weights or RewardSettings()
        self.weights.validate("reward_weights")
        self.evaluator = TravelEvaluator(self.index, official_quirks=official_quirks)
        self.render_mode = render_mode
        self.observation_space = spaces.Text(max_length=4096, charset=CHARSET)
        self.action_space = spaces.Text(max_length=32768, charset=CHARSET)
        self.query: TravelQuery | None = None
        self._last: TravelResult | None = None
        self._tools = None
        self._solver = None
        self.max_attractions = int(max_attractions)
        self.max_options, self.max_cities, self.seed = int(max_options), int(max_cities), int(seed)
        self._grammars: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._tasks: dict[int, TravelTask] = {}

    # -------------------------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        gym.Env.reset(self, seed=seed)  # the seeding only: this env draws its own query and info
        self.query = episode_task(self.np_random, options, "query", self.get_query, self.queries_by_id,
                                  self.query_ids)
        self._last = None
        return self.query.query, self.query_info(self.query)

    def step(self, action: Any):
        if self.query is None:
            raise RuntimeError("call reset() before step()")
        result = self.reward_plans([(self.query, action)])[0]
        self._last = result
        return self.query.query, result.reward, True, False, {**self.query_info(self.query), **result.info()}

    def render(self) -> str | None:
        q = self.query
        return ansi_text(self.render_mode, q and (lambda: f"query {q.id}: {q.query}"), self._last,
                         lambda r: f"\nreward: {r.reward:.4f}"
                                   + "".join(f"\n  {k}: {why}" for k, why in r.evaluation.violations().items()))

    # -------------------------------------------------------------------------------- batched
    def get_query(self, query: int | str | TravelQuery) -> TravelQuery:
        if isinstance(query, TravelQuery):
            return query
        if isinstance(query, TravelTask):
            return query.query if isinstance(query.query, TravelQuery) else self.queries_by_id[query.id]
        if isinstance(query, QueryView):
            return self.queries_by_id[query.id]
        if isinstance(query, (int, np.integer)) and not isinstance(query, bool) and int(query) in self.queries_by_id:
            return self.queries_by_id[int(query)]
        if isinstance(query, str):
            for q in self.queries_by_id.values():
                if q.query == query:
                    return q
        raise ValueError(f"unknown query {query!r}; "
                         f"expected an id in {min(self.queries_by_id)}..{max(self.queries_by_id)}, "
                         "a query text or a TravelQuery")

    def queries(self) -> list[TravelQuery]:
        return [self.queries_by_id[i] for i in self.query_ids]

    def reward_plans(self, pairs: Sequence[tuple[int | str | TravelQuery | TravelTask, Any]],
                     rng: np.random.Generator | None = None) -> list[TravelResult]:
        """Score (query, plan) pairs; plans are text (or lists of day records). Never raises on a plan.
        (``rng`` is accepted for the trainer's env interface: the evaluator draws nothing.)"""
        out = []
        for qref, plan in pairs:
            q = self.get_query(qref)
            try:
                ev = self.evaluator.evaluate(q, plan)
            except Exception as exc:  # defensive: a plan must never crash the env
                ev = PlanEvaluation(q.id, False, f"{type(exc).__name__}: {exc}", "internal",
                                    hard_applicable=q.hard_constraint_count)
            if isinstance(plan, str):
                text = plan
            elif ev.error_reason == "too_long":  # not written out: its size is the problem
                text = f"<plan given as day records, over {MAX_PLAN_CHARS:,} characters: {ev.error}>"
            else:
                text = _safe_format(plan)
            counted = counted_constraints(q) if self.weights.constraints else None  # read by that term alone
            out.append(TravelResult(q.id, text, plan_reward(self.weights, ev, counted), ev))
        return out

    # ------------------------------------------------------------- the trainer's env interface
    def get_task(self, query: int | str | TravelQuery | TravelTask) -> TravelTask:
        """The query as a planning task (its text, and the solver's plan as the reference); in the
        benchmark track the task's query is the :meth:`view` (no structured field; its prompt the
        official sole-planning prompt) and only a train query (``plan_ids``) holds a plan: no plan of
        a validation or test query is made or read (:meth:`oracle` solves one when asked, a bound)."""
        q = self.get_query(query)
        if q.id not in self._tasks:
            if self.track == BENCHMARK:
                plan = self.reference_plan(q) if q.id in self.plan_ids else None
                self._tasks[q.id] = TravelTask(self.view(q), plan)
            else:
                self._tasks[q.id] = TravelTask(q, self.reference_plan(q))
        return self._tasks[q.id]

    def view(self, query: int | str | TravelQuery | TravelTask | QueryView) -> QueryView:
        """What a benchmark-track planner reads of the query: its text, level, days and own reference notes."""
        if isinstance(query, QueryView):
            return query
        q = self.get_query(query)
        if q.id not in self._views:
            self._views[q.id] = (QueryView.of(q, self.reference_notes.get(q.id)), None)
        return self._views[q.id][0]

    def query_info(self, q: TravelQuery) -> dict[str, Any]:
        """The gym reset's ``info``: the structured query; in the benchmark track only :meth:`QueryView.info`."""
        if self.track == BENCHMARK:
            return self.view(q).info()
        return {"query_id": q.id, "query": q.as_dict(), "level": q.level, "days": q.days}

    def tasks(self) -> list[TravelTask]:
        """This env's queries (its split) as planning tasks."""
        return [self.get_task(i) for i in self.query_ids]

    def tokenizer_texts(self, query_ids: Sequence[int] | None = None) -> list[str]:
        """Texts an embedded planner's tokenizer is trained on: the texts of ``query_ids`` (the
        train queries: no held-out query reaches the tokenizer) and the action space -- every
        entity and transport string of the sandbox a plan may name, the routes' city names and
        the slot prefixes. In the benchmark track: those queries' own options (their reference
        information's rows), no other query's notes and no plan, plus the letters other than printable
        ASCII of every loaded name, one a text (a held-out name's rare letter is then a token)."""
        from envs.travel.grammar import SLOT_FIELDS, slot_text  # deferred: the grammar imports torch

        ids = self.query_ids if query_ids is None else query_ids
        texts = [self.get_query(i).query for i in ids]
        if self.track == BENCHMARK:  # the queries' own options only: no other query's notes, no plan
            texts += [t for i in ids for t in option_texts(self.candidates(i))]
            texts += [slot_text(1, "from A to B", f, "-") for f in SLOT_FIELDS]
            return list(dict.fromkeys(texts)) + rare_letters(self.index)
        ix = self.index
        for city in sorted(ix.city_state):
            texts.append(city)
            texts += [entity(r.name, city) for r in ix.restaurants.in_city(city)]
            texts += [entity(a.name, city) for a in ix.attractions.in_city(city)]
            texts += [entity(h.name, city) for h in ix.hotels.in_city(city)]
        for q in (self.get_query(i) for i in ids):
            c = self.candidates(q)
            texts += [t for per_day in c.transport.values() for opts in per_day.values() for t in opts]
        texts += [slot_text(1, "from A to B", f, "-") for f in SLOT_FIELDS]
        return list(dict.fromkeys(texts))

    def table_columns(self, tasks: Sequence[TravelTask], plans: dict[int, str]) -> dict[str, float]:
        """The benchmark's metrics of one planner's plans for ``tasks`` (what a results table shows)."""
        m = self.metrics([(t, plans[t.id]) for t in tasks])
        return {TABLE_COLUMNS[k]: float(m[k]) for k in TABLE_COLUMNS}

    def oracle(self, task: int | TravelTask) -> tuple[str, float]:
        """The solver's plan and its reward (the upper bound a planner is measured against)."""
        t = self.get_task(task)
        plan = t.reference_plan
        if plan is None and self.track == BENCHMARK and t.id not in self.plan_ids:
            plan = self.reference_plan(t.id)  # asked for the bound: the solver over the query's own notes
        if plan is None:
            return "", 0.0
        return plan, self.reward_plans([(t, plan)])[0].reward

    def plan_instructions(self) -> str:
        """The plan's format (:mod:`envs.travel.plans`): a JSON list of day records and their fields."""
        fields = ", ".join(f'"{f}"' for f in PLAN_FIELDS)
        return ("Plan the trip with the flights, restaurants, attractions and accommodations of the sandbox. "
                'Answer with the plan only: a JSON list with one record per day, each with "days" (the day '
                f"number) and {fields}; "
                '"-" for a field with nothing to do, e.g. {"days": 1, "current_city": "from A to B", '
                '"transportation": "Flight Number: F0123, from A to B", "breakfast": "-", '
                '"attraction": "X, B;", "lunch": "-", "dinner": "Y, B", "accommodation": "Z, B"}.')

    def oracle_plans(self, tasks: Sequence[int | TravelTask]) -> list[tuple[str, float]]:
        """:meth:`oracle` of every task: the solver's plans and their rewards."""
        return [self.oracle(t) for t in tasks]

    def expert_failures(self, results: Sequence[TravelResult]) -> tuple[float, list[str]]:
        """``(0.0, [])``: nothing is executed (the evaluator reads the sandbox's tables), so no part of
        the env can fail the way an expert does; a rule a plan breaks is the plan's fault, in its
        reward. Computed from ``sample_errors`` all the same (empty on every travel result)."""
        executed = [e for r in results if r.valid for e in r.sample_errors]
        failed = sum(e is not None for e in executed)
        return (failed / len(executed) if executed else 0.0), []

    def format_plan(self, plan: Any) -> str:
        """A plan as the text a planner writes (text is returned as it is)."""
        return plan if isinstance(plan, str) else _safe_format(plan)

    def metrics(self, pairs: Sequence[tuple[int | str | TravelQuery, Any]]) -> dict[str, float]:
        """The official metrics (delivery, commonsense / hard micro and macro, final pass)."""
        results = self.reward_plans(pairs)
        return summarize([self.get_query(q) for q, _ in pairs], [r.evaluation for r in results])

    # ------------------------------------------------------------------------ planner helpers
    @property
    def tools(self):
        if self._tools is None:
            self._tools = TravelTools(self.index)
        return self._tools

    def candidates(self, query: int | str | TravelQuery):
        """Every option a plan for the query may name: from the sandbox's database, or in the
        benchmark track from the query's own reference notes only (:mod:`envs.travel.query_view`)."""
        if self.track != BENCHMARK:
            return query_candidates(self.index, self.get_query(query))
        view = self.view(query)
        own = self._views[view.id][1]
        if own is None:
            own = view_index(view)
            self._views[view.id] = (view, own)
        return view_candidates(view, own)

    def cap_plan(self, query: int | str | TravelQuery) -> str:
        """The plan text an option cap keeps inside the query's options: the solver's plan of a
        train query (``plan_ids``) under ``cap_keep="train_plans"`` outside the benchmark track (the
        plan the warm start teaches stays in its grammar); ``""`` for every other query -- a
        held-out query's cap never reads a plan."""
        q = self.get_query(query)
        if self.track == BENCHMARK or self.cap_keep != TRAIN_PLANS or q.id not in self.plan_ids:
            return ""
        return self.get_task(q).reference_plan or ""

    def grammar_candidates(self, query: int | str | TravelQuery):
        """:meth:`candidates` under the env's option caps (``max_options``, ``max_cities``), keeping what
        :meth:`cap_plan` names (:func:`envs.travel.grammar_caps.grammar_caps`)."""
        return grammar_caps(self.candidates(query), self.max_options, self.max_cities, self.cap_plan(query),
                            self.seed)

    def grammar(self, tokenizer, query: int | str | TravelQuery):
        """The query's plan grammar for constrained decoding (:mod:`envs.travel.grammar`), built once
        per (tokenizer, query) and cached: the decoder caches its tables by grammar identity."""
        from envs.travel.grammar_memo import shared_grammar  # deferred: the grammar imports torch

        q = self.get_query(query)
        per_tok = self._grammars.setdefault(tokenizer, {})
        key = (q.id, self.max_attractions, self.max_options, self.max_cities)
        if key not in per_tok:
            per_tok[key] = shared_grammar(tokenizer, self.grammar_candidates(q), self.max_attractions)
        return per_tok[key]

    def flow_domain(self):
        """The travel agent flows (:data:`envs.travel.flows.domain.TRAVEL_FLOWS`: MTP, OKR-Agent, ReAct, flat)."""
        # the flow plug-in loads rltf's flow engine (torch, transformers): only when a flow runs
        from envs.travel.flows.domain import TRAVEL_FLOWS

        return TRAVEL_FLOWS

    def reference_plan(self, query: int | str | TravelQuery) -> str | None:
        """The solver's minimum-cost plan passing every constraint (text), or None if none exists; in
        the benchmark track over the query's own reference rows (the options its grammar offers)."""
        q = self.get_query(query)
        if self.track == BENCHMARK:
            solver = TravelSolver(SandboxIndex(reference_database(q, self.view(q).notes)))
        else:
            if self._solver is None:
                self._solver = TravelSolver(self.index)
            solver = self._solver
        res = solver.solve(q)
        return None if res is None else format_plan(res.plan)


def _safe_format(plan: Any) -> str:
    try:
        return format_plan(plan)
    except Exception:
        return repr(plan)
