"""Which known domain a handed domain file renames, and how: the renaming found by matching the two
domains' structure, or a renaming file checked against it.

A renaming changes names only (:class:`envs.pddl.renaming.Renaming`: predicates, actions, types), never
the order of arguments, so two domains match when there are bijections of their predicates, actions and
types under which every predicate keeps its arity and argument types, every type its parent, and every
action its parameters' types and its precondition, add and delete lists, atom for atom, with arguments
read as the positions of the action's parameters (variable names are free). The search runs over
predicates first (candidates share arity and the pattern of their uses in the actions), then actions,
then types. Exactly one matching of predicates and actions must exist: none, or more than one, is
refused in one line naming what did not match or the alternatives. Types that nothing in the domain
tells apart (Depots' ``depot`` and ``distributor``) are matched by equal name where one exists, else in
the order they are declared.

:func:`find_renaming` tries the domains the generators know (the shipped domain files) and returns the one
the handed domain renames with the renaming: generated instances renamed by it are in the handed
domain's names (:mod:`envs.pddl.instances`).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator

from envs.pddl.errors import PddlSemanticError
from envs.pddl.model import ROOT_TYPE, ActionSchema, Domain
from envs.pddl.renaming import Renaming, rename_domain

MAX_MATCHINGS = 10_000
"""Predicate bijections tried before the search gives up (the known domains need a handful)."""


class DomainMismatch(PddlSemanticError):
    """A handed domain that is no renaming of a known one, or is one in more than one way."""


def _args(action: ActionSchema, args: tuple[str, ...]) -> tuple:
    """An atom's arguments as parameter positions (constants by name)."""
    index = {f"?{v}": i for i, (v, _) in enumerate(action.params)}
    return tuple(index[a] if a in index else f"={a}" for a in args)


def _uses(action: ActionSchema) -> list[tuple[str, tuple]]:
    """``(predicate, (role, parameter count, argument positions))`` of every atom of the action."""
    n = len(action.params)
    out = [(lit.pred, ("pre" if lit.positive else "pre-not", n, _args(action, lit.args))) for lit in action.pre]
    out += [(a[0], ("add", n, _args(action, a[1:]))) for a in action.add]
    out += [(a[0], ("delete", n, _args(action, a[1:]))) for a in action.delete]
    return out


def _signatures(domain: Domain) -> dict[str, tuple]:
    """Per predicate: its arity and how the actions use it (invariant under renaming)."""
    uses: dict[str, list] = {p: [] for p in domain.predicates}
    for a in domain.actions:
        for pred, use in _uses(a):
            if pred in uses:
                uses[pred].append(use)
    return {p: (len(domain.predicates[p]), tuple(sorted(map(repr, u)))) for p, u in uses.items()}


def _shape(action: ActionSchema, rename: dict[str, str]) -> tuple:
    """The action with its predicates renamed, parameters by position: what a matched action must equal."""
    roles: dict[str, set] = {"pre": set(), "pre-not": set(), "add": set(), "delete": set()}
    for pred, (role, _, args) in _uses(action):
        roles[role].add((rename.get(pred, pred), args))
    return len(action.params), tuple(frozenset(roles[r]) for r in ("pre", "pre-not", "add", "delete"))


def _bijections(options: dict[str, list[str]]) -> Iterator[dict[str, str]]:
    """Every one-to-one choice of a candidate per key (keys with the fewest candidates first)."""
    keys = sorted(options, key=lambda k: len(options[k]))

    def extend(i: int, chosen: dict[str, str], used: set[str]) -> Iterator[dict[str, str]]:
        if i == len(keys):
            yield dict(chosen)
            return
        for c in options[keys[i]]:
            if c not in used:
                chosen[keys[i]] = c
                used.add(c)
                yield from extend(i + 1, chosen, used)
                used.discard(c)
                del chosen[keys[i]]

    yield from extend(0, {}, set())


