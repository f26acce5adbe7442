"""The flow engine: a graph of prompt nodes evaluated in topological order against one backend.

AgentKit's semantics, made explicit and bounded:

*Nodes and edges.* A :class:`Node` is a prompt plus how to handle its answer. An edge
``src -> dst`` is a *data* edge (``dst`` sees ``src``'s prompt and answer) or an *order* edge
(``src`` is only evaluated first). Node names are unique within a flow.

*Evaluating a node* = compose -> query -> after-query:

1. compose: chat messages from the node's data dependencies (their prompts and answers, in edge
   order), the shared :class:`~rltf.flows.engine.database.Database` (``$db.key$`` / ``$db.a.b$``
   placeholders) and the node's prompt (:func:`default_compose`, or the node's own ``compose``);
2. query: ``backend.generate`` with the node's grammar or choices and sampling. Backend
   exceptions are retried with bounded exponential backoff (:class:`Backoff`, injectable sleep);
3. after-query: the node's ``after_query(ctx, answer)`` parses and validates the answer, writes
   to the database (``ctx.db``) and may edit the graph (``ctx.add_node`` ...). It returns the
   node's *value* (``None`` keeps the answer; a choice node's value is the option). Raising
   :class:`NodeRetry` ("the answer must be JSON") re-queries the node with its failed answer and
   that message appended to the messages; database writes and graph edits of the rejected attempt
   are undone. After ``max_attempts`` the node *fails*; :class:`NodeFail` fails it at once.

*A failed node* (no valid answer, backend still failing after its retries, a placeholder with no
value) is recorded in the trace and, by ``FlowConfig.on_failure``, stops the pass (``stop``,
the default), lets it go on (``continue``: dependents see the failure in place of an answer), or
skips everything downstream of it (``skip``). Any other exception (a bug in an after-query, an
illegal graph edit) ends the pass with status ``error``; the trace is written and it propagates.

*Dynamic graphs.* During a pass an after-query may add nodes and edges and remove or change
pending ones; these edits are temporary (the flow's own graph is untouched, so every pass starts
from it) and cannot touch a node already evaluated (or being evaluated): :class:`GraphEditError`.
Traversal is Kahn's algorithm over the dynamic graph (in-degrees updated by every edit; ready
nodes in insertion order, so a flow is deterministic). A cycle is a :class:`GraphCycleError`
naming its nodes, raised when the edge that closes it is added or before a pass starts; nothing
is silently skipped.

*Accounting.* Every attempt records its messages, answer, error, backend errors, prompt and
completion tokens (the backend's counts), log-probability and seconds; nodes and passes sum
them. Each pass writes a JSON trace (:mod:`rltf.flows.engine.trace`) where the caller says.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from rltf.flows.backends.base import (
    Backend,
    BackendError,
    Choices,
    Completion,
    GrammarArg,
    Message,
    Sampling,
)
from rltf.flows.engine.database import Database, PlaceholderError
from rltf.flows.engine.trace import AttemptTrace, NodeTrace, PassTrace, json_safe

__all__ = [
    "AfterQueryFn",
    "Backoff",
    "ComposeFn",
    "Edge",
    "EdgeKind",
    "Flow",
    "FlowConfig",
    "FlowError",
    "GraphCycleError",
    "GraphEditError",
    "GraphError",
    "Node",
    "NodeContext",
    "NodeFail",
    "NodeResult",
    "NodeRetry",
    "PassResult",
    "Usage",
    "default_compose",
    "find_cycle",
    "find_path",
]

EdgeKind = Literal["data", "order"]
OnFailure = Literal["stop", "continue", "skip"]


# ------------------------------------------------------------------------------------ errors
class FlowError(Exception):
    """A flow that cannot run as built (the base of the engine's own errors)."""


class GraphError(FlowError):
    """A bad graph operation: unknown node, duplicate name or edge."""


class GraphCycleError(GraphError):
    """The graph has a cycle; ``cycle`` lists its nodes in order (the first repeated at the end)."""

    def __init__(self, cycle: Sequence[str], what: str = "the flow graph has a cycle"):
        self.cycle = list(cycle)
        super().__init__(f"{what}: {' -> '.join(self.cycle)}")


class GraphEditError(GraphError):
    """A graph edit that is not allowed now: changing a node already evaluated in this pass, or
    editing outside an after-query / permanently during a pass."""


class NodeRetry(Exception):
    """Raised by an after-query: the answer is not acceptable; ``message`` tells the model why
    (it is appended to the node's messages after the failed answer, and the node is re-queried)."""

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


class NodeFail(Exception):
    """Raised by an after-query: the node fails now, without further attempts."""

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


# ------------------------------------------------------------------------------ the graph
ComposeFn = Callable[["NodeContext"], list[Message]]
AfterQueryFn = Callable[["NodeContext", str], Any]
Dynamic = Callable[["NodeContext"], Any]


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


# --------------------------------------------------------------------------- configuration
@dataclass
class Backoff:
    """Bounded exponential backoff for backend exceptions: up to ``max_attempts`` calls, waiting
    ``min(max_delay, base_delay * factor**i)`` seconds after failure ``i`` (via ``sleep``, which
    tests replace). ``give_up_on``: exceptions raised at once (misconfiguration, not transient)."""

    max_attempts: int = 5
    base_delay: float = 1.0
    factor: float = 2.0
    max_delay: float = 60.0
    sleep: Callable[[float], None] = time.sleep
    give_up_on: tuple[type[BaseException], ...] = (BackendError, TypeError)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise FlowError(f"Backoff.max_attempts={self.max_attempts}: expected at least 1")
        if self.base_delay < 0 or self.factor < 1 or self.max_delay < 0:
            raise FlowError(f"Backoff: base_delay={self.base_delay}, factor={self.factor}, max_delay={self.max_delay}: "
                            "expected base_delay >= 0, factor >= 1, max_delay >= 0")

    def delay(self, failure: int) -> float:
        """Seconds to wait after the ``failure``-th failed call (from 0)."""
        return min(self.max_delay, self.base_delay * self.factor ** failure)


@dataclass
class FlowConfig:
    """How a flow runs (see the module docstring). ``trace_dir``: every pass writes
    ``<trace_dir>/<flow name>-pass<index>.json`` unless :meth:`Flow.run` gets a ``trace_path``.
    ``dependency_template`` formats one data dependency in the default composition."""

    max_attempts: int = 3
    on_failure: OnFailure = "stop"
    backoff: Backoff = field(default_factory=Backoff)
    trace_dir: str | None = None
    system: str | None = None
    sampling: Sampling | None = None
    dependency_template: str = "{prompt}\n{answer}"
    failed_answer: str = "(no answer: {error})"

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise FlowError(f"FlowConfig.max_attempts={self.max_attempts}: expected at least 1")
        if self.on_failure not in ("stop", "continue", "skip"):
            raise FlowError(f"FlowConfig.on_failure={self.on_failure!r}: expected 'stop', 'continue' or 'skip'")


@dataclass
class Usage:
    """Token counts and backend calls (successful ones)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls


# -------------------------------------------------------------------------------- results
@dataclass
class NodeResult:
    """What one node produced in a pass. ``answer``: the accepted raw text (what data edges pass);
    ``value``: the after-query's return value (or the answer / chosen option); ``completion``:
    the backend's last :class:`Completion` (log-prob, decoded rows for re-scoring)."""

    name: str
    status: Literal["ok", "failed", "skipped", "not_run"]
    prompt: str = ""
    answer: str | None = None
    value: Any = None
    error: str | None = None
    completion: Completion | None = None
    attempts: int = 0
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    temporary: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class PassResult:
    """One pass: results in evaluation order, the trace and where it was written."""

    status: Literal["ok", "failed"]
    results: dict[str, NodeResult]
    trace: PassTrace
    trace_path: Path | None
    usage: Usage

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def order(self) -> list[str]:
        """Names of the nodes evaluated (ok or failed), in evaluation order."""
        return [n for n, r in self.results.items() if r.status in ("ok", "failed")]

    def __getitem__(self, name: str) -> NodeResult:
        return self.results[name]

    def failures(self) -> list[NodeResult]:
        return [r for r in self.results.values() if r.status == "failed"]

    def constrained(self) -> list[tuple[str, Completion]]:
        """``(node, completion)`` of every constrained-decoded answer of the pass, in order: what a
        trainer re-scores with gradients (:func:`rltf.flows.backends.planner.rescore`)."""
        return [(n, r.completion) for n, r in self.results.items()
                if r.ok and r.completion is not None and r.completion.decoded is not None]


# ------------------------------------------------------------------------- one pass's graph
_DONE = ("ok", "failed", "skipped")


class _PassGraph:
    """The dynamic graph of one pass: a copy of the flow's graph that after-queries may edit,
    with Kahn's in-degrees (unfinished predecessors) and frontier kept up to date."""

    def __init__(self, nodes: Mapping[str, Node], edges: Sequence[Edge]):
        self.nodes: dict[str, Node] = dict(nodes)
        self.edges: list[Edge] = list(edges)
        self.temporary: set[str] = set()
        self.status: dict[str, str] = dict.fromkeys(self.nodes, "pending")
        self.indeg = dict.fromkeys(self.nodes, 0)
        for e in self.edges:
            self.indeg[e.dst] += 1
        self.frontier = [n for n in self.nodes if self.indeg[n] == 0]
        self.edits: list[dict[str, Any]] = []
        self.editor: str | None = None  # the node whose after-query may edit (None: no edits now)

    # -------------------------------------------------------------------------- queries
    def in_edges(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.dst == name]

    def out_edges(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.src == name]

    def unfinished(self, name: str) -> bool:
        return self.status[name] in ("pending", "running")

    def snapshot(self) -> tuple:
        return (dict(self.nodes), list(self.edges), set(self.temporary), dict(self.status), dict(self.indeg),
                list(self.frontier), len(self.edits))

    def restore(self, snap: tuple) -> None:
        nodes, edges, temporary, status, indeg, frontier, n_edits = snap
        self.nodes, self.edges, self.temporary, self.status = nodes, edges, temporary, status
        self.indeg, self.frontier = indeg, frontier
        del self.edits[n_edits:]

    def pop_ready(self) -> str | None:
        while self.frontier:
            n = self.frontier.pop(0)
            if self.status.get(n) == "pending" and self.indeg[n] == 0:
                return n
        return None

    def finish(self, name: str, status: str) -> None:
        """Mark a node done and release its successors (Kahn's step)."""
        self.status[name] = status
        for e in self.out_edges(name):
            self.indeg[e.dst] -= 1
            if self.indeg[e.dst] == 0 and self.status[e.dst] == "pending":
                self.frontier.append(e.dst)

    # ---------------------------------------------------------------------------- edits
    def _check_edit(self, what: str) -> None:
        if self.editor is None:
            raise GraphEditError(f"{what}: the graph can be edited only inside an after-query during a pass")

    def _require_pending(self, name: str, what: str) -> None:
        if name not in self.nodes:
            raise GraphError(f"{what}: no node {name!r} in this pass (nodes: {list(self.nodes)})")
        st = self.status[name]
        if st != "pending":
            state = "being evaluated" if st == "running" else f"already evaluated ({st})"
            raise GraphEditError(f"{what}: node {name!r} is {state} in this pass and cannot be modified")

    def add_node(self, node: Node) -> None:
        what = f"add_node({node.name!r})"
        self._check_edit(what)
        if node.name in self.nodes:
            raise GraphError(f"{what}: a node named {node.name!r} already exists")
        self.nodes[node.name] = node
        self.temporary.add(node.name)
        self.status[node.name] = "pending"
        self.indeg[node.name] = 0
        self.frontier.append(node.name)
        self.edits.append({"op": "add_node", "node": node.name, "by": self.editor})

    def add_edge(self, edge: Edge) -> None:
        what = f"add_edge({edge.src!r} -> {edge.dst!r})"
        self._check_edit(what)
        if edge.src not in self.nodes:
            raise GraphError(f"{what}: no node {edge.src!r} in this pass")
        self._require_pending(edge.dst, what)
        if any(e.src == edge.src and e.dst == edge.dst for e in self.edges):
            raise GraphError(f"{what}: the edge already exists")
        path = find_path(self.edges, edge.dst, edge.src)
        if path is not None:
            raise GraphCycleError([edge.src, *path], f"{what} would close a cycle")
        self.edges.append(edge)
        if self.unfinished(edge.src):
            self.indeg[edge.dst] += 1
            if edge.dst in self.frontier:
                self.frontier.remove(edge.dst)
        self.edits.append({"op": "add_edge", "src": edge.src, "dst": edge.dst, "kind": edge.kind, "by": self.editor})

    def remove_edge(self, src: str, dst: str) -> None:
        what = f"remove_edge({src!r} -> {dst!r})"
        self._check_edit(what)
        self._require_pending(dst, what)
        edge = next((e for e in self.edges if e.src == src and e.dst == dst), None)
        if edge is None:
            raise GraphError(f"{what}: no such edge in this pass")
        self.edges.remove(edge)
        if self.unfinished(src):
            self.indeg[dst] -= 1
            if self.indeg[dst] == 0:
                self.frontier.append(dst)
        self.edits.append({"op": "remove_edge", "src": src, "dst": dst, "by": self.editor})

    def remove_node(self, name: str) -> None:
        what = f"remove_node({name!r})"
        self._check_edit(what)
        self._require_pending(name, what)
        for e in self.out_edges(name):
            self.indeg[e.dst] -= 1
            if self.indeg[e.dst] == 0 and self.status[e.dst] == "pending":
                self.frontier.append(e.dst)
        self.edges = [e for e in self.edges if name not in (e.src, e.dst)]
        del self.nodes[name], self.status[name], self.indeg[name]
        self.temporary.discard(name)
        if name in self.frontier:
            self.frontier.remove(name)
        self.edits.append({"op": "remove_node", "node": name, "by": self.editor})

    def update_node(self, name: str, changes: Mapping[str, Any]) -> None:
        what = f"update_node({name!r})"
        self._check_edit(what)
        self._require_pending(name, what)
        if "name" in changes:
            raise GraphEditError(f"{what}: a node cannot be renamed (remove it and add another)")
        self.nodes[name] = dataclasses.replace(self.nodes[name], **changes)
        self.edits.append({"op": "update_node", "node": name, "fields": sorted(changes), "by": self.editor})


# ------------------------------------------------------------------------------- contexts
@dataclass
class NodeContext:
    """What a node's compose / after-query / choices / grammar functions see.

    ``db``: the shared database; ``results``: nodes finished so far in this pass;
    ``dependencies``: the results of the node's data dependencies (edge order); ``attempt``:
    1-based; ``messages`` and ``completion``: the query of this attempt (after-query only).
    Graph edits (``add_node``, ``add_edge``, ``remove_node``, ``remove_edge``, ``update_node``)
    are allowed in an after-query and last until the end of the pass."""

    node: Node
    db: Database
    results: Mapping[str, NodeResult]
    pass_index: int
    graph: _PassGraph = field(repr=False)
    attempt: int = 1
    messages: list[Message] = field(default_factory=list)
    completion: Completion | None = None

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def dependencies(self) -> list[NodeResult]:
        """Results of the data dependencies, in edge order."""
        return [self.results[e.src] for e in self.graph.in_edges(self.node.name)
                if e.kind == "data" and e.src in self.results]

    def fill(self, text: str) -> str:
        """``text`` with its ``$db.key$`` placeholders filled from the database."""
        return self.db.fill(text, where=f"node {self.node.name!r}")

    def add_node(self, node: Node, *, needs: Iterable[str] = (), after: Iterable[str] = ()) -> Node:
        """Add a node for this pass, with data edges from ``needs`` and order edges from ``after``."""
        self.graph.add_node(node)
        for src in needs:
            self.graph.add_edge(Edge(src, node.name, "data"))
        for src in after:
            self.graph.add_edge(Edge(src, node.name, "order"))
        return node

    def add_edge(self, src: str, dst: str, kind: EdgeKind = "data") -> None:
        self.graph.add_edge(Edge(src, dst, kind))

    def remove_node(self, name: str) -> None:
        self.graph.remove_node(name)

    def remove_edge(self, src: str, dst: str) -> None:
        self.graph.remove_edge(src, dst)

    def update_node(self, name: str, **changes: Any) -> None:
        """Change fields of a pending node (its prompt, say) for this pass."""
        self.graph.update_node(name, changes)


def default_compose(ctx: NodeContext, config: FlowConfig | None = None) -> list[Message]:
    """AgentKit's default composition: an optional system message, then one user message with
    each data dependency (its prompt and answer, ``dependency_template``) and the node's prompt,
    all with ``$db.key$`` placeholders filled."""
    cfg = config or FlowConfig()
    node = ctx.node
    messages: list[Message] = []
    system = node.system if node.system is not None else cfg.system
    if system:
        messages.append({"role": "system", "content": ctx.fill(system)})
    parts = []
    for dep in ctx.dependencies:
        answer = dep.answer if dep.ok else cfg.failed_answer.format(error=dep.error or dep.status)
        parts.append(cfg.dependency_template.format(prompt=dep.prompt, answer=answer))
    parts.append(ctx.fill(node.prompt))
    messages.append({"role": "user", "content": "\n\n".join(parts)})
    return messages


# ------------------------------------------------------------------------------ the flow
class Flow:
    """A graph of nodes, a backend, a shared database; :meth:`run` evaluates one pass.

    The graph built with :meth:`add_node` / :meth:`add_edge` is the flow's permanent graph;
    every pass starts from it (edits made during a pass are reverted at its end). The database
    persists across passes (what AgentKit keeps between steps)."""

    def __init__(self, backend: Backend, *, db: Database | Mapping[str, Any] | None = None,
                 config: FlowConfig | None = None, name: str = "flow"):
        if not hasattr(backend, "generate"):
            raise FlowError(f"backend {backend!r} has no generate(messages_batch, grammar=None, sampling=None)")
        self.backend = backend
        self.db = db if isinstance(db, Database) else Database(db)
        self.config = config or FlowConfig()
        self.name = name
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.passes = 0
        self.usage = Usage()
        self._running = False

    # ------------------------------------------------------------------ permanent graph
    def _check_static(self, what: str) -> None:
        if self._running:
            raise GraphEditError(f"{what}: the flow's graph cannot change during a pass; edit it from an "
                                 "after-query (ctx.add_node, ...) for this pass only")

    def add_node(self, node: Node | str, prompt: str | None = None, *, needs: Iterable[str] = (),
                 after: Iterable[str] = (), **fields: Any) -> Node:
        """Add a node (a :class:`Node`, or a name, a prompt and Node fields) with data edges from
        ``needs`` and order edges from ``after``."""
        if isinstance(node, str):
            if prompt is None:
                raise GraphError(f"add_node({node!r}): a prompt is needed")
            node = Node(node, prompt, **fields)
        elif prompt is not None or fields:
            raise GraphError("add_node: pass either a Node or a name, a prompt and Node fields")
        self._check_static(f"add_node({node.name!r})")
        if node.name in self.nodes:
            raise GraphError(f"add_node: a node named {node.name!r} already exists")
        self.nodes[node.name] = node
        try:
            for src in needs:
                self.add_edge(src, node.name, "data")
            for src in after:
                self.add_edge(src, node.name, "order")
        except FlowError:
            self.remove_node(node.name)
            raise
        return node

    def add_edge(self, src: str, dst: str, kind: EdgeKind = "data") -> Edge:
        """Add ``src -> dst``; a cycle is refused at once, naming its nodes."""
        what = f"add_edge({src!r} -> {dst!r})"
        self._check_static(what)
        for n in (src, dst):
            if n not in self.nodes:
                raise GraphError(f"{what}: no node {n!r} (nodes: {list(self.nodes)})")
        if any(e.src == src and e.dst == dst for e in self.edges):
            raise GraphError(f"{what}: the edge already exists")
        edge = Edge(src, dst, kind)
        path = find_path(self.edges, dst, src)
        if path is not None:
            raise GraphCycleError([src, *path], f"{what} would close a cycle")
        self.edges.append(edge)
        return edge

    def remove_edge(self, src: str, dst: str) -> None:
        self._check_static(f"remove_edge({src!r} -> {dst!r})")
        n = len(self.edges)
        self.edges = [e for e in self.edges if not (e.src == src and e.dst == dst)]
        if len(self.edges) == n:
            raise GraphError(f"remove_edge: no edge {src!r} -> {dst!r}")

    def remove_node(self, name: str) -> None:
        """Remove a node and its edges."""
        self._check_static(f"remove_node({name!r})")
        if name not in self.nodes:
            raise GraphError(f"remove_node: no node {name!r}")
        del self.nodes[name]
        self.edges = [e for e in self.edges if name not in (e.src, e.dst)]

    # ----------------------------------------------------------------------------- a pass
    def run(self, *, trace_path: str | Path | None = None) -> PassResult:
        """Evaluate every node once (see the module docstring) and write the pass's trace to
        ``trace_path`` (default: under ``config.trace_dir``, if set)."""
        if self._running:
            raise FlowError("Flow.run is not re-entrant (called from inside a pass)")
        cycle = find_cycle(self.nodes, self.edges)
        if cycle is not None:  # only reachable by editing self.edges by hand
            raise GraphCycleError(cycle)
        index = self.passes
        self.passes += 1
        if trace_path is None and self.config.trace_dir:
            trace_path = Path(self.config.trace_dir) / f"{self.name}-pass{index:05d}.json"
        graph = _PassGraph(self.nodes, self.edges)
        results: dict[str, NodeResult] = {}
        traces: dict[str, NodeTrace] = {}
        usage = Usage()
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        t0 = time.perf_counter()
        status, error = "ok", None
        current: str | None = None
        attempts: list[AttemptTrace] = []
        self._running = True
        try:
            while (name := graph.pop_ready()) is not None:
                node = graph.nodes[name]
                failed_dep = next((e.src for e in graph.in_edges(name)
                                   if graph.status.get(e.src) in ("failed", "skipped")), None)
                if self.config.on_failure == "skip" and failed_dep is not None:
                    results[name] = NodeResult(name, "skipped", error=f"dependency {failed_dep!r} did not answer",
                                               temporary=name in graph.temporary)
                    traces[name] = self._node_trace(graph, node, results[name], [])
                    graph.finish(name, "skipped")
                    continue
                graph.status[name] = "running"
                current, attempts = name, []
                result = self._evaluate(graph, node, results, index, attempts)
                current = None
                results[name] = result
                traces[name] = self._node_trace(graph, node, result, attempts)
                usage.add(result.usage)
                graph.finish(name, result.status)
                if not result.ok:
                    status = "failed"
                    if self.config.on_failure == "stop":
                        break
            left = [n for n, st in graph.status.items() if st in ("pending", "running")]
            if left and status == "ok":  # cannot happen: edits refuse cycles
                raise FlowError(f"internal error: nodes {left} were never ready")  # pragma: no cover
            for n in left:
                results[n] = NodeResult(n, "not_run", temporary=n in graph.temporary)
                traces[n] = self._node_trace(graph, graph.nodes[n], results[n], [])
        except BaseException as e:
            status, error = "error", f"{type(e).__name__}: {e}"
            if current is not None:  # the node the exception came from, with its attempts so far
                res = NodeResult(current, "failed", prompt=node.prompt, error=error,
                                 temporary=current in graph.temporary, attempts=len(attempts))
                res.usage = Usage(sum(a.prompt_tokens for a in attempts), sum(a.completion_tokens for a in attempts),
                                  sum(a.answer is not None for a in attempts))
                usage.add(res.usage)
                traces[current] = self._node_trace(graph, node, res, attempts)
            raise
        finally:
            self._running = False
            self.usage.add(usage)
            trace = PassTrace(flow=self.name, pass_index=index, status=status, started=started,
                              seconds=time.perf_counter() - t0, prompt_tokens=usage.prompt_tokens,
                              completion_tokens=usage.completion_tokens, nodes=list(traces.values()),
                              edits=list(graph.edits), db=json_safe(self.db.to_dict()), error=error)
            if trace_path is not None:
                trace.write(trace_path)
        return PassResult(status, results, trace, Path(trace_path) if trace_path is not None else None,  # type: ignore[arg-type]
                          usage)

    # ------------------------------------------------------------------------- one node
    def _evaluate(self, graph: _PassGraph, node: Node, results: dict[str, NodeResult], index: int,
                  attempts: list[AttemptTrace]) -> NodeResult:
        """Compose, query, after-query, with retries; every attempt is appended to ``attempts``."""
        t0 = time.perf_counter()
        ctx = NodeContext(node, self.db, results, index, graph)
        res = NodeResult(node.name, "failed", prompt=node.prompt, temporary=node.name in graph.temporary)

        def done(status: str, error: str | None = None) -> NodeResult:
            res.status, res.error, res.attempts = status, error, len(attempts)  # type: ignore[assignment]
            res.seconds = time.perf_counter() - t0
            return res

        try:
            res.prompt = ctx.fill(node.prompt)
            messages = node.compose(ctx) if node.compose is not None else default_compose(ctx, self.config)
            options, grammar = self._answer_space(ctx)
        except PlaceholderError as e:
            return done("failed", f"compose: {e}")
        if not messages:
            raise FlowError(f"node {node.name!r}: compose returned no messages")
        max_attempts = node.max_attempts or self.config.max_attempts
        for attempt in range(1, max_attempts + 1):
            ta = time.perf_counter()
            trace = AttemptTrace(messages=[dict(m) for m in messages])
            attempts.append(trace)
            completion = self._query(node, messages, grammar, trace)
            trace.seconds = time.perf_counter() - ta
            if completion is None:
                trace.error = f"backend failed {len(trace.backend_errors)} times; last: {trace.backend_errors[-1]}"
                return done("failed", trace.error)
            answer = completion.text
            trace.answer, trace.logprob = answer, completion.logprob
            trace.prompt_tokens, trace.completion_tokens = completion.prompt_tokens, completion.completion_tokens
            res.usage.add(Usage(completion.prompt_tokens, completion.completion_tokens, 1))
            res.completion = completion
            ctx.attempt, ctx.messages, ctx.completion = attempt, [dict(m) for m in messages], completion
            snap = graph.snapshot()
            self.db.begin()
            graph.editor = node.name
            try:
                value = self._after_query(ctx, answer, options, completion)
            except NodeRetry as r:
                self.db.rollback()
                graph.restore(snap)
                trace.error = r.message
                messages = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": r.message}]
                continue
            except NodeFail as f:
                self.db.rollback()
                graph.restore(snap)
                trace.error = f.message
                return done("failed", f.message)
            except BaseException:
                self.db.rollback()
                graph.restore(snap)
                raise
            else:
                self.db.commit()
            finally:
                graph.editor = None
                trace.seconds = time.perf_counter() - ta
            res.answer, res.value = answer, value
            return done("ok")
        return done("failed", f"no valid answer after {max_attempts} attempt(s); last error: {attempts[-1].error}")

    def _answer_space(self, ctx: NodeContext) -> tuple[tuple[str, ...] | None, GrammarArg]:
        """The node's options (validated here) and the grammar argument the backend gets."""
        node = ctx.node
        if node.choices is not None:
            opts = node.choices(ctx) if callable(node.choices) else node.choices
            choices = Choices(opts)
            return choices.options, (choices if getattr(self.backend, "supports_grammar", False) else None)
        if node.grammar is not None:
            g = node.grammar
            if callable(g) and not hasattr(g, "dfa"):
                g = g(ctx)
            if not getattr(self.backend, "supports_grammar", False):
                raise BackendError(f"node {node.name!r} needs a grammar but the backend {self.backend!r} cannot "
                                   "constrain its output (use choices=..., validated by the engine, or a local backend)")
            return None, g
        return None, None

    def _query(self, node: Node, messages: list[Message], grammar: GrammarArg,
               trace: AttemptTrace) -> Completion | None:
        """One backend call, retried with bounded exponential backoff; None when every call failed."""
        policy = self.config.backoff
        sampling = node.sampling or self.config.sampling
        begin_node = getattr(self.backend, "begin_node", None)  # backends that answer per node (role adapters)
        if begin_node is not None:
            begin_node(node.name)
        for i in range(policy.max_attempts):
            try:
                out = self.backend.generate([messages], grammar, sampling=sampling)
            except policy.give_up_on:
                raise
            except Exception as e:  # noqa: BLE001 - any backend failure is retried, boundedly
                trace.backend_errors.append(f"{type(e).__name__}: {e}")
                if i + 1 < policy.max_attempts:
                    policy.sleep(policy.delay(i))
                continue
            if len(out) != 1 or not isinstance(out[0], Completion):
                raise FlowError(f"backend {self.backend!r} returned {out!r} for one message list; "
                                "expected [Completion]")
            return out[0]
        return None

    def _after_query(self, ctx: NodeContext, answer: str, options: tuple[str, ...] | None,
                     completion: Completion) -> Any:
        node = ctx.node
        value: Any = completion.value if completion.value is not None else answer
        if options is not None:
            chosen = answer.strip()
            if chosen not in options:
                raise NodeRetry(f"Answer with exactly one of these options and nothing else: {', '.join(options)}")
            value = chosen
        if node.after_query is not None:
            parsed = node.after_query(ctx, answer)
            if parsed is not None:
                value = parsed
        if node.output_key:
            self.db.set(node.output_key, value)
        return value

    @staticmethod
    def _node_trace(graph: _PassGraph, node: Node, res: NodeResult, attempts: list[AttemptTrace]) -> NodeTrace:
        ins = graph.in_edges(node.name)
        return NodeTrace(name=node.name, prompt=res.prompt or node.prompt, status=res.status,
                         temporary=res.temporary, needs=[e.src for e in ins if e.kind == "data"],
                         after=[e.src for e in ins if e.kind == "order"], answer=res.answer,
                         value=json_safe(res.value), error=res.error, attempts=attempts,
                         prompt_tokens=res.usage.prompt_tokens, completion_tokens=res.usage.completion_tokens,
                         seconds=res.seconds)
