"""How a flow runs: :class:`FlowConfig` (attempts per node, what a failed node does, traces, the
default composition) and :class:`Backoff` (retrying backend exceptions)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from rltf.flows.backends.base import BackendError, Sampling
from rltf.flows.engine.errors import FlowError

__all__ = ["Backoff", "FlowConfig", "OnFailure"]

OnFailure = Literal["stop", "continue", "skip"]


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
