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

Here: :class:`Flow`. Beside it in :mod:`rltf.flows.engine`: ``graph`` (Node, Edge), ``pass_graph``,
``context`` (NodeContext, default_compose), ``config`` (FlowConfig, Backoff), ``results``, ``errors``,
``batching`` (PassBatch: many passes at once, their backend requests decoded in one batch).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rltf.flows.backends.base import Backend, BackendError, Choices, Completion, GrammarArg, Message
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.context import NodeContext, default_compose
from rltf.flows.engine.database import Database, PlaceholderError
from rltf.flows.engine.errors import FlowError, GraphCycleError, GraphEditError, GraphError, NodeFail, NodeRetry
from rltf.flows.engine.graph import Edge, EdgeKind, Node, find_cycle, find_path
from rltf.flows.engine.pass_graph import PassGraph
from rltf.flows.engine.results import NodeResult, PassResult, Usage
from rltf.flows.engine.trace import AttemptTrace, NodeTrace, PassTrace, json_safe

__all__ = ["Flow"]


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
        graph = PassGraph(self.nodes, self.edges)
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
                result = self._run_node(graph, node, results, index, attempts)
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
    def _run_node(self, graph: PassGraph, node: Node, results: dict[str, NodeResult], index: int,
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
                                   "constrain its output (use choices=..., validated by the engine, or a local "
                                   "backend)")
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
    def _node_trace(graph: PassGraph, node: Node, res: NodeResult, attempts: list[AttemptTrace]) -> NodeTrace:
        ins = graph.in_edges(node.name)
        return NodeTrace(name=node.name, prompt=res.prompt or node.prompt, status=res.status,
                         temporary=res.temporary, needs=[e.src for e in ins if e.kind == "data"],
                         after=[e.src for e in ins if e.kind == "order"], answer=res.answer,
                         value=json_safe(res.value), error=res.error, attempts=attempts,
                         prompt_tokens=res.usage.prompt_tokens, completion_tokens=res.usage.completion_tokens,
                         seconds=res.seconds)
