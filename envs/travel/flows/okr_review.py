"""OKR-Agent's review: the evaluator's verdicts on the (partial) solution, the slots each failed
criterion blames (:func:`envs.travel.blame.blamed_items`), the alternatives that fix one without
breaking a criterion that held, and a version's score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from envs.travel.blame import blamed_items
from envs.travel.catalog import Option
from envs.travel.flows.okr_solution import Solution
from envs.travel.local_checks import covered_cuisines
from envs.travel.verdicts import Verdict
from rltf.flows.agents.okr import Agent

__all__ = ["Review", "fixes", "review", "score", "verdicts"]


@dataclass
class Review:
    """One agent's review: the working criteria, their verdicts, and the blamed ``(slot id, constraint)``."""

    working: list[str]
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    blamed: list[tuple[str, str]] = field(default_factory=list)


def verdicts(evaluator, sol: Solution, names: Sequence[str],
             values: dict[str, str] | None = None) -> dict[str, Verdict]:
    """The evaluator's verdict of each named constraint on the (partial) plan of ``values``;
    complete information is not judged before every slot has a value."""
    values = sol.values if values is None else values
    days = sol.plan(values)
    complete = sol.complete(values)
    return {n: (evaluator.judge(n, sol.cat.q, days) if complete or n != "complete_information"
                else Verdict(None, "not judged yet: the solution is incomplete")) for n in dict.fromkeys(names)}


def review(evaluator, sol: Solution, agent: Agent, working: list[str]) -> Review:
    """``agent``'s review of the solution against the working criteria: the slots each failed one
    blames (a day agent: only its day's), its own criteria first, each slot once."""
    rv = Review(list(working), verdicts(evaluator, sol, working))
    for name, v in rv.verdicts.items():
        if v.passed is False:
            for sid in blamed_items(sol.cat, sol.slots, sol.values, name):
                if agent.day is None or sol.slots[sid].day == agent.day or agent.day in sol.slots[sid].days:
                    rv.blamed.append((sid, name))
    # the agent's own criteria first, then the preceding agents' (in the order they were added)
    rv.blamed.sort(key=lambda b: b[1] not in agent.constraints)
    seen: set[str] = set()
    rv.blamed = [(s, n) for s, n in rv.blamed if not (s in seen or seen.add(s))]
    return rv


def _covered(sol: Solution, values: dict[str, str]) -> set[str]:
    return covered_cuisines(sol.cat, [t for sid, t in values.items() if sol.slots[sid].kind == "meal"])


def fixes(evaluator, sol: Solution, sid: str, name: str, rv: Review, max_options: int) -> list[Option]:
    """Alternatives for ``sid`` that fix ``name`` (or stop blaming ``sid`` for it) without
    breaking a working criterion that holds (at most ``max_options``)."""
    held = [n for n, v in rv.verdicts.items() if v.passed is not False]
    cur = sol.values.get(sid)
    cur_cost = getattr(sol.cat.lookup(cur), "cost", 0.0) if cur else 0.0
    out = []
    for o in sol.options(sol.slots[sid]):
        if o.text == cur or (name == "budget" and o.cost >= cur_cost):
            continue
        trial = dict(sol.values, **{sid: o.text})
        v = verdicts(evaluator, sol, [name, *held], trial)
        if name == "cuisine":  # progress: one more wanted cuisine served
            if len(_covered(sol, trial)) <= len(_covered(sol, sol.values)):
                continue
        elif name != "budget" and v[name].passed is False and sid in blamed_items(sol.cat, sol.slots, trial, name):
            continue  # (a cheaper option is progress on the budget even when it is not enough)
        if any(v[n].passed is False for n in held):
            continue
        out.append(o)
        if len(out) >= max_options:
            break
    return out


def score(evaluator, sol: Solution, agents: Sequence[Agent], values: dict[str, str]) -> float:
    """The share of every agent's criteria the solution of ``values`` meets."""
    names = sorted({c for a in agents for c in a.constraints})
    v = verdicts(evaluator, sol, names, values)
    return sum(x.passed is not False for x in v.values()) / max(1, len(v))
