"""The flow engine's exceptions: what cannot run (:class:`FlowError` and its graph errors) and what
an after-query raises to reject an answer (:class:`NodeRetry`: ask again; :class:`NodeFail`: fail now)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["FlowError", "GraphCycleError", "GraphEditError", "GraphError", "NodeFail", "NodeRetry"]


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
