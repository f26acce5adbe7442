"""The trace of one flow pass: what every node was asked, answered, retried and cost, as JSON.

A pass writes one JSON file (:meth:`PassTrace.write`, the path the caller picks) and
:func:`load_trace` reads it back into the same dataclasses, so a failed episode can be inspected
node by node: the exact messages of every attempt, the answer, the validation error fed back,
backend errors that were retried, token usage, log-probability and wall time. Values that are
not JSON (parsed objects in the database, node values) are written as their ``repr``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.atomic import write_atomic
from rltf.flows.backends.base import Message
from rltf.run.tracking import DamagedFileError

__all__ = ["TRACE_FORMAT", "AttemptTrace", "NodeTrace", "PassTrace", "json_safe", "load_trace"]

TRACE_FORMAT = 1


def json_safe(value: Any) -> Any:
    """``value`` with everything JSON cannot hold replaced by its ``repr`` (dict keys by ``str``)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return json_safe(dataclasses.asdict(value))
        except Exception:  # noqa: BLE001, S110 - fall back to the repr
            pass
    return repr(value)


@dataclass
class AttemptTrace:
    """One query of a node: the messages sent, the answer, and why it was rejected (if it was)."""

    messages: list[Message]
    answer: str | None = None
    error: str | None = None  # the NodeRetry message fed back, or why the attempt failed
    backend_errors: list[str] = field(default_factory=list)  # backend exceptions retried with backoff
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprob: float | None = None
    seconds: float = 0.0


@dataclass
class NodeTrace:
    """One node of a pass. ``status``: ``ok``, ``failed``, ``skipped`` (a dependency failed and
    the flow skips dependents) or ``not_run`` (the pass stopped before it)."""

    name: str
    prompt: str
    status: str
    temporary: bool = False
    needs: list[str] = field(default_factory=list)  # data dependencies, in order
    after: list[str] = field(default_factory=list)  # order-only dependencies
    answer: str | None = None
    value: Any = None
    error: str | None = None
    attempts: list[AttemptTrace] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    @property
    def retries(self) -> int:
        """Attempts after the first (validation retries; backend retries are in ``backend_errors``)."""
        return max(0, len(self.attempts) - 1)


@dataclass
class PassTrace:
    """One pass of a flow: its nodes in evaluation order (then those not run), the graph edits
    made during it, the final database and the totals. ``status``: ``ok`` (every node answered),
    ``failed`` (a node failed), ``error`` (an exception ended the pass: ``error`` says which)."""

    flow: str
    pass_index: int
    status: str
    started: str
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    nodes: list[NodeTrace] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)
    db: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    format: int = TRACE_FORMAT

    def node(self, name: str) -> NodeTrace:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r} in the trace of pass {self.pass_index} "
                       f"(nodes: {[n.name for n in self.nodes]})")

    def to_dict(self) -> dict[str, Any]:
        return json_safe(dataclasses.asdict(self))

    def write(self, path: str | os.PathLike) -> Path:
        """Write the trace as JSON (atomically: a reader never sees half a trace)."""
        return write_atomic(path, json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n")


def load_trace(path: str | os.PathLike) -> PassTrace:
    """Read a trace :meth:`PassTrace.write` wrote. A file that is not one (truncated, not UTF-8,
    not JSON, not a trace's fields) is a :class:`~rltf.run.tracking.DamagedFileError` naming it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as e:  # not UTF-8 / not JSON / a >4300-digit number / nested too deep
        reason = "nested too deeply" if isinstance(e, RecursionError) else f"{type(e).__name__}: {str(e)[:200]}"
        raise DamagedFileError(f"{path} is not a readable flow trace ({reason})") from None
    if not isinstance(data, dict):
        raise DamagedFileError(f"{path} is not a flow trace: it holds a JSON {type(data).__name__}, not an object")
    version = data.get("format", TRACE_FORMAT)
    if not isinstance(version, int) or isinstance(version, bool) or version > TRACE_FORMAT:
        raise DamagedFileError(f"{path}: trace format {version!r}; this rltf reads up to {TRACE_FORMAT}")
    try:
        nodes = []
        for n in data.pop("nodes", []):
            attempts = [AttemptTrace(**a) for a in n.pop("attempts", [])]
            nodes.append(NodeTrace(**n, attempts=attempts))
        return PassTrace(**data, nodes=nodes)
    except (TypeError, AttributeError) as e:  # a missing or unknown field, a node that is not an object
        raise DamagedFileError(f"{path} is not a flow trace ({type(e).__name__}: {e})") from None
