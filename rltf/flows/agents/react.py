"""ReAct (Yao et al. 2023) on the travel sandbox, TravelPlanner's two-stage baseline: a think /
act / observe loop over the search tools, then a plan written from what was gathered.

One query is one pass of a flow written as a program (:mod:`rltf.flows.engine.program`). Step ``k``:

* ``step<k>.think`` (``think_tokens > 0``): a free-text thought;
* ``step<k>.act``: the next tool invocation, a choice among the searches of the query not made
  yet -- ``FlightSearch[A, B, date]``, ``GoogleDistanceMatrix[A, B, self-driving|taxi]``,
  ``AccommodationSearch[C]``, ``RestaurantSearch[C]``, ``AttractionSearch[C]``,
  ``CitySearch[State]`` over the origin, the destination's cities and the trip's dates -- or
  ``Finish`` (constrained with the planner backend: an exact log-prob per action). Only the searches
  that keep a complete itinerary within the steps left are offered, and ``Finish`` only once the
  gathered entities hold one (:mod:`rltf.flows.agents.react_reach`): with a ``max_steps`` that fits
  the query (5, 7 and 9 searches at least for 3-, 5- and 7-day trips) every pass delivers. Before,
  every search and ``Finish`` were offered at every step and a pass delivered only when the
  planner happened to gather a hotel, meals, attractions and transport for every stop of a route:
  on the real tables (up to 5,038 searches for a state's 7-day query) none of the 72 test queries;
  on the synthetic sandbox the 3-day ones alone;
* the env's tools run the action (:meth:`envs.travel.tools.TravelTools.call`) and the observation
  is fed back: the next steps' prompts show the most recent ones (``observations``).

After ``Finish`` (or ``max_steps``) the ``plan`` node writes the itinerary: with a backend that
constrains (planner, hf) it is decoded under the travel plan grammar built from *the gathered
entities only* (:func:`envs.travel.grammar.build_travel_grammar` on the observed restaurants,
hotels, attractions and transport), so a plan can only name what the agent looked up (an agent
whose ``max_steps`` is below what the query needs may gather too little: it delivers nothing and
says so); with an openai backend the plan is free JSON text (parsed, re-asked with the parse error
when it does not parse).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from constrained_decoding.rows import GrammarError
from envs.travel.candidates import QueryCandidates
from envs.travel.grammar import build_travel_grammar
from envs.travel.plans import PlanParseError, parse_plan
from envs.travel.text import flight_text, ground_text
from rltf.config.flow import ReActSettings
from rltf.flows.agents.agent_setup import AgentSetup, delivered
from rltf.flows.agents.react_reach import Reach
from rltf.flows.agents.travel_nodes import FlowRun
from rltf.flows.backends.base import Sampling
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.database import Database
from rltf.flows.engine.errors import NodeRetry
from rltf.flows.engine.program import Ask, run_program

__all__ = ["FINISH", "ReActAgent", "run_react"]

FINISH = "Finish"
SYSTEM = "You are a travel agent: search with the tools, then plan."
_ACTION = re.compile(r"^(\w+)\[(.*)\]$")
PLAN_FORMAT = ('Write the plan as a JSON list with one object per day: {"days": 1, "current_city": "from A to B" '
               'or "A", "transportation": ..., "breakfast": "Name, City" or "-", "attraction": "Name, City;" or '
               '"-", "lunch": ..., "dinner": ..., "accommodation": "Name, City" or "-"}.')


class ReActAgent:
    """The ReAct flow of one query (see the module docstring)."""

    def __init__(self, env, query, backend, settings: ReActSettings | None = None, *,
                 config: FlowConfig | None = None, system_prompts: bool = False):
        self.setup = AgentSetup.create(env, query, backend, config, system_prompts)
        self.cat, self.q = self.setup.cat, self.setup.q
        self.settings = settings or ReActSettings()
        self.db = Database()
        self.trajectory: list[dict[str, Any]] = []
        self.restaurants: dict[str, list[str]] = {}
        self.attractions: dict[str, list[str]] = {}
        self.hotels: dict[str, list[str]] = {}
        self.flights: dict[tuple[str, str, int], list[str]] = {}
        self.ground: dict[tuple[str, str], list[str]] = {}
        self.cities_found: list[str] = []
        self.reach = Reach(self.cat.tools, self.q, self.cat.candidates.route_cities)

    # ---------------------------------------------------------------------------- actions
    def actions(self) -> list[str]:
        """Every search the query can make: the origin and the destination's cities, the trip's dates."""
        q, c = self.q, self.cat.candidates
        stops = [q.org, *c.route_cities]
        out = [f"CitySearch[{q.dest}]"] if q.days > 3 else []
        for city in c.route_cities:
            out += [f"AccommodationSearch[{city}]", f"RestaurantSearch[{city}]", f"AttractionSearch[{city}]"]
        for a in stops:
            for b in stops:
                if a == b or (a == q.org and b == q.org):
                    continue
                out += [f"FlightSearch[{a}, {b}, {d}]" for d in q.date]
                out += [f"GoogleDistanceMatrix[{a}, {b}, self-driving]", f"GoogleDistanceMatrix[{a}, {b}, taxi]"]
        return out

    def observe(self, action: str) -> str:
        """Run ``action`` with the env's tools; remember what it found for the plan."""
        text = self.cat.tools.call(action)
        m = _ACTION.match(action)
        name, args = m.group(1), [x.strip() for x in m.group(2).split(",")]
        tools, q = self.cat.tools, self.q
        if name == "FlightSearch":
            a, b, date = args
            df = tools.flights(a, b, date)
            self.flights[(a, b, q.date.index(date))] = [
                flight_text(str(no), a, b, str(dep), str(arr))
                for no, dep, arr in zip(df["Flight Number"].tolist(), df["DepTime"].tolist(), df["ArrTime"].tolist())]
        elif name == "GoogleDistanceMatrix":
            a, b, mode = args
            r = tools.distance(a, b, mode)
            if r["cost"] is not None:
                self.ground.setdefault((a, b), []).append(ground_text(mode, a, b, r["duration"], r["distance"],
                                                                      r["cost"]))
        elif name == "AccommodationSearch":
            self.hotels[args[0]] = [o.text for o in self.cat.hotels(args[0])]
        elif name == "RestaurantSearch":
            self.restaurants[args[0]] = [o.text for o in self.cat.restaurants(args[0])]
        elif name == "AttractionSearch":
            self.attractions[args[0]] = [o.text for o in self.cat.attractions(args[0])]
        elif name == "CitySearch":
            self.cities_found = tools.cities(args[0])
        return text

    def gathered(self) -> QueryCandidates:
        """What the agent looked up, as the candidates a plan grammar is built on."""
        q, c = self.q, self.cat.candidates
        seen = set(self.hotels) | set(self.restaurants) | set(self.attractions) | set(self.cities_found)
        route = [x for x in c.route_cities if x in seen]
        transport: dict[tuple[str, str], dict[int, list[str]]] = {}
        # legs in first-seen order (a set's order changed with PYTHONHASHSEED: runs were not reproducible)
        legs = dict.fromkeys([(a, b) for a, b, _ in self.flights] + list(self.ground))
        for a, b in legs:
            per_day = {}
            for i in range(q.days):
                opts = self.flights.get((a, b, i), []) + self.ground.get((a, b), [])
                if opts:
                    per_day[i] = list(dict.fromkeys(opts))
            if per_day:
                transport[(a, b)] = per_day
        return QueryCandidates(q.id, q.days, q.org, list(q.date), q.visiting_city_number, route,
                               restaurants={k: list(v) for k, v in self.restaurants.items()},
                               attractions={k: list(v) for k, v in self.attractions.items()},
                               accommodations={k: list(v) for k, v in self.hotels.items()}, transport=transport)

    # ---------------------------------------------------------------------------- program
    def _ask(self, name: str, body: str, **kw: Any) -> Ask:
        msgs = self.setup.messages(SYSTEM, f"{self.setup.head()}\n{body}")
        return Ask(name, body.splitlines()[-1], messages=msgs, **kw)

    def _scratchpad(self) -> str:
        st = self.settings
        recent = self.trajectory[-st.observations:] if st.observations else []
        if not recent:
            return "Observations: none yet."
        lines = []
        for t in recent:
            obs = t["observation"]
            obs = obs if len(obs) <= st.observation_chars else obs[: st.observation_chars] + " ..."
            lines.append(f"Action {t['step']}: {t['action']}\nObservation {t['step']}: {obs}")
        return "\n".join(lines)

    def _options(self, called: set[str], left: int) -> list[str]:
        """The searches not made yet that keep a complete itinerary within ``left`` steps, and ``Finish`` once
        the gathered entities hold one (:mod:`rltf.flows.agents.react_reach`). When none fits the steps left
        (``max_steps`` below what the query needs) every search and ``Finish``, and the shortfall is noted."""
        reach = self.reach.status(self.hotels, self.restaurants, self.attractions, self.flights, self.ground, left)
        options = [a for a in self.actions() if a not in called]
        if reach.needed is not None and reach.needed <= left:
            return [a for a in options if reach.useful is None or a in reach.useful] + (
                [FINISH] if reach.needed == 0 else [])
        if "react.short" not in self.db:
            self.db["react.short"] = {"needed": reach.needed, "left": left}
        return options + [FINISH]

    def program(self) -> Iterator[Ask]:
        st = self.settings
        called: set[str] = set()
        for step in range(1, st.max_steps + 1):
            thought = None
            if st.think_tokens:
                thought = yield self._ask(f"step{step}.think", f"{self._scratchpad()}\nThought {step}:",
                                          sampling=Sampling(max_new_tokens=st.think_tokens))
            options = self._options(called, left=st.max_steps - step + 1)
            listing = "\n".join(f"- {a}" for a in options)
            act = yield self._ask(f"step{step}.act", (
                f"Actions:\n{listing}\n{self._scratchpad()}\n"
                + (f"Thought {step}: {thought.strip()}\n" if thought else "") + f"Action {step}:"), choices=options)
            if act == FINISH:
                break
            called.add(act)
            obs = self.observe(act)
            self.trajectory.append({"step": step, "thought": thought, "action": act, "observation": obs})
            self.db["react.trajectory"] = [{k: v for k, v in t.items() if k != "observation"} | {
                "observation": t["observation"][:200]} for t in self.trajectory]
        plan = yield from self._plan()
        return plan

    def _plan(self) -> Iterator[Ask]:
        gathered = self.gathered()
        self.db["react.gathered"] = {"route_cities": gathered.route_cities,
                                     "legs": [f"{a}|{b}" for a, b in gathered.transport],
                                     "hotels": {k: len(v) for k, v in gathered.accommodations.items()},
                                     "restaurants": {k: len(v) for k, v in gathered.restaurants.items()},
                                     "attractions": {k: len(v) for k, v in gathered.attractions.items()}}
        backend = self.setup.backend
        tok = getattr(backend, "tokenizer", None)
        if getattr(backend, "supports_grammar", False) and tok is not None:
            try:
                grammar = build_travel_grammar(tok, gathered, self.setup.env.max_attractions)
            except GrammarError as e:
                short = self.db.get("react.short")
                budget = ("" if short is None else
                          " (the tables hold no complete itinerary)" if short["needed"] is None else
                          f" (a complete itinerary needed {short['needed']} searches with {short['left']} of "
                          f"flow.react.max_steps={self.settings.max_steps} left)")
                self.db["react.undelivered"] = f"the gathered information is not enough for an itinerary{budget}: {e}"
                return None
            plan = yield self._ask("plan", "Planner: write the itinerary from the gathered information.",
                                   grammar=grammar)
            return plan

        def parse(text: str):
            try:
                return parse_plan(text)
            except PlanParseError as e:
                raise NodeRetry(f"That is not a plan ({e}). {PLAN_FORMAT}") from None

        notes = "\n".join(f"{t['action']}: {t['observation'][: self.settings.observation_chars]}"
                          for t in self.trajectory)
        plan = yield self._ask("plan", f"Gathered information:\n{notes}\nPlanner: {PLAN_FORMAT}", parse=parse)
        return plan

    def run(self, trace_path: str | Path | None = None) -> FlowRun:
        self.db["task"] = self.q.query
        pr = run_program(self.setup.backend, self.program(), db=self.db, config=self.setup.config,
                         name=f"react-q{self.q.id}", trace_path=trace_path)
        plan, error = delivered(pr, self.db.get("react.undelivered"))
        return FlowRun(plan, pr.result, error, {"steps": len(self.trajectory),
                                                "actions": [t["action"] for t in self.trajectory]})


def run_react(env, query, backend, settings: ReActSettings | None = None, *, config: FlowConfig | None = None,
              system_prompts: bool = False, trace_path: str | Path | None = None) -> FlowRun:
    """Plan ``query`` with ReAct on ``backend`` (see the module docstring)."""
    return ReActAgent(env, query, backend, settings, config=config, system_prompts=system_prompts).run(trace_path)
