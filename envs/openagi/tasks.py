"""Tasks and their samples: the data side of the benchmark."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envs.openagi.plans import Plan, format_plan


@dataclass(frozen=True)
class Sample:
    """One instance of a task: its inputs (one per task input) and the ground truth.

    ``uid`` is stable across runs (it keys the execution cache)."""

    uid: str
    inputs: tuple[Any, ...]
    target: Any


@dataclass
class Task:
    id: int
    description: str
    inputs: tuple[str, ...]
    target: str
    metric: str
    family: str
    degradations: tuple[tuple[str, ...], ...]
    reference_plan: Plan
    samples: list[Sample] = field(repr=False, default_factory=list)

    @property
    def name(self) -> str:
        return f"task-{self.id:03d}"

    @property
    def is_linear(self) -> bool:
        return len(self.inputs) == 1

    @property
    def stratum(self) -> str:
        """The split stratum: input modalities -> target modality, as in the paper."""
        return f"{'+'.join(self.inputs)}->{self.target}"

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "description": self.description,
            "inputs": list(self.inputs),
            "target": self.target,
            "metric": self.metric,
            "family": self.family,
            "reference_plan": format_plan(self.reference_plan),
            "n_samples": len(self.samples),
        }
