"""A flow's graph: :class:`Node` (a prompt and how to handle its answer), :class:`Edge` (``data`` or
``order``) and the two walks the engine needs: :func:`find_cycle` (name a cycle) and :func:`find_path`
(would this edge close one?)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rltf.flows.backends.base import Choices, Message, Sampling
from rltf.flows.engine.errors import GraphError

__all__ = ["AfterQueryFn", "ComposeFn", "Edge", "EdgeKind", "Node", "find_cycle", "find_path"]

EdgeKind = Literal["data", "order"]

# a node's functions take its NodeContext (rltf.flows.engine.context, which is built on this module): named by
# string only, since importing it here (even under TYPE_CHECKING) would make an import cycle
ComposeFn = Callable[["NodeContext"], list[Message]]  # noqa: F821
AfterQueryFn = Callable[["NodeContext", str], Any]  # noqa: F821
Dynamic = Callable[["NodeContext"], Any]  # noqa: F821


@dataclass
class Node:
    """A prompt and how to handle its answer.

    ``prompt`` may hold ``$db.key$`` placeholders. ``compose(ctx) -> messages`` replaces the
    default composition; ``after_query(ctx, answer) -> value`` parses / validates / writes to the
    database / edits the graph (raise :class:`NodeRetry` to re-query). ``choices`` (a list, or
    ``ctx -> list``): the answer must be one of them (constrained by a backend that supports
    grammars, validated otherwise); ``grammar`` (a constrained_decoding Grammar for the backend's
    tokenizer, or ``ctx -> Grammar``): the answer is decoded from it, the value is its action.
    ``output_key``: the value is also written to ``db[output_key]``. ``system``: a system message
    (default: the flow's). ``sampling`` overrides the backend's; ``max_attempts`` the flow's."""

    name: str
    prompt: str
    compose: ComposeFn | None = None
    after_query: AfterQueryFn | None = None
    choices: Sequence[str] | Dynamic | None = None
    grammar: Any = None
    output_key: str | None = None
    system: str | None = None
    sampling: Sampling | None = None
    max_attempts: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name != self.name.strip():
            raise GraphError(f"a node name must be a non-empty string without surrounding spaces, got {self.name!r}")
        if not isinstance(self.prompt, str):
            raise GraphError(f"node {self.name!r}: prompt must be a string, got {type(self.prompt).__name__}")
        if self.choices is not None and self.grammar is not None:
            raise GraphError(f"node {self.name!r}: give choices or a grammar, not both")
        if self.choices is not None and not callable(self.choices):
            self.choices = Choices(self.choices).options
        if self.max_attempts is not None and self.max_attempts < 1:
            raise GraphError(f"node {self.name!r}: max_attempts={self.max_attempts}, expected at least 1")


@dataclass(frozen=True)
class Edge:
    """``src -> dst``: a ``data`` edge passes ``src``'s prompt and answer to ``dst``; an ``order``
    edge only makes ``src`` go first."""

    src: str
    dst: str
    kind: EdgeKind = "data"

    def __post_init__(self) -> None:
        if self.kind not in ("data", "order"):
            raise GraphError(f"edge {self.src} -> {self.dst}: kind {self.kind!r}, expected 'data' or 'order'")


def find_cycle(nodes: Iterable[str], edges: Iterable[Edge]) -> list[str] | None:
    """A cycle of the graph as ``[a, b, ..., a]``, or None: Kahn's algorithm removes every node
    it can, and a depth-first walk over what is left finds the cycle to name."""
    names = list(nodes)
    succ: dict[str, list[str]] = {n: [] for n in names}
    indeg = dict.fromkeys(names, 0)
    for e in edges:
        succ[e.src].append(e.dst)
        indeg[e.dst] += 1
    ready = [n for n in names if indeg[n] == 0]
    while ready:
        n = ready.pop()
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    left = [n for n in names if indeg[n] > 0]
    if not left:
        return None
    # every node left has a predecessor left: walk predecessors until a node repeats
    pred = {n: [] for n in left}
    for n in left:
        for m in succ[n]:
            if m in pred:
                pred[m].append(n)
    path, seen, n = [], {}, left[0]
    while n not in seen:
        seen[n] = len(path)
        path.append(n)
        n = pred[n][0]
    cycle = path[seen[n]:][::-1]
    first = min(range(len(cycle)), key=lambda i: names.index(cycle[i]))  # start at the earliest-added node
    cycle = cycle[first:] + cycle[:first]
    return cycle + [cycle[0]]


def find_path(edges: Iterable[Edge], start: str, goal: str) -> list[str] | None:
    """A path ``start -> ... -> goal`` along ``edges`` (``[start]`` if they are equal), or None:
    adding ``goal -> start`` would close the cycle ``goal -> start -> ... -> goal``."""
    if start == goal:
        return [start]
    succ: dict[str, list[str]] = {}
    for e in edges:
        succ.setdefault(e.src, []).append(e.dst)
    prev: dict[str, str] = {start: start}
    todo = [start]
    while todo:
        n = todo.pop()
        for m in succ.get(n, ()):
            if m not in prev:
                prev[m] = n
                if m == goal:
                    path = [goal]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return path[::-1]
                todo.append(m)
    return None