def _type_maps(known: Domain, handed: Domain, pairs: set[tuple[str, str]]) -> list[dict[str, str]]:
    """Bijections of the declared types that keep every parent and contain ``pairs`` (known -> handed)."""
    forced: dict[str, str] = {}
    for k, h in pairs:
        if forced.setdefault(k, h) != h:
            return []
    if len(set(forced.values())) != len(forced) or forced.get(ROOT_TYPE, ROOT_TYPE) != ROOT_TYPE:
        return []
    forced.pop(ROOT_TYPE, None)
    if any(h not in handed.types for h in forced.values()) or any(k not in known.types for k in forced):
        return []
    free = [t for t in known.types if t not in forced]
    left = [t for t in handed.types if t not in forced.values()]
    out = []
    # the known domains declare few types: trying the free ones' permutations is cheap
    for perm in itertools.permutations(left, len(free)):
        tau = {**forced, **dict(zip(free, perm))}
        if all(tau.get(known.types[t], known.types[t]) == handed.types[tau[t]] for t in known.types):
            out.append(tau)
        if len(out) > 100:
            break
    return out


def _type_pairs(known: Domain, handed: Domain, pi: dict[str, str], alpha: dict[str, str]) -> set | None:
    """The (known type, handed type) pairs the matched predicates' and actions' arguments force; None when
    an argument has ``either`` types (not in the known domains: not matched)."""
    sides = [(types, handed.predicates[pi[p]]) for p, types in known.predicates.items()]
    sides += [([t for _, t in a.params], [t for _, t in handed.action(alpha[a.name]).params]) for a in known.actions]
    pairs: set[tuple[str, str]] = set()
    for ks, hs in sides:
        for k, h in zip(ks, hs):
            if len(k) != 1 or len(h) != 1:
                return None
            pairs.add((k[0], h[0]))
    return pairs


def _choose_types(known: Domain, handed: Domain, maps: list[dict[str, str]]) -> dict[str, str]:
    """Same name where the handed domain has it, else the declared order (see the module docstring)."""
    order = {t: i for i, t in enumerate(handed.types)}
    return min(maps, key=lambda tau: (sum(k != h for k, h in tau.items() if k in handed.types),
                                      [order[tau[t]] for t in known.types]))


def _counts(known: Domain, handed: Domain) -> str | None:
    typed = ("typing" in known.requirements, "typing" in handed.requirements)
    checks = (("predicates of arities", sorted(map(len, known.predicates.values())),
               sorted(map(len, handed.predicates.values()))),
              ("actions of parameter counts", sorted(len(a.params) for a in known.actions),
               sorted(len(a.params) for a in handed.actions)),
              ("types", len(known.types), len(handed.types)),
              ("constants", len(known.constants), len(handed.constants)))
    if typed[0] != typed[1]:
        return f"{'typed' if typed[1] else 'untyped'} where {known.name} is {'typed' if typed[0] else 'untyped'}"
    for what, k, h in checks:
        if k != h:
            return f"{what} {h} where {known.name} has {k}"
    if known.constants:
        return "constants (a domain with constants is not matched)"
    return None


