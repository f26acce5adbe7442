"""One pass's graph: a copy of the flow's graph that after-queries may edit (:class:`PassGraph`),
with Kahn's in-degrees and ready frontier kept up to date by every edit."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rltf.flows.engine.errors import GraphCycleError, GraphEditError, GraphError
from rltf.flows.engine.graph import Edge, Node, find_path

__all__ = ["PassGraph"]


class PassGraph:
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
