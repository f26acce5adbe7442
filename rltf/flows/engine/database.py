"""The shared database of a flow: nested values under dotted keys, and ``$db.key$`` placeholders.

Every node of a flow reads and writes one :class:`Database` (AgentKit's ``DB``): the caller puts
the task in before a pass (``db["task"] = ...``), after-query functions write what they parsed
(``db["plan.day1"] = ...``) and prompts read values back through placeholders such as
``$db.plan.day1$``. Keys are dotted paths into nested dicts (a purely numeric part indexes a list:
``$db.days.0$``), so a node can store a structured answer once and later prompts quote any part.

Writes made through the Database API during one after-query are journaled, so a retried attempt
(:class:`rltf.flows.engine.flow.NodeRetry`) leaves the database exactly as it found it; in-place
mutation of an object read from the database is not journaled (write the new value back instead).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["PLACEHOLDER", "Database", "PlaceholderError", "placeholders", "render_value"]

PLACEHOLDER = re.compile(r"\$db\.([A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*)\$")
"""``$db.a.b$``: a dotted key of letters, digits, ``_`` and ``-`` (AgentKit's ``$db.action_summary.plan-sketch$``)."""

_MISSING = object()


class PlaceholderError(KeyError):
    """A ``$db.key$`` placeholder (or a dotted key) that names no value in the database."""

    def __str__(self) -> str:  # KeyError would print the repr of its message
        return str(self.args[0]) if self.args else ""


def placeholders(text: str) -> list[str]:
    """The dotted keys of the ``$db.key$`` placeholders in ``text``, in order of appearance."""
    return [m.group(1) for m in PLACEHOLDER.finditer(text)]


def render_value(value: Any) -> str:
    """How a database value appears in a prompt: strings as they are, anything else as JSON
    (so a dict written by one node reads back unambiguously in another node's prompt)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _parts(key: str) -> list[str]:
    if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
        raise KeyError(f"bad database key {key!r}: expected a dotted path such as 'plan.day1'")
    return key.split(".")


def _child(obj: Any, part: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(part, _MISSING)
    if isinstance(obj, (list, tuple)) and part.lstrip("-").isdigit():
        i = int(part)
        return obj[i] if -len(obj) <= i < len(obj) else _MISSING
    return _MISSING


class Database:
    """Nested values under dotted keys (see the module docstring). ``db["a.b"]`` reads,
    ``db["a.b"] = v`` writes (creating the intermediate dicts), ``del db["a.b"]`` deletes."""

    def __init__(self, data: Mapping[str, Any] | None = None):
        self._data: dict[str, Any] = {}
        self._journal: list[tuple[list[str], Any]] | None = None
        for k, v in (data or {}).items():
            self.set(k, v)

    # ---------------------------------------------------------------------------- reading
    def get(self, key: str, default: Any = None) -> Any:
        """The value at a dotted key, ``default`` when there is none."""
        obj: Any = self._data
        for part in _parts(key):
            obj = _child(obj, part)
            if obj is _MISSING:
                return default
        return obj

    def __getitem__(self, key: str) -> Any:
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise PlaceholderError(f"the database has no value at {key!r} (top-level keys: {sorted(self._data)})")
        return v

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _MISSING) is not _MISSING

    def keys(self) -> list[str]:
        return list(self._data)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._data))

    def __len__(self) -> int:
        return len(self._data)

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the whole database (for traces and snapshots)."""
        try:
            return copy.deepcopy(self._data)
        except Exception:  # noqa: BLE001 - values that cannot be copied (open handles...): a shallow copy will do
            return dict(self._data)

    # ---------------------------------------------------------------------------- writing
    def set(self, key: str, value: Any) -> None:
        """Write ``value`` at a dotted key, creating intermediate dicts (a non-dict in the way is an error)."""
        parts = _parts(key)
        obj: Any = self._data
        for i, part in enumerate(parts[:-1]):
            nxt = obj.get(part, _MISSING)
            if nxt is _MISSING:
                self._log(parts[: i + 1], _MISSING)
                obj[part] = nxt = {}
            elif not isinstance(nxt, dict):
                raise KeyError(f"cannot write {key!r}: {'.'.join(parts[: i + 1])!r} holds a "
                               f"{type(nxt).__name__}, not a dict")
            obj = nxt
        self._log(parts, obj.get(parts[-1], _MISSING))
        obj[parts[-1]] = value

    __setitem__ = set

    def update(self, values: Mapping[str, Any]) -> None:
        for k, v in values.items():
            self.set(k, v)

    def delete(self, key: str) -> None:
        """Remove the value at a dotted key (a missing key is a :class:`PlaceholderError`)."""
        parts = _parts(key)
        parent = self._data if len(parts) == 1 else self.get(".".join(parts[:-1]), _MISSING)
        if not isinstance(parent, dict) or parts[-1] not in parent:
            raise PlaceholderError(f"the database has no value at {key!r}")
        self._log(parts, parent[parts[-1]])
        del parent[parts[-1]]

    __delitem__ = delete

    # ------------------------------------------------------------------------ placeholders
    def fill(self, text: str, *, where: str = "a prompt") -> str:
        """``text`` with every ``$db.key$`` replaced by :func:`render_value` of its value; a key
        with no value is a :class:`PlaceholderError` naming it and ``where`` (e.g. the node)."""

        def sub(m: re.Match) -> str:
            v = self.get(m.group(1), _MISSING)
            if v is _MISSING:
                raise PlaceholderError(f"{where}: placeholder {m.group(0)} names no database value "
                                       f"(top-level keys: {sorted(self._data)})")
            return render_value(v)

        return PLACEHOLDER.sub(sub, text)

    # ---------------------------------------------------------------------------- journal
    def _log(self, parts: list[str], old: Any) -> None:
        if self._journal is not None:
            self._journal.append((list(parts), old))

    def begin(self) -> None:
        """Start journaling writes (the engine calls it before an after-query)."""
        self._journal = []

    def commit(self) -> None:
        """Keep the journaled writes."""
        self._journal = None

    def rollback(self) -> None:
        """Undo every write since :meth:`begin` (the engine calls it when an attempt is retried)."""
        journal, self._journal = self._journal or [], None
        for parts, old in reversed(journal):
            parent: Any = self._data
            for part in parts[:-1]:
                parent = parent[part]
            if old is _MISSING:
                parent.pop(parts[-1], None)
            else:
                parent[parts[-1]] = old

    def __repr__(self) -> str:
        return f"Database({self._data!r})"
