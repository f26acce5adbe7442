"""PDDL text of the env's model (:mod:`envs.pddl.model`): what the generators and the renaming write."""

from __future__ import annotations

from envs.pddl.model import ROOT_TYPE, Domain, Literal, Problem, atom_text, natural_key


def _typed(names: dict[str, str], typing: bool) -> str:
    if not typing:
        return " ".join(names)
    groups: dict[str, list[str]] = {}
    for n, t in names.items():
        groups.setdefault(t, []).append(n)
    return " ".join(f"{' '.join(ns)} - {t}" for t, ns in groups.items())


def _params(params, typing: bool) -> str:
    def one(v, types):
        t = types[0] if len(types) == 1 else f"(either {' '.join(types)})"
        return f"?{v} - {t}" if typing and types != (ROOT_TYPE,) else f"?{v}"
    return " ".join(one(v, ts) for v, ts in params)


def _conj(literals: list[str]) -> str:
    if len(literals) == 1:
        return literals[0]
    return "(and " + " ".join(literals) + ")" if literals else "(and)"


def domain_text(d: Domain) -> str:
    typing = "typing" in d.requirements
    lines = [f"(define (domain {d.name})", f"  (:requirements {' '.join(':' + r for r in d.requirements)})"]
    if typing and d.types:
        lines.append(f"  (:types {_typed(dict(d.types), True)})")
    if d.constants:
        lines.append(f"  (:constants {_typed(d.constants, typing)})")
    preds = " ".join(f"({p}{' ' if ts else ''}{_params([(f'x{i}', t) for i, t in enumerate(ts)], typing)})"
                     for p, ts in d.predicates.items())
    lines.append(f"  (:predicates {preds})")
    for a in d.actions:
        effects = [atom_text(x) for x in a.add] + [f"(not {atom_text(x)})" for x in a.delete]
        lines += [f"  (:action {a.name}", f"    :parameters ({_params(a.params, typing)})",
                  f"    :precondition {_conj([lit.text() for lit in a.pre])}", f"    :effect {_conj(effects)})"]
    return "\n".join(lines) + ")\n"


def problem_text(p: Problem, typing: bool = True) -> str:
    init = sorted(p.init, key=lambda a: (a[0], *(natural_key(x) for x in a[1:])))
    return "\n".join([
        f"(define (problem {p.name})", f"  (:domain {p.domain_name})",
        f"  (:objects {_typed(p.objects, typing)})",
        "  (:init " + " ".join(atom_text(a) for a in init) + ")",
        f"  (:goal {_conj([lit.text() for lit in p.goal])}))", ""])


def goal_of(atoms) -> tuple[Literal, ...]:
    return tuple(Literal(a[0], tuple(a[1:])) for a in atoms)
