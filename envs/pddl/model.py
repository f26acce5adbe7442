"""The pddl env's own picture of a STRIPS domain and problem: plain frozen data, lower-case names (PDDL is
case-insensitive), read from files by :mod:`envs.pddl.parsing` and written back by :mod:`envs.pddl.writing`.

An atom is a tuple ``(predicate, arg, ...)``; a schema's arguments are variables (``?x``) or constants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

Atom = tuple[str, ...]
ROOT_TYPE = "object"
SUPPORTED_REQUIREMENTS = ("strips", "typing", "negative-preconditions", "equality")
"""The ``:requirements`` the env implements; any other is refused, named (``envs.pddl.parsing``)."""


@dataclass(frozen=True)
class Literal:
    """A precondition or goal literal: ``(pred args)`` or its negation; ``pred == "="`` is equality."""

    pred: str
    args: tuple[str, ...]
    positive: bool = True

    def text(self) -> str:
        inner = f"({' '.join((self.pred, *self.args))})"
        return inner if self.positive else f"(not {inner})"


@dataclass(frozen=True)
class ActionSchema:
    """A lifted action: typed parameters (``either`` types as several), preconditions, add and delete lists."""

    name: str
    params: tuple[tuple[str, tuple[str, ...]], ...]
    pre: tuple[Literal, ...]
    add: tuple[Atom, ...]
    delete: tuple[Atom, ...]


@dataclass(frozen=True)
class Domain:
    """A STRIPS domain (``types``: child -> parent, the root ``object`` implicit)."""

    name: str
    requirements: tuple[str, ...]
    types: dict[str, str]
    constants: dict[str, str]
    predicates: dict[str, tuple[tuple[str, ...], ...]]
    actions: tuple[ActionSchema, ...]
    path: Path | None = field(default=None, compare=False)
    text: str | None = field(default=None, compare=False, repr=False)

    def action(self, name: str) -> ActionSchema | None:
        return next((a for a in self.actions if a.name == name), None)

    def subtypes(self, t: str) -> set[str]:
        """``t`` and every type below it."""
        out, changed = {t}, True
        while changed:
            new = {c for c, p in self.types.items() if p in out} - out
            out |= new
            changed = bool(new)
        return out

    def is_a(self, t: str, want: tuple[str, ...]) -> bool:
        """Whether an object of type ``t`` fits a parameter typed ``want`` (one of them)."""
        chain, seen = t, set()
        while chain is not None and chain not in seen:
            if chain in want:
                return True
            seen.add(chain)
            chain = self.types.get(chain, ROOT_TYPE if chain != ROOT_TYPE else None)
        return ROOT_TYPE in want


@dataclass(frozen=True)
class Problem:
    """A problem: typed objects (in their written order), the initial atoms and the goal literals."""

    name: str
    domain_name: str
    objects: dict[str, str]
    init: frozenset[Atom]
    goal: tuple[Literal, ...]
    path: Path | None = field(default=None, compare=False)
    text: str | None = field(default=None, compare=False, repr=False)


def natural_key(name: str) -> tuple:
    """``b2`` before ``b10``: how objects are ordered where their order is not written."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def atom_text(atom: Atom) -> str:
    return f"({' '.join(atom)})"
