"""Settings of the `hf` expert backend: model overrides, device, precision, memory, batching."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from envs.openagi.hf.models import (
    BFLOAT16,
    DEFAULT_EXPERTS,
    DEFAULT_METRIC_MODELS,
    FLOAT16,
    FLOAT32,
    ExpertModel,
)

DTYPES = ("auto", FLOAT32, FLOAT16, BFLOAT16)


@dataclass
class HFBackendConfig:
    """What the `hf` backend loads and how.

    - ``model_ids``: tool name -> hub id or local directory, replacing the table's default.
    - ``metric_models``: ``"bertscore" | "vit" | "clip"`` -> hub id or local directory.
    - ``device``: ``None`` picks ``cuda`` when available, else ``cpu``.
    - ``dtype``: ``"auto"`` is bfloat16 on a GPU that supports it (else float16) and float32 on
      CPU; a half dtype is only used for models the table marks safe in it (others run float32).
    - ``metrics_dtype``: the metric models' dtype (float32 by default: scores are rewards).
    - ``memory_budget_gib``: weights the model cache may hold at once; ``None`` is 70% of the
      GPU's memory (the rest is for activations) or 50% of the host's RAM on CPU.
    - ``batch_size`` for every tool, ``batch_sizes`` per tool (the table's default beats the
      global one unless the tool is named here).
    - ``max_new_tokens``: when set, caps generation for every generating tool.
    - ``generate_kwargs``: tool name -> extra ``generate`` / diffusion-pipeline arguments.
    - ``options``: tool name -> expert options (e.g. ``{"Object Detection": {"threshold": 0.5}}``).
    - ``local_files_only``: never contact the hub (tests set it; ``HF_HUB_OFFLINE=1`` does too).
    - ``bertscore_num_layers``: the hidden layer BERTScore reads (``None``: bert-score's default
      for known models, e.g. 40 for deberta-xlarge-mnli, else the last layer).
    - ``metric_batch_size``: texts / images per forward pass of a metric model.
    """

    model_ids: dict[str, str] = field(default_factory=dict)
    metric_models: dict[str, str] = field(default_factory=dict)
    device: str | None = None
    dtype: str = "auto"
    metrics_dtype: str = FLOAT32
    memory_budget_gib: float | None = None
    batch_size: int = 8
    batch_sizes: dict[str, int] = field(default_factory=dict)
    max_new_tokens: int | None = None
    generate_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    seed: int = 0
    local_files_only: bool = False
    bertscore_num_layers: int | None = None
    metric_batch_size: int = 32

    def __post_init__(self) -> None:
        for what, mapping, known in (
            ("model_ids", self.model_ids, DEFAULT_EXPERTS),
            ("batch_sizes", self.batch_sizes, DEFAULT_EXPERTS),
            ("generate_kwargs", self.generate_kwargs, DEFAULT_EXPERTS),
            ("options", self.options, DEFAULT_EXPERTS),
            ("metric_models", self.metric_models, DEFAULT_METRIC_MODELS),
        ):
            if not isinstance(mapping, Mapping):
                raise TypeError(f"HFBackendConfig.{what} must be a dict, got {type(mapping).__name__}")
            for key in mapping:
                if key not in known:
                    raise ValueError(f"HFBackendConfig.{what}: unknown name {key!r}; "
                                     f"expected one of: {', '.join(known)}")
        for tool, opts in self.options.items():
            unknown = sorted(set(opts) - set(DEFAULT_EXPERTS[tool].options))
            if unknown:
                known = sorted(DEFAULT_EXPERTS[tool].options) or "none"
                raise ValueError(f"HFBackendConfig.options[{tool!r}]: unknown option(s) {unknown}; expected: {known}")
        for key, value in {**self.model_ids, **self.metric_models}.items():
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"HFBackendConfig: model for {key!r} is {value!r}; expected a hub id or a directory")
        for what, value in (("dtype", self.dtype), ("metrics_dtype", self.metrics_dtype)):
            if value not in DTYPES:
                raise ValueError(f"HFBackendConfig.{what}={value!r}; expected one of {DTYPES}")
        budget = self.memory_budget_gib
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                                   or not math.isfinite(budget) or not budget > 0):
            raise ValueError(f"HFBackendConfig.memory_budget_gib={budget!r}; expected a finite number > 0 or None")
        for name, size in {"batch_size": self.batch_size, "metric_batch_size": self.metric_batch_size,
                           **self.batch_sizes}.items():
            if not isinstance(size, int) or size < 1:
                raise ValueError(f"HFBackendConfig: batch size for {name!r} is {size!r}; expected an int >= 1")
        if self.max_new_tokens is not None and (not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1):
            raise ValueError(f"HFBackendConfig.max_new_tokens={self.max_new_tokens!r}; expected an int >= 1 or None")
        if self.bertscore_num_layers is not None and (
            not isinstance(self.bertscore_num_layers, int) or self.bertscore_num_layers < 0
        ):
            raise ValueError(f"HFBackendConfig.bertscore_num_layers={self.bertscore_num_layers!r}; "
                             "expected an int >= 0 or None")
        if self.device is not None and not isinstance(self.device, str):
            raise TypeError(f"HFBackendConfig.device={self.device!r}; expected a string like 'cuda:0' or None")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "HFBackendConfig":
        """Build from a plain mapping (a YAML section), rejecting unknown keys by name."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown hf backend setting(s) {unknown}; expected some of: {sorted(names)}")
        return cls(**dict(data))

    def expert(self, tool: str) -> ExpertModel:
        """The table row for ``tool`` with this config's model id override applied."""
        base = DEFAULT_EXPERTS[tool]
        return dataclasses.replace(base, model_id=self.model_ids.get(tool, base.model_id))

    def metric_model(self, metric: str) -> ExpertModel:
        if metric not in DEFAULT_METRIC_MODELS:
            raise ValueError(f"unknown metric {metric!r}; expected one of: {', '.join(DEFAULT_METRIC_MODELS)}")
        base = DEFAULT_METRIC_MODELS[metric]
        return dataclasses.replace(base, model_id=self.metric_models.get(metric, base.model_id))

    def tool_batch_size(self, tool: str) -> int:
        if tool in self.batch_sizes:
            return self.batch_sizes[tool]
        table = DEFAULT_EXPERTS[tool].batch_size
        return min(table, self.batch_size) if table else self.batch_size

    def tool_generate_kwargs(self, tool: str) -> dict[str, Any]:
        """The table's generation arguments, then the config's, then the ``max_new_tokens`` cap."""
        kw = {**DEFAULT_EXPERTS[tool].generate, **self.generate_kwargs.get(tool, {})}
        if self.max_new_tokens is not None and DEFAULT_EXPERTS[tool].library == "transformers":
            kw["max_new_tokens"] = min(kw.get("max_new_tokens", self.max_new_tokens), self.max_new_tokens)
        return kw

    def tool_options(self, tool: str) -> dict[str, Any]:
        return {**DEFAULT_EXPERTS[tool].options, **self.options.get(tool, {})}
