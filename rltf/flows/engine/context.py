"""What a node's functions see (:class:`NodeContext`: the database, the pass's results, graph edits)
and AgentKit's default composition of a node's messages (:func:`default_compose`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rltf.flows.backends.base import Completion, Message
from rltf.flows.engine.config import FlowConfig
from rltf.flows.engine.database import Database
from rltf.flows.engine.graph import Edge, EdgeKind, Node
from rltf.flows.engine.pass_graph import PassGraph
from rltf.flows.engine.results import NodeResult

__all__ = ["NodeContext", "default_compose"]


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
    graph: PassGraph = field(repr=False)
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
