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
model, ``<agent>.criterion``). The tree goes to ``db["okr.agents"]``.

*Execution.* Agents in order (objective, then its key results, depth first), each:
expanding the solution -- a structure keyed by the objectives (``db["okr.solution"]``) -- by
choosing a value for every slot of its objective still empty (``r<round>.<slot>``: a choice
among the search tools' results, cheapest first; the route agent chooses the cities and the
schedule); reviewing it against its own criterion and every preceding agent's (the working
criteria; ``criteria: evaluator``: the evaluator's verdicts on the partial plan, each failed
constraint with its reason; ``criteria: model``: the model answers ``pass`` or which slot to
revise); and revising (``r<round>.revise<k>.<slot>``: a choice among the alternatives that fix
the violation without breaking a criterion that held, up to ``max_revisions`` slots). Refinement
repeats the execution ``rounds`` times on the solution so far and keeps the best-scored version
(the share of all criteria it meets; model mode: of the agents whose review passed).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.travel.schema import MEALS
from envs.travel.verdicts import PAPER_NAMES, Verdict
from rltf.flows.backends.base import Message, Sampling
from rltf.flows.engine.database import Database
from rltf.flows.engine.flow import FlowConfig
from rltf.flows.engine.program import Ask, run_program
from rltf.config.flow import OKRSettings
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
    option_lines,
    route_text,
    schedule_text,
    schedules,
)

__all__ = ["OBJECTIVES", "Agent", "OKRAgent", "candidate_key_results", "run_okr"]

OBJECTIVES = ("route", "transport", "accommodation", "dining", "sightseeing", "budget")
TITLES = {"route": "Itinerary Planner", "transport": "Transportation Booking Officer",
          "accommodation": "Accommodation Booking Officer", "dining": "Food Planner",
          "sightseeing": "Sightseeing Guide", "budget": "Financial Manager"}
DESCRIPTIONS = {
    "reasonable_city_route": "a closed route from the origin through the destination's cities, each visited once",
    "complete_information": "every day filled: transport on travel days, meals, an attraction and a stay",
    "non_conflicting_transportation": "no self-driving together with flights or taxis",
    "transportation": "the transportation the travellers rule out is never used",
    "minimum_nights_stay": "every stay at least as long as the accommodation's minimum nights",
    "room_rule": "accommodations that allow what the travellers need (house rule)",
    "room_type": "accommodations of the room type the travellers ask for",
    "diverse_restaurants": "no restaurant chosen twice",
    "cuisine": "every cuisine the travellers want served at least once outside the origin",
    "diverse_attractions": "no attraction visited twice",
    "budget": "a total cost within the budget",
}
FIELDS = {"transport": ("transportation",), "accommodation": ("accommodation",), "dining": MEALS,
          "sightseeing": ("attraction",)}


def candidate_key_results(q) -> dict[str, list[str]]:
    """Per objective, the named constraints that can be its key results for query ``q``."""
    lc = q.local_constraint
    return {
        "route": ["reasonable_city_route", "complete_information"],
        "transport": ["non_conflicting_transportation"] + (["transportation"] if lc.get("transportation") else []),
        "accommodation": (["minimum_nights_stay"] + (["room_rule"] if lc.get("house rule") else [])
                          + (["room_type"] if lc.get("room type") else [])),
        "dining": ["diverse_restaurants"] + (["cuisine"] if lc.get("cuisine") else []),
        "sightseeing": ["diverse_attractions"],
        "budget": ["budget"],
    }


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


@dataclass
class Slot:
    """One value of the solution: a leg's transport, a stay, a meal, a day's attraction."""

    id: str
    objective: str
    kind: str  # transport | stay | meal | attraction
    city: str
    day: int
    field: str
    days: tuple[int, ...] = ()  # a stay's nights
    leg: tuple[str, str] = ("", "")

    @property
    def cells(self) -> list[tuple[int, str]]:
        return [(d, "accommodation") for d in self.days] if self.kind == "stay" else [(self.day, self.field)]

    @property
    def times(self) -> int:
        return len(self.days) if self.kind == "stay" else 1


