"""A registry: the names a config key accepts, each mapped to what it runs.

A config key that picks an algorithm (``rltf.baseline: rloo``) reads its allowed values from the
registry of that algorithm (:meth:`Registry.names`: the ``Literal`` of the config field, so the
config's check, its help text and its "expected one of" errors list exactly the registered names),
and the code that runs it looks the name up (:meth:`Registry.lookup`) instead of branching on it. An
entry is a plain callable, or a small frozen spec holding the callable and the properties the config
checks need (a group baseline needs ``k_samples >= 2``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Name -> entry, in registration order; read-only once built. ``what`` names the config key in
    errors (``rltf.baseline``)."""

    def __init__(self, what: str, entries: Mapping[str, T]):
        self.what = what
        self._entries = dict(entries)

    def names(self) -> tuple[str, ...]:
        """The registered names, in order (a config field's ``Literal[registry.names()]``)."""
        return tuple(self._entries)

    def lookup(self, name: str) -> T:
        """The entry of ``name``; an unknown name raises a ``ValueError`` listing the registered ones."""
        if isinstance(name, str) and name in self._entries:
            return self._entries[name]
        raise ValueError(f"unknown {self.what} {name!r}; expected one of {', '.join(self.names())}")

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {list(self._entries)})"
