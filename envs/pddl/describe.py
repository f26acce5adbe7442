"""Natural-language renderings of a problem's initial state and goal (a task's ``description``) and of a
domain's actions (the planner's instructions).

:data:`TEMPLATES` maps a domain to its template by the predicates it declares (names and order, as the
shipped domain files declare them): Blocksworld's in PlanBench's style of wording ("As initial conditions
I have that, the hand is empty, block a is clear, ...  My goal is to have that block a is on top of block
b."), Logistics' ("location l0-1 is in city c0, truck t0 is at airport l0-0, package p0 is in airplane
a0") and Depots' ("crate0 is on pallet0, hoist0 is lifting crate1, truck0 is at distributor1"). An object
is named with its type in front unless its name starts with it (``truck t0`` but ``truck0``). Any other
domain gets the generic rendering from its predicate names (``(at p0 l1-0)`` -> "p0 at l1-0"): a renamed
domain (Mystery Blocksworld, a domain handed in other names) declares other predicates, so it reads in its
own names, and nothing of the original meaning shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from envs.pddl.model import ROOT_TYPE, Atom, Domain, Literal, Problem, natural_key

Fact = Callable[[Atom, Mapping[str, str]], str]
"""How one atom reads, given the problem's object -> type."""

BLOCKS_PREDICATES = ("clear", "on-table", "arm-empty", "holding", "on")
LOGISTICS_PREDICATES = ("in-city", "at", "in")
DEPOTS_PREDICATES = ("at", "on", "in", "lifting", "available", "clear")


def _sorted(atoms: Iterable[Atom], first: tuple[str, ...] = ()) -> list[Atom]:
    """Atoms of the predicates in ``first`` in that order, then the others by name; arguments naturally."""
    rank = {p: i for i, p in enumerate(first)}
    return sorted(atoms, key=lambda a: (rank.get(a[0], len(rank)), a[0], *(natural_key(x) for x in a[1:])))


def named(obj: str, types: Mapping[str, str]) -> str:
    """``truck t0``: the object with its type in front, unless its name starts with it (``truck0``)."""
    t = types.get(obj, ROOT_TYPE)
    return obj if t == ROOT_TYPE or obj.startswith(t) else f"{t} {obj}"


def blocks_fact(atom: Atom, types: Mapping[str, str] | None = None) -> str:
    pred, *args = atom
    return {"clear": "block {0} is clear", "on-table": "block {0} is on the table", "arm-empty": "the hand is empty",
            "holding": "the hand is holding block {0}", "on": "block {0} is on top of block {1}"}[pred].format(*args)


def logistics_fact(atom: Atom, types: Mapping[str, str]) -> str:
    pred, *args = atom
    a = [named(x, types) for x in args]
    return {"in-city": "{0} is in city {3}", "at": "{0} is at {1}", "in": "{0} is in {1}"}[pred].format(*a, *args)


def depots_fact(atom: Atom, types: Mapping[str, str]) -> str:
    pred, *args = atom
    a = [named(x, types) for x in args]
    return {"at": "{0} is at {1}", "on": "{0} is on {1}", "in": "{0} is in {1}", "lifting": "{0} is lifting {1}",
            "available": "{0} is available", "clear": "{0} is clear"}[pred].format(*a)


def generic_fact(atom: Atom, types: Mapping[str, str] | None = None) -> str:
    pred, *args = atom
    words = pred.replace("-", " ").replace("_", " ")
    if not args:
        return words
    if len(args) == 1:
        return f"{args[0]} is {words}"
    return f"{args[0]} {words} {' '.join(args[1:])}"


@dataclass(frozen=True)
class Template:
    """How a domain's atoms read, and which predicates its initial state lists first (in that order)."""

    fact: Fact
    first: tuple[str, ...] = ()


GENERIC = Template(generic_fact)


def _literal(template: Template, lit: Literal, types: Mapping[str, str]) -> str:
    if lit.pred == "=":
        return f"{lit.args[0]} is {'' if lit.positive else 'not '}{lit.args[1]}"
    text = template.fact((lit.pred, *lit.args), types)
    return text if lit.positive else f"it is not the case that {text}"


def _join(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def template_of(domain: Domain) -> Template:
    return TEMPLATES.get(tuple(domain.predicates), GENERIC)


def render(domain: Domain, problem: Problem) -> str:
    """The task's description: the initial state, then the goal, in natural language."""
    template = template_of(domain)
    types = problem.objects
    init = [template.fact(a, types) for a in _sorted(problem.init, template.first)]
    objects = ", ".join(problem.objects)
    return (f"Objects: {objects}. As initial conditions I have that, {_join(init)}. "
            f"My goal is to have that {_join([_literal(template, g, types) for g in problem.goal])}.")


TEMPLATES: dict[tuple[str, ...], Template] = {
    BLOCKS_PREDICATES: Template(blocks_fact, ("arm-empty",)),
    LOGISTICS_PREDICATES: Template(logistics_fact, LOGISTICS_PREDICATES),
    DEPOTS_PREDICATES: Template(depots_fact, DEPOTS_PREDICATES),
}
"""A domain's declared predicates (in order) -> its template; others: :data:`GENERIC`."""


def instructions(domain: Domain) -> str:
    """The domain's actions with their parameters, preconditions and effects, and the plan format."""
    lines = [f"You are planning in the {domain.name} domain. Its actions:"]
    for a in domain.actions:
        params = " ".join(f"?{v}" for v, _ in a.params)
        pre = ", ".join(x.text() for x in a.pre) or "nothing"
        add = ", ".join(f"({' '.join(x)})" for x in a.add) or "nothing"
        delete = ", ".join(f"({' '.join(x)})" for x in a.delete) or "nothing"
        lines.append(f"({a.name}{' ' if params else ''}{params}): needs {pre}; makes true {add}; "
                     f"makes false {delete}.")
    lines.append("Write the plan as ground actions in parentheses, one after another separated by a space, "
                 "e.g. (" + " ".join([domain.actions[0].name, *("x" for _ in domain.actions[0].params)]) + ").")
    return "\n".join(lines)