def match_domain(known: Domain, handed: Domain) -> Renaming:
    """The renaming (predicates, actions, types) that turns ``known`` into ``handed``; raises
    :class:`DomainMismatch` naming what did not match, or the two matchings when there are several."""
    where = handed.path or handed.name
    reason = _counts(known, handed)
    if reason is not None:
        raise DomainMismatch(f"{where}: not a renaming of {known.name}: {reason}")
    mine, theirs = _signatures(known), _signatures(handed)
    options = {p: [q for q in handed.predicates if theirs[q] == mine[p]] for p in known.predicates}
    lonely = [p for p, qs in options.items() if not qs]
    if lonely:
        raise DomainMismatch(f"{where}: not a renaming of {known.name}: no predicate is used as "
                             f"{known.name}'s {', '.join(lonely)} (arity and the actions' uses)")
    found: list[tuple[dict, dict, dict]] = []
    unmatched: Counter = Counter()
    for tried, pi in enumerate(_bijections(options)):
        if tried >= MAX_MATCHINGS:
            raise DomainMismatch(f"{where}: matching it to {known.name} tried {MAX_MATCHINGS} predicate "
                                 "matchings; give the renaming (env.pddl.renaming)")
        shapes = {b.name: _shape(b, {}) for b in handed.actions}
        act_options = {a.name: [n for n, s in shapes.items() if s == _shape(a, pi)] for a in known.actions}
        missing = [a for a, ns in act_options.items() if not ns]
        if missing:
            unmatched.update(missing)
            continue
        for alpha in _bijections(act_options):
            pairs = _type_pairs(known, handed, pi, alpha)
            maps = _type_maps(known, handed, pairs) if pairs is not None else []
            if maps:
                found.append((pi, alpha, _choose_types(known, handed, maps)))
            else:
                unmatched["the types"] += 1
        if len(found) > 1:
            break
    if not found:
        worst = ", ".join(f"'{a}'" if a != "the types" else a for a, _ in unmatched.most_common(3))
        raise DomainMismatch(f"{where}: not a renaming of {known.name}: no matching of the predicates fits "
                             f"{worst or 'the actions'} (preconditions, adds, deletes and parameter types)")
    if len(found) > 1:
        (p1, a1, _), (p2, a2, _) = found[:2]
        diff = [f"{k} -> {p1[k]} or {p2[k]}" for k in p1 if p1[k] != p2[k]]
        diff += [f"{k} -> {a1[k]} or {a2[k]}" for k in a1 if a1[k] != a2[k]]
        raise DomainMismatch(f"{where}: renames {known.name} in more than one way ({'; '.join(diff[:4])}); "
                             "give the renaming (env.pddl.renaming)")
    pi, alpha, tau = found[0]
    return Renaming(*({k: v for k, v in m.items() if k != v} for m in (pi, alpha, {}, tau)))


def renaming_fits(known: Domain, handed: Domain, renaming: Renaming) -> str | None:
    """None when ``known`` renamed by ``renaming`` is ``handed`` (variable names and the order of atoms
    aside), else what differs."""
    renamed = rename_domain(known, renaming)
    if set(renamed.predicates) != set(handed.predicates):
        extra = sorted(set(renamed.predicates) ^ set(handed.predicates))
        return f"the predicates differ ({', '.join(extra[:4])})"
    if renamed.types != handed.types:
        return "the types differ"
    if any(renamed.predicates[p] != handed.predicates[p] for p in renamed.predicates):
        return "the predicates' argument types differ"
    for a in renamed.actions:
        b = handed.action(a.name)
        if b is None:
            return f"no action {a.name}"
        if _shape(a, {}) != _shape(b, {}) or [t for _, t in a.params] != [t for _, t in b.params]:
            return f"action {a.name} differs"
    if len(renamed.actions) != len(handed.actions):
        return "the handed domain has more actions"
    return None


def find_renaming(handed: Domain, known: dict[str, Domain], given: Renaming | None = None) -> tuple[str, Renaming]:
    """``(name, renaming)``: the one known domain ``handed`` renames and how (``given``: the renaming to
    use, checked). One line naming what did not match each known domain otherwise."""
    where = handed.path or handed.name
    fits, why = [], []
    for name, domain in known.items():
        if given is not None:
            reason = renaming_fits(domain, handed, given)
            if reason is None:
                fits.append((name, given))
            else:
                why.append(f"{name}: {reason}")
            continue
        try:
            fits.append((name, match_domain(domain, handed)))
        except DomainMismatch as e:
            why.append(f"{name}: {str(e).split(': not a renaming of ' + domain.name + ': ', 1)[-1]}")
    if len(fits) == 1:
        return fits[0]
    if not fits:
        how = " under the renaming file" if given is not None else ""
        raise DomainMismatch(f"{where}: renames none of the domains the generators know{how} ({'; '.join(why)})")
    raise DomainMismatch(f"{where}: renames more than one known domain ({', '.join(n for n, _ in fits)})")
