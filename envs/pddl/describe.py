"""Natural-language renderings of a problem's initial state and goal (a task's ``description``) and of a
domain's actions (the planner's instructions).

:data:`RENDERERS` maps a domain to its template by the predicates it declares: Blocksworld's in
PlanBench's style of wording ("As initial conditions I have that, the hand is empty, block a is clear,
...  My goal is to have that block a is on top of block b."); any other domain (a renamed one included)
gets the generic rendering from its predicate names (``(at p0 l1-0)`` -> "p0 at l1-0").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from envs.pddl.model import Atom, Domain, Literal, Problem, natural_key

BLOCKS_PREDICATES = ("clear", "on-table", "arm-empty", "holding", "on")


def _sorted(atoms: Iterable[Atom]) -> list[Atom]:
    return sorted(atoms, key=lambda a: (a[0], *(natural_key(x) for x in a[1:])))


def blocks_fact(atom: Atom) -> str:
    pred, *args = atom
    return {"clear": "block {0} is clear", "on-table": "block {0} is on the table", "arm-empty": "the hand is empty",
            "holding": "the hand is holding block {0}", "on": "block {0} is on top of block {1}"}[pred].format(*args)


def generic_fact(atom: Atom) -> str:
    pred, *args = atom
    words = pred.replace("-", " ").replace("_", " ")
    if not args:
        return words
    if len(args) == 1:
        return f"{args[0]} is {words}"
    return f"{args[0]} {words} {' '.join(args[1:])}"


def _literal(fact: Callable[[Atom], str], lit: Literal) -> str:
    if lit.pred == "=":
        return f"{lit.args[0]} is {'' if lit.positive else 'not '}{lit.args[1]}"
    text = fact((lit.pred, *lit.args))
    return text if lit.positive else f"it is not the case that {text}"


def _join(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def render(domain: Domain, problem: Problem) -> str:
    """The task's description: the initial state, then the goal, in natural language."""
    fact = RENDERERS.get(tuple(domain.predicates), generic_fact)
    first = [a for a in _sorted(problem.init) if a[0] == "arm-empty"] if fact is blocks_fact else []
    init = first + [a for a in _sorted(problem.init) if a not in first]
    objects = ", ".join(problem.objects)
    return (f"Objects: {objects}. As initial conditions I have that, {_join([fact(a) for a in init])}. "
            f"My goal is to have that {_join([_literal(fact, g) for g in problem.goal])}.")


RENDERERS: dict[tuple[str, ...], Callable[[Atom], str]] = {BLOCKS_PREDICATES: blocks_fact}
"""A domain's declared predicates (in order) -> how one of its atoms reads; others: :func:`generic_fact`."""


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
