"""What a pass produces: :class:`NodeResult` per node, :class:`PassResult` per pass, and the
:class:`Usage` (tokens, calls) both sum."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rltf.flows.backends.base import Completion
from rltf.flows.engine.trace import PassTrace

__all__ = ["NodeResult", "PassResult", "Usage"]


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

