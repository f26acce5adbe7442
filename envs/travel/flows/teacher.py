"""The travel flows' warm-start teacher: the exact solver's answer to every choice of a flow.

The exact solver (:class:`envs.travel.solver.TravelSolver`) knows, for a train query, the
cheapest plan passing every constraint: its cities in order, the days it moves, its transport
modes and every cell (restaurants, stays, flights, attractions). :class:`SolverTeacher` turns
that into an answer for any choice node of a flow: the option the solver's plan contains (the
route, the schedule, the transport family, a tool result), else the first option (the flows list
options cheapest first, as the minimum-cost solver would choose; for OKR's objective order and
key-result sets, the flow's default order). What the core's warm start
(:func:`rltf.flows.training.teacher.collect_demonstrations`) asks of the travel flow domain.
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.travel.flows.texts import route_text, schedule_text
from envs.travel.local_checks import FAMILIES
from envs.travel.routes import Route
from envs.travel.solver import TravelSolver

__all__ = ["SolverTeacher"]


class SolverTeacher:
    """The solver's answer to any choice of a flow on one query (see the module docstring); a
    ``ValueError`` when the solver finds no plan."""

    def __init__(self, env, query):
        q = env.get_query(query)
        res = TravelSolver(env.index).solve(q)
        if res is None:
            raise ValueError(f"query {q.id}: the solver found no plan to demonstrate")
        self.query = q
        route = Route(q.org, tuple(res.cities), tuple(res.move_days), q.days)
        modes = {str(d.get("transportation", "")).split(",")[0].split(":")[0].strip() for d in res.plan}
        family = next((name for name, fam in FAMILIES.items() if any(m.startswith(tuple(fam)) for m in modes)),
                      None)
        targets = {route_text(res.cities), schedule_text(route)}
        if family:
            targets.add(family)
        for day in res.plan:
            for key, value in day.items():
                if key in ("days", "current_city") or not isinstance(value, str):
                    continue
                targets.update(v.strip() for v in (value.split(";") if key == "attraction" else [value]) if v.strip())
        targets.discard("-")
        self.targets = targets

    def pick(self, options: Sequence[str]) -> str:
        """The option the solver's plan holds, else the first (cheapest / default) one."""
        for o in options:
            if o in self.targets:
                return o
        for o in options:  # MTP's deliverer: the itinerary as the executors chose it, when it fits
            if o.startswith("as chosen"):
                return o
        return options[0]
