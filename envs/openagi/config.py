"""The OpenAGI env's settings: what :func:`envs.make` builds (suite, backend, data, tools).

rltf's run config uses this dataclass as its ``env:`` section, so a run's YAML and an env built
on its own (``envs.make(OpenAGIEnvConfig(...))``) read the same keys::

    env:
      suite: lite            # lite (offline, 38 tasks) or full (185 tasks on hub data)
      backend: lite          # lite (offline zoo) or hf (hub models)
      tools: [mypackage.tools:register]   # callables that add tools to the env's registry

:meth:`OpenAGIEnvConfig.validate` checks everything that can be checked without loading
anything, naming the key (``'env.hf'``) in its :class:`EnvConfigError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from envs.config_fields import bound_errors, num

SUITES = ("lite", "full")
BACKENDS = ("lite", "hf")
# "package.module:attribute" (the attribute may be dotted: "module:Class.method")
_TOOL_ENTRY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class EnvConfigError(ValueError):
    """An env config that cannot run: a bad value, a suite/backend pair that does not exist, a
    ``tools`` entry that is not importable or not callable. The message names the key."""


@dataclass
class OpenAGIEnvConfig:
    suite: Literal["lite", "full"] = "lite"
    backend: Literal["lite", "hf"] = "lite"
    n_samples: int = num(20, gt=0)  # samples per task
    samples_per_step: int = num(8, gt=0)  # samples a plan is scored on per training step
    cache_mib: int = num(512, ge=0)  # execution-cache budget (0 disables the cache)
    data_seed: int = num(0, ge=0)  # seeds the task samples (the split itself is persisted)
    # backend "hf": HFBackendConfig settings (model_ids per tool, metric_models, device, dtype,
    # memory_budget_gib, batch_size(s), max_new_tokens, ...; envs/openagi/hf/config.py)
    hf: dict[str, Any] = field(default_factory=dict)
    # suite "full": the hub data is built once under data_dir (envs/openagi/hf/suite.py);
    # datasets: per-source overrides {imagenet: {path, split, config, revision, streaming, columns}}
    data_dir: str = "data/openagi"
    datasets: dict[str, Any] = field(default_factory=dict)
    max_image_side: int = num(256, ge=16)  # full-suite images are shrunk to at most this many pixels
    # extra tools: "package.module:callable" entries, each called with the env's ToolRegistry
    # (register tools on it) when the env is built; the decoder, SFT, RLTF and evaluation all see them
    tools: list[str] = field(default_factory=list)

    def validate(self, section: str = "env") -> None:
        """Raise :class:`EnvConfigError` (keys named ``<section>.<key>``) for a config that cannot run."""
        for message in bound_errors(self, f"{section}."):
            raise EnvConfigError(message)
        for key, value, allowed in (("suite", self.suite, SUITES), ("backend", self.backend, BACKENDS)):
            if value not in allowed:
                raise EnvConfigError(f"bad value for '{section}.{key}': {value!r}; expected one of "
                                     f"{', '.join(repr(a) for a in allowed)}")
        if self.suite == "full" and self.backend != "hf":
            raise EnvConfigError(
                f"'{section}.suite' is 'full' but '{section}.backend' is 'lite': the offline zoo has no machine "
                "translation, captioning, detection or image generation, and the full suite's German targets and "
                f"metrics come from the hf backend; use {section}.backend=hf")
        if self.suite == "lite" and self.backend != "lite":
            raise EnvConfigError(f"{section}.suite='lite' runs on the lite backend only, got "
                                 f"{section}.backend={self.backend!r}")
        if self.backend == "hf":
            self.hf_backend_config(section)
        if self.suite == "full":
            self.data_sources(section)
        if not isinstance(self.tools, (list, tuple)):
            raise EnvConfigError(f"bad value for '{section}.tools': {self.tools!r}; expected a list of "
                                 "'package.module:callable' entries")
        for entry in self.tools:
            if not isinstance(entry, str) or not _TOOL_ENTRY.match(entry):
                raise EnvConfigError(f"bad entry {entry!r} in '{section}.tools': expected 'package.module:callable' "
                                     "(a callable that receives the env's tool registry)")

    def hf_backend_config(self, section: str = "env"):
        """``hf`` as a validated :class:`~envs.openagi.hf.config.HFBackendConfig`."""
        from envs.openagi.hf.config import HFBackendConfig

        try:
            return HFBackendConfig.from_dict(self.hf)
        except (TypeError, ValueError) as e:
            raise EnvConfigError(f"bad value for '{section}.hf': {e}") from None

    def data_sources(self, section: str = "env") -> dict:
        """``datasets`` applied to the default hub sources of the full suite."""
        from envs.openagi.hf.sources import resolve_sources

        try:
            return resolve_sources(self.datasets)
        except (TypeError, ValueError) as e:
            raise EnvConfigError(f"bad value for '{section}.datasets': {e}") from None

    @property
    def cache_bytes(self) -> int:
        return self.cache_mib * 2**20
