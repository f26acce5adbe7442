"""Read PDDL files with the ``pddl`` package (MIT; a strict LALR parser on ``lark``) into the env's own
model (:mod:`envs.pddl.model`), checking what the parser leaves unchecked: every requirement is one the env
implements (:data:`~envs.pddl.model.SUPPORTED_REQUIREMENTS`), predicates exist with their arity, variables
are parameters, objects fit the types of the predicates they appear in. Every failure is one line naming
the file, the line and what was expected (:mod:`envs.pddl.errors`).

One parser object of each kind is built once, on first use (importing and building them takes ~0.7 s here:
``lark``'s tables); a parse then takes ~1 ms for a Blocksworld problem, ~5 ms for a domain.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from envs.pddl.errors import PddlSemanticError, PddlSyntaxError, UnsupportedRequirement, line_of, where
from envs.pddl.model import (
    ROOT_TYPE,
    SUPPORTED_REQUIREMENTS,
    ActionSchema,
    Atom,
    Domain,
    Literal,
    Problem,
    natural_key,
)


@functools.cache
def _parsers():
    # deferred: importing the parsers takes ~0.2 s and building them ~0.5 s (lark's tables); config checks skip it
    from pddl.parser.domain import DomainParser  # deferred (see above)
    from pddl.parser.problem import ProblemParser  # deferred (see above)

    return DomainParser(), ProblemParser()


def _syntax_error(e: Exception, path, text: str) -> PddlSyntaxError:
    """One line from a ``lark`` / ``pddl`` exception: file, line, what was found and what was expected."""
    line = getattr(e, "line", None)
    if line is not None and line > 0:
        expected = sorted(getattr(e, "expected", None) or getattr(e, "allowed", None) or [])
        token = getattr(e, "token", None)
        found = f"found {str(token)!r}" if token is not None else f"found {getattr(e, 'char', '?')!r}"
        if token is not None and getattr(token, "type", "") == "$END":
            found = "the file ends"
        want = ", ".join(x.lower().replace("_", "-") for x in expected[:8]) or "something else"
        return PddlSyntaxError(f"{where(path, line)}: {found}; expected one of: {want}")
    message = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return PddlSyntaxError(f"{where(path, None)}: {message}")


def _read(path) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise PddlSemanticError(f"{path}: cannot read the file ({e.strerror or e})") from None


def _parse(kind: int, text: str, path):
    try:
        return _parsers()[kind](text)
    except Exception as e:  # lark's and pddl's exceptions have no common base beyond Exception
        raise _syntax_error(e, path, text) from None


def _order(names, text: str | None, prefix: str = "(") -> list[str]:
    """``names`` in the order they are written in ``text`` (after ``prefix``), unwritten ones last."""
    def key(n):
        m = re.search(rf"{re.escape(prefix)}\s*{re.escape(n)}(?![\w-])", text or "", re.IGNORECASE)
        return (m.start() if m else 1 << 60, natural_key(n))
    return sorted(names, key=key)


def _term(t) -> str:
    name = t.name.lower()
    return f"?{name}" if type(t).__name__ == "Variable" else name


def _literals(formula, path, text, what: str) -> list[Literal]:
    """A conjunction of (negated) atoms and equalities, flattened."""
    kind = type(formula).__name__
    if formula is None:
        return []
    if kind == "And":
        return [x for op in formula.operands for x in _literals(op, path, text, what)]
    if kind == "Predicate":
        return [Literal(formula.name.lower(), tuple(_term(t) for t in formula.terms))]
    if kind == "EqualTo":
        return [Literal("=", (_term(formula.left), _term(formula.right)))]
    if kind == "Not":
        inner = _literals(formula.argument, path, text, what)
        if len(inner) == 1:
            return [Literal(inner[0].pred, inner[0].args, not inner[0].positive)]
    raise UnsupportedRequirement(f"{where(path, None)}: {what} uses {kind.lower()} ({formula}); the pddl env "
                                 f"reads STRIPS conjunctions of literals only (:{', :'.join(SUPPORTED_REQUIREMENTS)})")


def _check_requirements(requirements, path, text) -> tuple[str, ...]:
    names = tuple(sorted(str(r).lstrip(":").lower() for r in requirements))
    for r in names:
        if r not in SUPPORTED_REQUIREMENTS:
            raise UnsupportedRequirement(f"{where(path, line_of(text, ':' + r))}: requirement :{r} is not supported "
                                         f"by the pddl env (it implements :{', :'.join(SUPPORTED_REQUIREMENTS)})")
    return names


def _tags(tags) -> tuple[str, ...]:
    return tuple(sorted(t.lower() for t in tags)) or (ROOT_TYPE,)


def read_domain(path: str | Path | None = None, text: str | None = None) -> Domain:
    """The domain of a file (or of ``text``; ``path`` then only names it in errors)."""
    text = _read(path) if text is None else text
    d = _parse(0, text, path)
    requirements = _check_requirements(d.requirements, path, text)
    types = {str(k).lower(): (str(v).lower() if v is not None else ROOT_TYPE) for k, v in d.types.items()}
    types.pop(ROOT_TYPE, None)
    predicates = {}
    for p in _order([p.name.lower() for p in d.predicates], text):
        lifted = next(q for q in d.predicates if q.name.lower() == p)
        predicates[p] = tuple(_tags(t.type_tags) for t in lifted.terms)
    constants = {c.name.lower(): (c.type_tag or ROOT_TYPE).lower() for c in d.constants}
    actions = []
    for name in _order([a.name.lower() for a in d.actions], text, "(:action"):
        a = next(x for x in d.actions if x.name.lower() == name)
        params = tuple((v.name.lower(), _tags(v.type_tags)) for v in a.parameters)
        pre = tuple(_literals(a.precondition, path, text, f"action {name}'s precondition"))
        effects = _literals(a.effect, path, text, f"action {name}'s effect")
        if any(e.pred == "=" for e in effects):
            raise PddlSemanticError(f"{where(path, line_of(text, name, '(:action'))}: action {name} has an "
                                    "equality as an effect; expected atoms and negated atoms")
        schema = ActionSchema(name, params, pre, tuple((e.pred, *e.args) for e in effects if e.positive),
                              tuple((e.pred, *e.args) for e in effects if not e.positive))
        _check_schema(schema, predicates, constants, path, text)
        actions.append(schema)
    return Domain(d.name.lower(), requirements, types, constants, predicates, tuple(actions), path and Path(path), text)


def _check_schema(a: ActionSchema, predicates, constants, path, text) -> None:
    variables = {f"?{v}" for v, _ in a.params}
    for lit in (*a.pre, *(Literal(x[0], x[1:]) for x in a.add + a.delete)):
        line = line_of(text, lit.pred, f"(:action {a.name}")
        if lit.pred != "=" and lit.pred not in predicates:
            raise PddlSemanticError(f"{where(path, line)}: action {a.name} uses the undeclared predicate {lit.pred!r}; "
                                    f"expected one of {', '.join(predicates) or '(none declared)'}")
        arity = 2 if lit.pred == "=" else len(predicates[lit.pred])
        if len(lit.args) != arity:
            raise PddlSemanticError(f"{where(path, line)}: action {a.name}: {lit.text()} has {len(lit.args)} "
                                    f"argument(s); expected {arity}")
        for arg in lit.args:
            if arg.startswith("?") and arg not in variables or not arg.startswith("?") and arg not in constants:
                raise PddlSemanticError(f"{where(path, line)}: action {a.name}: {lit.text()} names {arg!r}, which is "
                                        f"not a parameter ({', '.join(sorted(variables))}) or a constant")


def read_problem(domain: Domain, path: str | Path | None = None, text: str | None = None) -> Problem:
    """The problem of a file, checked against ``domain``: its name, objects' types, atoms and goal."""
    text = _read(path) if text is None else text
    p = _parse(1, text, path)
    _check_requirements(p.requirements, path, text)
    if p.domain_name.lower() != domain.name:
        raise PddlSemanticError(f"{where(path, line_of(text, ':domain'))}: the problem is for domain "
                                f"{p.domain_name.lower()!r}; expected {domain.name!r}")
    known = {ROOT_TYPE, *domain.types}
    objects = {}
    for o in _order([o.name.lower() for o in p.objects], text, ""):
        t = (next(x for x in p.objects if x.name.lower() == o).type_tag or ROOT_TYPE).lower()
        if t not in known:
            raise PddlSemanticError(f"{where(path, line_of(text, o, ':objects'))}: object {o!r} has the type {t!r}, "
                                    f"which domain {domain.name!r} does not declare; expected one of "
                                    f"{', '.join(sorted(known))}")
        objects[o] = t
    every = {**domain.constants, **objects}
    init = frozenset(_ground(Literal(a.name.lower(), tuple(_term(t) for t in a.terms)), domain, every, path, text,
                             ":init")
                     for a in p.init if type(a).__name__ == "Predicate")
    others = [a for a in p.init if type(a).__name__ != "Predicate"]
    if others:
        raise UnsupportedRequirement(f"{where(path, line_of(text, ':init'))}: the initial state holds {others[0]}; "
                                     "expected atoms only (no fluents)")
    goal = tuple(_literals(p.goal, path, text, "the goal"))
    for lit in goal:
        _ground(lit, domain, every, path, text, ":goal")
    return Problem(p.name.lower(), domain.name, objects, init, goal, path and Path(path), text)


