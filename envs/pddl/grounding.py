"""Typed STRIPS grounding: every action schema instantiated over the problem's objects with the types
respected (and equalities decided), its preconditions, add and delete lists as bitsets over the atoms.

A state is a Python ``int`` whose bit ``i`` says atom ``i`` holds; an action applies when
``state & pre == pre and not state & neg`` and leads to ``(state & ~delete) | add`` (PDDL's order:
deletes, then adds). :class:`GroundTask` is what the simulator, the search and the grammar share.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from envs.pddl.model import ROOT_TYPE, Atom, Domain, Problem, atom_text, natural_key


@dataclass(frozen=True, slots=True)
class GroundAction:
    """One ground action: its text ``(name arg ...)`` and its bitsets."""

    name: str
    args: tuple[str, ...]
    pre: int
    neg: int
    add: int
    delete: int
    order: tuple[int, ...] = ()  # the precondition atoms' indices as written (negative ones as ~index)

    @property
    def text(self) -> str:
        return f"({' '.join((self.name, *self.args))})"


@dataclass(eq=False)
class GroundTask:
    """A problem grounded: atoms (bit order), actions (in schema order, then argument order), init and goal."""

    domain: Domain
    problem: Problem
    atoms: list[Atom]
    actions: list[GroundAction]
    init: int
    goal_pos: int
    goal_neg: int
    index: dict[Atom, int] = field(repr=False)
    by_text: dict[str, int] = field(repr=False)
    static_false: int = 0  # atoms no action adds or deletes that are false initially
    relevant: list[int] = field(default_factory=list, repr=False)  # actions whose static preconditions can hold
    _keyed: dict[int, list[int]] | None = field(default=None, repr=False)
    _free: list[int] = field(default_factory=list, repr=False)

    def state_atoms(self, state: int) -> list[Atom]:
        return [a for i, a in enumerate(self.atoms) if state >> i & 1]

    def mask_atoms(self, mask: int) -> list[Atom]:
        return self.state_atoms(mask)

    def goal_reached(self, state: int) -> bool:
        return state & self.goal_pos == self.goal_pos and not state & self.goal_neg

    def goal_fraction(self, state: int) -> float:
        """The fraction of the goal's literals true in ``state``."""
        total = self.goal_pos.bit_count() + self.goal_neg.bit_count()
        true = (state & self.goal_pos).bit_count() + (self.goal_neg & ~state).bit_count()
        return true / total if total else 1.0

    def applicable(self, state: int) -> list[int]:
        """The actions that apply in ``state``, in action order."""
        return sorted(i for i in self.candidates(state) if self._ok(self.actions[i], state))

    def candidates(self, state: int) -> list[int]:
        """A superset of the actions applicable in ``state``: those keyed (by their first precondition atom)
        on an atom of the state, and those without a positive precondition."""
        if self._keyed is None:
            self._keyed, self._free = {}, []
            for i in self.relevant:
                pre = self.actions[i].pre
                if pre:
                    self._keyed.setdefault((pre & -pre).bit_length() - 1, []).append(i)
                else:
                    self._free.append(i)
        out = list(self._free)
        while state:
            low = state & -state
            out += self._keyed.get(low.bit_length() - 1, ())
            state ^= low
        return out

    @staticmethod
    def _ok(a: GroundAction, state: int) -> bool:
        return state & a.pre == a.pre and not state & a.neg

    @property
    def size(self) -> int:
        """The number of objects (what instance sizes count)."""
        return len(self.problem.objects)


def objects_by_type(domain: Domain, objects: dict[str, str]) -> dict[str, list[str]]:
    """Type -> the objects (and constants) of it or its subtypes, in the problem's order."""
    every = {**domain.constants, **objects}
    out: dict[str, list[str]] = {}
    for t in {ROOT_TYPE, *domain.types}:
        below = domain.subtypes(t) if t != ROOT_TYPE else None
        out[t] = [o for o, ot in every.items() if below is None or ot in below]
    return out


def ground(domain: Domain, problem: Problem) -> GroundTask:
    """Every typed grounding of every schema (the syntax grammar's actions) with its bitsets."""
    index: dict[Atom, int] = {}
    atoms: list[Atom] = []

    def bit(atom: Atom) -> int:
        i = index.get(atom)
        if i is None:
            i = index[atom] = len(atoms)
            atoms.append(atom)
        return 1 << i

    for atom in sorted(problem.init, key=lambda a: tuple(natural_key(x) for x in a)):
        bit(atom)
    goal_pos = goal_neg = 0
    for lit in problem.goal:
        if lit.pred == "=":
            continue  # decided by the objects alone (a goal (= a b) is simply true or false)
        if lit.positive:
            goal_pos |= bit((lit.pred, *lit.args))
        else:
            goal_neg |= bit((lit.pred, *lit.args))
    typed = objects_by_type(domain, problem.objects)
    actions: list[GroundAction] = []
    for schema in domain.actions:
        choices = [sorted({o for t in types for o in typed.get(t, [])}, key=list({**domain.constants,
                   **problem.objects}).index) for _, types in schema.params]
        names = [f"?{v}" for v, _ in schema.params]
        for combo in itertools.product(*choices):
            sub = dict(zip(names, combo))
            value = lambda arg: sub.get(arg, arg)  # noqa: E731  (a constant stands for itself)
            pre = neg = 0
            order = []
            possible = True
            for lit in schema.pre:
                args = tuple(value(x) for x in lit.args)
                if lit.pred == "=":
                    if (args[0] == args[1]) != lit.positive:
                        possible = False
                        break
                else:
                    b = bit((lit.pred, *args))
                    order.append(b.bit_length() - 1 if lit.positive else ~(b.bit_length() - 1))
                    pre, neg = (pre | b, neg) if lit.positive else (pre, neg | b)
            if not possible:
                continue
            add = delete = 0
            for atom in schema.add:
                add |= bit((atom[0], *(value(x) for x in atom[1:])))
            for atom in schema.delete:
                delete |= bit((atom[0], *(value(x) for x in atom[1:])))
            actions.append(GroundAction(schema.name, tuple(combo), pre, neg, add, delete, tuple(order)))
    init = sum(1 << index[a] for a in problem.init)
    changed = 0
    for a in actions:
        changed |= a.add | a.delete
    static_false = ((1 << len(atoms)) - 1) & ~changed & ~init
    relevant = [i for i, a in enumerate(actions) if not a.pre & static_false]
    by_text = {a.text: i for i, a in enumerate(actions)}
    return GroundTask(domain, problem, atoms, actions, init, goal_pos, goal_neg, index, by_text, static_false,
                      relevant)


ACTION_RE = re.compile(r"\(([^()]*)\)")


def normalise_action(text: str) -> str:
    """``( Pick-Up  A )`` -> ``(pick-up a)``: how plan texts are compared."""
    inner = text.strip()
    if inner.startswith("(") and inner.endswith(")"):
        inner = inner[1:-1]
    return f"({' '.join(inner.lower().split())})"


def split_plan_text(text: str) -> list[str]:
    """The actions of a plan text: every ``( ... )`` group, comments (``;`` to the end of a line) dropped."""
    body = "\n".join(line.split(";", 1)[0] for line in str(text).splitlines())
    return [normalise_action(m.group(0)) for m in ACTION_RE.finditer(body)]


def describe_atoms(atoms: list[Atom]) -> str:
    return ", ".join(atom_text(a) for a in atoms)