@dataclass
class _Review:
    working: list[str]
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    blamed: list[tuple[str, str]] = field(default_factory=list)  # (slot id, constraint)


class OKRAgent:
    """The OKR-Agent flow of one query (see the module docstring)."""

    def __init__(self, env, query, backend, settings: OKRSettings | None = None, *,
                 config: FlowConfig | None = None, system_prompts: bool = False):
        self.env = env
        self.cat = Catalog(env, query)
        self.q = self.cat.q
        self.backend = backend
        self.settings = settings or OKRSettings()
        self.config = config or FlowConfig()
        self.system_prompts = system_prompts
        self.db = Database()
        self.agents: list[Agent] = []
        self.route: Route | None = None
        self.slots: dict[str, Slot] = {}
        self.values: dict[str, str] = {}
        self.versions: list[dict[str, Any]] = []

    # ------------------------------------------------------------------------------ helpers
    def _ask(self, name: str, role: str, text: str, **kw: Any) -> Ask:
        """A node asking ``text`` (the query's head, then the agent's request); its trace prompt is
        the request's first line."""
        msgs: list[Message] = []
        if self.system_prompts:
            msgs.append({"role": "system", "content": f"You are the {role} of a travel-planning team."})
        msgs.append({"role": "user", "content": text})
        body = text[len(self._head()):].strip() if text.startswith(self._head()) else text
        return Ask(name, body.splitlines()[0] if body else name, messages=msgs, **kw)

    def _head(self) -> str:
        return f"{self.q.query}\nConstraints: {constraints_text(self.q)}."

    def plan(self, values: dict[str, str] | None = None) -> list[dict]:
        values = self.values if values is None else values
        cells: dict[tuple[int, str], str] = {}
        for sid, text in values.items():
            s = self.slots[sid]
            v = attraction_text([self.cat.lookup(text)]) if s.kind == "attraction" else text
            for c in s.cells:
                cells[c] = v
        return assemble(self.route, cells)

    def _sync(self) -> None:
        """The solution keyed by objectives, in the database (and so in the trace)."""
        sol: dict[str, Any] = {"route": list(self.route.current_cities) if self.route else None}
        for obj in ("transport", "accommodation", "dining", "sightseeing"):
            sol[obj] = {sid: self.values[sid] for sid, s in self.slots.items() if s.objective == obj and sid in self.values}
        if self.route is not None:
            sol["budget"] = {"total": self._cost(self.values), "limit": self.q.budget}
        self.db["okr.solution"] = sol

    def _cost(self, values: dict[str, str]) -> float:
        return sum((self.cat.lookup(t).cost if self.cat.lookup(t) else 0.0) * self.slots[sid].times
                   for sid, t in values.items() if self.slots[sid].kind != "attraction")

    # ---------------------------------------------------------------------------- slots
    def _make_slots(self) -> None:
        r = self.route
        slots = [Slot(f"leg{j}", "transport", "transport", b, d, "transportation", leg=(a, b))
                 for j, d, a, b in r.legs()]
        slots += [Slot(f"stay{j}", "accommodation", "stay", c, first, "accommodation",
                       days=tuple(range(first, first + n))) for j, c, first, n in r.stays()]
        slots += [Slot(f"day{d}.{m}", "dining", "meal", c, d, m) for d, c in r.full_days() for m in MEALS]
        slots += [Slot(f"day{d}.attraction", "sightseeing", "attraction", c, d, "attraction") for d, c in r.full_days()]
        self.slots = {s.id: s for s in slots}

    def options(self, s: Slot) -> list[Option]:
        """Every tool result for slot ``s``, cheapest first."""
        if s.kind == "transport":
            found = self.cat.transport(s.leg[0], s.leg[1], s.day)
        elif s.kind == "stay":
            found = self.cat.hotels(s.city)
        elif s.kind == "meal":
            found = self.cat.restaurants(s.city)
        else:
            return list(self.cat.attractions(s.city))
        return sorted(found, key=lambda o: o.cost)

    # ---------------------------------------------------------------------------- review
    def verdicts(self, names: Sequence[str], values: dict[str, str] | None = None) -> dict[str, Verdict]:
        """The evaluator's verdict of each named constraint on the (partial) plan of ``values``;
        complete information is not judged before every slot has a value."""
        values = self.values if values is None else values
        days = self.plan(values)
        ev = self.env.evaluator
        complete = self.route is not None and set(self.slots) <= set(values)
        return {n: (getattr(ev, n)(self.q, days) if complete or n != "complete_information"
                    else Verdict(None, "not judged yet: the solution is incomplete")) for n in dict.fromkeys(names)}

    def blame(self, name: str, values: dict[str, str]) -> list[str]:
        """The slots a failed constraint ``name`` points at (the ones a revision should change)."""
        sl = self.slots
        if name == "diverse_restaurants" or name == "diverse_attractions":
            kind = "meal" if name == "diverse_restaurants" else "attraction"
            seen, out = set(), []
            for sid in sorted((k for k in values if sl[k].kind == kind), key=lambda k: (sl[k].day, k)):
                if values[sid] in seen:
                    out.append(sid)
                seen.add(values[sid])
            return out
        if name == "cuisine":
            wanted = set(self.q.local_constraint.get("cuisine") or ())
            got = self._covered(values)
            if wanted <= got:
                return []
            useless = [sid for sid, t in values.items() if sl[sid].kind == "meal"
                       and not (wanted & set(getattr(self.cat.lookup(t), "cuisines", ())))]
            return useless[: len(wanted - got)]
        if name in ("minimum_nights_stay", "room_rule", "room_type"):
            out = []
            for sid, t in values.items():
                if sl[sid].kind != "stay":
                    continue
                o = self.cat.lookup(t)
                if o is None:
                    continue
                bad = {"minimum_nights_stay": o.min_nights > len(sl[sid].days),
                       "room_rule": self._rule_bad(o), "room_type": self._type_bad(o)}[name]
                if bad:
                    out.append(sid)
            return out
        if name in ("non_conflicting_transportation", "transportation"):
            legs = [sid for sid in values if sl[sid].kind == "transport"]
            modes = {sid: getattr(self.cat.lookup(values[sid]), "mode", None) for sid in legs}
            if name == "transportation":
                rule = self.q.local_constraint.get("transportation")
                banned = "Flight" if rule == "no flight" else "Self-driving"
                return [sid for sid in legs if modes[sid] == banned]
            driving = [sid for sid in legs if modes[sid] == "Self-driving"]
            other = [sid for sid in legs if modes[sid] in ("Flight", "Taxi")]
            if not driving or not other:
                return []
            return driving if len(driving) <= len(other) else other
        if name == "budget":
            savings = []
            for sid, t in values.items():
                s = sl[sid]
                if s.kind == "attraction":
                    continue
                cur = getattr(self.cat.lookup(t), "cost", 0.0)
                cheapest = min((o.cost for o in self.options(s)), default=cur)
                if cheapest < cur:
                    savings.append(((cur - cheapest) * s.times, sid))
            return [sid for _, sid in sorted(savings, reverse=True)]
        return []

    def _covered(self, values: dict[str, str]) -> set[str]:
        return covered_cuisines(self.cat, [t for sid, t in values.items() if self.slots[sid].kind == "meal"])

    def _rule_bad(self, o: Option) -> bool:
        from envs.travel.schema import HOUSE_RULE_TEXT

        rule = self.q.local_constraint.get("house rule")
        return bool(rule) and HOUSE_RULE_TEXT[rule] in o.house_rules

    def _type_bad(self, o: Option) -> bool:
        from envs.travel.hard_rules import ROOM_TYPE_OK

        want = self.q.local_constraint.get("room type")
        return bool(want) and not ROOM_TYPE_OK[want](o.room_type)

    def review(self, agent: Agent, working: list[str]) -> _Review:
        rv = _Review(list(working), self.verdicts(working))
        for name, v in rv.verdicts.items():
            if v.passed is False:
                for sid in self.blame(name, self.values):
                    if agent.day is None or self.slots[sid].day == agent.day or agent.day in self.slots[sid].days:
                        rv.blamed.append((sid, name))
        # the agent's own criteria first, then the preceding agents' (in the order they were added)
        rv.blamed.sort(key=lambda b: b[1] not in agent.constraints)
        seen: set[str] = set()
        rv.blamed = [(s, n) for s, n in rv.blamed if not (s in seen or seen.add(s))]
        return rv

    def fixes(self, sid: str, name: str, rv: _Review) -> list[Option]:
        """Alternatives for ``sid`` that fix ``name`` (or stop blaming ``sid`` for it) without
        breaking a working criterion that holds."""
        held = [n for n, v in rv.verdicts.items() if v.passed is not False]
        cur = self.values.get(sid)
        cur_cost = getattr(self.cat.lookup(cur), "cost", 0.0) if cur else 0.0
        out = []
        for o in self.options(self.slots[sid]):
            if o.text == cur or (name == "budget" and o.cost >= cur_cost):
                continue
            trial = dict(self.values, **{sid: o.text})
            v = self.verdicts([name, *held], trial)
            if name == "cuisine":  # progress: one more wanted cuisine served
                if len(self._covered(trial)) <= len(self._covered(self.values)):
                    continue
            elif name != "budget" and v[name].passed is False and sid in self.blame(name, trial):
                continue  # (a cheaper option is progress on the budget even when it is not enough)
            if any(v[n].passed is False for n in held):
                continue
            out.append(o)
            if len(out) >= self.settings.max_options:
                break
        return out

    def score(self, values: dict[str, str]) -> float:
        names = sorted({c for a in self.agents for c in a.constraints})
        v = self.verdicts(names, values)
        return sum(x.passed is not False for x in v.values()) / max(1, len(v))

    # ---------------------------------------------------------------------------- program
    def program(self) -> Iterator[Ask]:
        q, st = self.q, self.settings
        cands = candidate_key_results(q)
        # --- hierarchical generation: objectives, key results, agents, criteria
        orders = ["route, " + ", ".join(p) for p in itertools.permutations(OBJECTIVES[1:])]
        order = yield self._ask("lead.objectives", "leading agent", (
            f"{self._head()}\nLeading agent: write the objectives of this trip plan, in the order the team "
            f"works on them. Options: any order of route (first), transport, accommodation, dining, "
            "sightseeing, budget."), choices=orders)
        objectives = [o.strip() for o in order.split(",")]
        self.db["okr.objectives"] = objectives
        krs: dict[str, list[str]] = {}
        for obj in objectives:
            if st.levels >= 2:
                subsets = [list(c) for k in range(len(cands[obj]), 0, -1) for c in itertools.combinations(cands[obj], k)]
                texts = {", ".join(PAPER_NAMES[n] for n in s): s for s in subsets}
                pick = yield self._ask(f"{obj}.key_results", TITLES[obj], (
                    f"{self._head()}\nYou are the {TITLES[obj]}. Expand the objective '{obj}' into key results.\n"
                    + "\n".join(f"- {t}" for t in texts)), choices=list(texts))
                krs[obj] = texts[pick]
            else:
                krs[obj] = list(cands[obj])
        agents: list[Agent] = []
        for obj in objectives:
            top = Agent(obj, obj, 1, list(krs[obj]), TITLES[obj], self._criterion(obj, krs[obj]))
            agents.append(top)
            if st.levels >= 2:
                for kr in krs[obj]:
                    a = Agent(f"{obj}/{kr}", obj, 2, [kr], f"{PAPER_NAMES[kr]} Checker", self._criterion(obj, [kr]), obj)
                    agents.append(a)
                    if st.levels >= 3 and obj != "budget" and obj != "route":
                        for d in range(1, q.days + 1):
                            agents.append(Agent(f"{obj}/{kr}/day{d}", obj, 3, [kr], f"{PAPER_NAMES[kr]} Checker, day {d}",
                                                self._criterion(obj, [kr], d), a.name, d))
        if st.criteria == "model":
            for a in agents:
                text = yield self._ask(f"{a.name}.criterion", a.title, (
                    f"{self._head()}\nYou are an outstanding {a.title}. In one sentence, starting 'An excellent "
                    f"{a.objective} plan should have the characteristic of', state how to judge the trip plan's "
                    f"{a.objective} ({', '.join(PAPER_NAMES[c] for c in a.constraints)})."),
                    sampling=Sampling(max_new_tokens=st.criterion_tokens))
                a.criterion = text.strip() or a.criterion
        self.agents = agents
        self.db["okr.agents"] = [a.as_dict() for a in agents]
        # --- execution rounds
        for rnd in range(1, st.rounds + 1):
            working: list[str] = []
            passed_reviews = 0
            for a in agents:
                working += [c for c in a.constraints if c not in working]
                yield from self._expand(a, rnd)
                if self.route is None:
                    return None
                if st.criteria == "model":
                    ok = yield from self._model_review(a, rnd)
                    passed_reviews += ok
                else:
                    yield from self._review_and_revise(a, working, rnd)
            s = passed_reviews / len(agents) if st.criteria == "model" else self.score(self.values)
            self.versions.append({"round": rnd, "score": s, "values": dict(self.values), "cost": self._cost(self.values)})
            self.db[f"okr.rounds.r{rnd}"] = {"score": s, "cost": self._cost(self.values)}
            if s >= 1.0:
                break
        best = max(self.versions, key=lambda v: v["score"])  # the first of the best
        self.values = dict(best["values"])
        self._sync()
        plan = self.plan()
        self.db["okr.best_round"] = best["round"]
        self.db["okr.plan"] = plan
        return plan

    def _criterion(self, obj: str, constraints: Sequence[str], day: int | None = None) -> str:
        what = "; ".join(DESCRIPTIONS[c] for c in constraints)
        where = f" on day {day}" if day else ""
        return (f"An excellent {obj} plan should have the characteristic of {what}{where} in the aspect of "
                f"{', '.join(PAPER_NAMES[c] for c in constraints)}.")

    def _expand(self, a: Agent, rnd: int) -> Iterator[Ask]:
        if a.objective == "route":
            if self.route is not None or a.level != 1:
                return
            orders = {route_text(c): c for c in city_orders(self.cat)}
            if not orders:
                return
            pick = yield self._ask(f"r{rnd}.route.cities", a.title, (
                f"{self._head()}\nYou are the {a.title}. Criterion: {a.criterion}\nWhich cities, in which order?\n"
                + "\n".join(f"- {o}" for o in orders)), choices=list(orders))
            routes = {schedule_text(r): r for r in schedules(self.cat, orders[pick])}
            pick = yield self._ask(f"r{rnd}.route.schedule", a.title, (
                f"{self._head()}\nYou are the {a.title}. The route is {pick}. On which days do we move?\n"
                + "\n".join(f"- {o}" for o in routes)), choices=list(routes))
            self.route = routes[pick]
            self._make_slots()
            self._sync()
            return
        if a.level != 1 or a.objective not in FIELDS:
            return
        for sid, s in self.slots.items():
            if s.objective != a.objective or sid in self.values:
                continue
            opts = self.options(s)[: self.settings.max_options]
            what = self._describe(s)
            pick = yield self._ask(f"r{rnd}.{sid}", a.title, (
                f"{self._head()}\nYou are the {a.title}. Criterion: {a.criterion}\nExpand the solution: choose "
                f"{what}.\n{option_lines(opts)}\nAnswer with one option."), choices=[o.text for o in opts])
            self.values[sid] = pick
            self._sync()

    @staticmethod
    def _describe(s: Slot) -> str:
        if s.kind == "transport":
            return f"transportation from {s.leg[0]} to {s.leg[1]} on day {s.day}"
        if s.kind == "stay":
            return f"accommodation in {s.city} for days {s.days[0]}-{s.days[-1]}"
        if s.kind == "meal":
            return f"{s.field} on day {s.day} in {s.city}"
        return f"an attraction on day {s.day} in {s.city}"

    def _review_and_revise(self, a: Agent, working: list[str], rnd: int) -> Iterator[Ask]:
        rv = self.review(a, working)
        record = {n: v.reason for n, v in rv.verdicts.items() if v.passed is False}
        self.db[f"okr.reviews.r{rnd}.{a.name.replace('/', '-')}"] = {"failed": record,
                                                                      "blamed": [s for s, _ in rv.blamed]}
        done = 0
        for sid, name in rv.blamed:
            if done >= self.settings.max_revisions:
                break
            opts = self.fixes(sid, name, rv)
            if not opts:
                continue
            done += 1
            reason = rv.verdicts[name].reason or PAPER_NAMES[name]
            pick = yield self._ask(f"r{rnd}.{a.name.replace('/', '-')}.revise{done}.{sid}", a.title, (
                f"{self._head()}\nYou are the {a.title}. Review: {PAPER_NAMES[name]} fails: {reason}\n"
                f"Revise {sid} (now {self.values.get(sid)}):\n{option_lines(opts)}\nAnswer with one option."),
                choices=[o.text for o in opts])
            self.values[sid] = pick
            self._sync()
            rv = self.review(a, working)

    def _model_review(self, a: Agent, rnd: int) -> Iterator[Ask]:
        scope = [sid for sid, s in self.slots.items() if (a.objective in FIELDS and s.objective == a.objective)
                 or a.objective == "budget"]
        if a.day is not None:
            scope = [sid for sid in scope if self.slots[sid].day == a.day or a.day in self.slots[sid].days]
        shown = "\n".join(f"- {sid}: {self.values.get(sid, '-')}" for sid in scope) or "- (nothing of its own)"
        options = ["pass"] + [f"revise {sid}" for sid in scope][: self.settings.max_options]
        verdict = yield self._ask(f"r{rnd}.{a.name.replace('/', '-')}.review", a.title, (
            f"{self._head()}\nYou are the {a.title}. Criteria: {a.criterion}\nSolution (total "
            f"${int(self._cost(self.values))}):\n{shown}\nDoes it meet the criteria? Answer pass, or the slot "
            "to revise."), choices=options)
        if verdict == "pass":
            return True
        sid = verdict.split(" ", 1)[1]
        opts = [o for o in self.options(self.slots[sid]) if o.text != self.values.get(sid)][: self.settings.max_options]
        if opts:
            pick = yield self._ask(f"r{rnd}.{a.name.replace('/', '-')}.revise.{sid}", a.title, (
                f"{self._head()}\nYou are the {a.title}. Criteria: {a.criterion}\nRevise {sid} (now "
                f"{self.values.get(sid)}):\n{option_lines(opts)}\nAnswer with one option."),
                choices=[o.text for o in opts])
            self.values[sid] = pick
            self._sync()
        return False

    # --------------------------------------------------------------------------------- run
    def run(self, trace_path: str | Path | None = None) -> FlowRun:
        self.db["task"] = self.q.query
        pr = run_program(self.backend, self.program(), db=self.db, config=self.config, name=f"okr-q{self.q.id}",
                         trace_path=trace_path)
        plan = pr.value if pr.finished else None
        error = None if plan is not None else ("; ".join(f"{r.name}: {r.error}" for r in pr.result.failures())
                                               or "no plan")
        return FlowRun(plan, pr.result, error, {"versions": [{k: v for k, v in x.items() if k != "values"}
                                                             for x in self.versions],
                                                "agents": len(self.agents)})


def run_okr(env, query, backend, settings: OKRSettings | None = None, *, config: FlowConfig | None = None,
            system_prompts: bool = False, trace_path: str | Path | None = None) -> FlowRun:
    """Plan ``query`` with OKR-Agent on ``backend`` (see the module docstring)."""
    return OKRAgent(env, query, backend, settings, config=config, system_prompts=system_prompts).run(trace_path)