def _ground(lit: Literal, domain: Domain, every: dict[str, str], path, text, section: str) -> Atom:
    """A ground literal's atom, checked: known predicate, arity, objects that exist and fit their types."""
    line = line_of(text, lit.pred, section)
    if lit.pred == "=":
        types = ((ROOT_TYPE,), (ROOT_TYPE,))
    elif lit.pred not in domain.predicates:
        raise PddlSemanticError(f"{where(path, line)}: {lit.text()} uses the undeclared predicate {lit.pred!r}; "
                                f"expected one of {', '.join(domain.predicates)}")
    else:
        types = domain.predicates[lit.pred]
    if len(lit.args) != len(types):
        raise PddlSemanticError(f"{where(path, line)}: {lit.text()} has {len(lit.args)} argument(s); "
                                f"expected {len(types)}")
    for i, (arg, want) in enumerate(zip(lit.args, types), 1):
        if arg not in every:
            raise PddlSemanticError(f"{where(path, line)}: {lit.text()} names {arg!r}, which is not an object of "
                                    "the problem or a constant of the domain")
        if not domain.is_a(every[arg], want):
            raise PddlSemanticError(f"{where(path, line)}: {lit.text()}: object {arg!r} of type {every[arg]!r} does "
                                    f"not fit argument {i} of {lit.pred} (type {' or '.join(want)})")
    return (lit.pred, *lit.args)
