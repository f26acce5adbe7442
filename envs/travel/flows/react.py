"""ReAct (Yao et al. 2023) on the travel sandbox: the travel side of the ReAct pattern
(:class:`rltf.flows.agents.react.ReActAgent`, whose docstring says the loop), TravelPlanner's
two-stage baseline.

The actions are the searches of the query not made yet -- ``FlightSearch[A, B, date]``,
``GoogleDistanceMatrix[A, B, self-driving|taxi]``, ``AccommodationSearch[C]``, ``RestaurantSearch[C]``,
``AttractionSearch[C]``, ``CitySearch[State]`` over the origin, the destination's cities and the
trip's dates -- or ``Finish``. Only the searches that keep a complete itinerary within the steps left
are offered, and ``Finish`` only once the gathered entities hold one
(:mod:`envs.travel.flows.react_reach`): with a ``max_steps`` that fits the query (5, 7 and 9
searches at least for 3-, 5- and 7-day trips) every pass delivers. Before, every search and
``Finish`` were offered at every step and a pass delivered only when the planner happened to gather a
hotel, meals, attractions and transport for every stop of a route: on the real tables (up to 5,038
searches for a state's 7-day query) none of the 72 test queries; on the synthetic sandbox the 3-day
ones alone. The env's tools run the action (:meth:`envs.travel.tools.TravelTools.call`).

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

from constrained_decoding.rows import GrammarError
from envs.travel.candidates import QueryCandidates
from envs.travel.flows.react_reach import Reach
from envs.travel.flows.setup import travel_setup
from envs.travel.grammar import build_travel_grammar
from envs.travel.plans import PlanParseError, parse_plan
from envs.travel.text import flight_text, ground_text
from rltf.config.flow import ReActSettings
from rltf.flows.agents.domain import FlowRun
from rltf.flows.agents.react import FINISH, ReActAgent
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.errors import NodeRetry
from rltf.flows.engine.program import Ask

__all__ = ["FINISH", "PLAN_FORMAT", "TravelReAct", "run_react"]

SYSTEM = "You are a travel agent: search with the tools, then plan."
_ACTION = re.compile(r"^(\w+)\[(.*)\]$")
PLAN_FORMAT = ('Write the plan as a JSON list with one object per day: {"days": 1, "current_city": "from A to B" '
               'or "A", "transportation": ..., "breakfast": "Name, City" or "-", "attraction": "Name, City;" or '
               '"-", "lunch": ..., "dinner": ..., "accommodation": "Name, City" or "-"}.')


class TravelReAct(ReActAgent):
    """The ReAct flow of one travel query (see the module docstring)."""

    system = SYSTEM

    def __init__(self, env, query, backend, settings: ReActSettings | None = None, *,
                 config: FlowConfig | None = None, system_prompts: bool = False):
        setup, self.cat = travel_setup(env, query, backend, config, system_prompts)
        super().__init__(setup, settings)
        self.q = self.cat.q
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
    def options(self, called: set[str], left: int) -> list[str]:
        """The searches not made yet that keep a complete itinerary within ``left`` steps, and ``Finish`` once
        the gathered entities hold one (:mod:`envs.travel.flows.react_reach`). When none fits the steps left
        (``max_steps`` below what the query needs) every search and ``Finish``, and the shortfall is noted."""
        reach = self.reach.status(self.hotels, self.restaurants, self.attractions, self.flights, self.ground, left)
        options = [a for a in self.actions() if a not in called]
        if reach.needed is not None and reach.needed <= left:
            return [a for a in options if reach.useful is None or a in reach.useful] + (
                [FINISH] if reach.needed == 0 else [])
        if "react.short" not in self.db:
            self.db["react.short"] = {"needed": reach.needed, "left": left}
        return options + [FINISH]

    def plan(self) -> Iterator[Ask]:
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


def run_react(env, query, backend, settings: ReActSettings | None = None, *, config: FlowConfig | None = None,
              system_prompts: bool = False, trace_path: str | Path | None = None) -> FlowRun:
    """Plan ``query`` with ReAct on ``backend`` (see the module docstring)."""
    return TravelReAct(env, query, backend, settings, config=config, system_prompts=system_prompts).run(trace_path)
