"""The `hf` backend: a :class:`ToolRegistry` of the 15 OpenAGI tools over hub models.

Nothing is loaded when the registry is built; each tool loads its model the first time a plan
calls it, into the backend's one :class:`ModelCache` (shared with the metric models).
"""

from __future__ import annotations

from typing import Any, Sequence

from envs.openagi.hf.config import HFBackendConfig
from envs.openagi.hf.experts import HFExperts
from envs.openagi.hf.loader import GIB, ModelCache, resolve_device, resolve_dtype
from envs.openagi.hf.metrics import HFMetricModels
from envs.openagi.hf.models import DEFAULT_EXPERTS, METRICS
from envs.openagi.registry import ToolRegistry
from envs.openagi.tools import OPENAGI_TOOLS, register_spec


class HFBackend:
    """One config, one model cache, the experts and the scorer that share it."""

    def __init__(self, config: HFBackendConfig | None = None, cache: ModelCache | None = None):
        self.config = config or HFBackendConfig()
        budget = None if self.config.memory_budget_gib is None else int(self.config.memory_budget_gib * GIB)
        self.cache = cache or ModelCache(self.config.device, budget)
        self.experts = HFExperts(self.config, self.cache)
        self.metric_models = HFMetricModels(self.config, self.cache)

    def registry(self, names: Sequence[str] | None = None) -> ToolRegistry:
        """A registry of the tools (all 15, or ``names``), none of them loaded yet."""
        unknown = sorted(set(names or ()) - set(DEFAULT_EXPERTS))
        if unknown:
            raise ValueError(f"unknown tool(s) {unknown}; expected some of: {', '.join(DEFAULT_EXPERTS)}")
        reg = ToolRegistry()
        for spec in OPENAGI_TOOLS:
            if names is None or spec.name in names:
                register_spec(reg, spec.name, self.experts.fn(spec.name))
        return reg


def build_hf_registry(config: HFBackendConfig | None = None, *, cache: ModelCache | None = None) -> ToolRegistry:
    """The 15 OpenAGI tools backed by lazily loaded hub models (see :class:`HFBackendConfig`)."""
    return HFBackend(config, cache).registry()


def describe_models(config: HFBackendConfig | None = None) -> list[dict[str, Any]]:
    """What the backend would load, per tool and metric, without loading anything (dry runs).

    Models shared by several tools (the Swin2SR restorer) are listed for each of them.
    """
    config = config or HFBackendConfig()
    try:
        device = resolve_device(config.device)
    except ValueError:  # describing a GPU config on a CPU machine: report the requested device
        device = None
    rows = []
    for spec in OPENAGI_TOOLS:
        row = config.expert(spec.name)
        dtype = (config.dtype if device is None
                 else str(resolve_dtype(config.dtype, device, row.half)).removeprefix("torch."))
        rows.append({"name": spec.name, "role": "tool", "model_id": row.model_id, "library": row.library,
                     "kind": row.kind, "dtype": dtype, "device": str(device or config.device)})
    for metric in METRICS:
        row = config.metric_model(metric)
        dtype = config.metrics_dtype if device is None else str(
            resolve_dtype(config.metrics_dtype, device, row.half)).removeprefix("torch.")
        rows.append({"name": metric, "role": "metric", "model_id": row.model_id, "library": row.library,
                     "kind": row.kind, "dtype": dtype, "device": str(device or config.device)})
    return rows
