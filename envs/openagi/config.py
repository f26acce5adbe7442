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

from common.config_fields import bound_errors, num
from envs.config import EnvConfigError

SUITES = ("lite", "full")
BACKENDS = ("lite", "hf")
# "package.module:attribute" (the attribute may be dotted: "module:Class.method")
_TOOL_ENTRY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


__all__ = ["BACKENDS", "SUITES", "EnvConfigError", "OpenAGIEnvConfig"]  # (EnvConfigError: envs/config.py)


@dataclass
class OpenAGIEnvConfig:
    """The OpenAGI env's settings, which are also its ``env:`` section of a run config."""

    name: str = "openagi"
    """Which registered env the section is for (envs/registry.py): openagi (the default) selects
    these keys; travel selects the travel sandbox's (env.travel)."""
    suite: Literal["lite", "full"] = "lite"
    """The task suite: lite (38 offline tasks on small stand-in tools) or full (the paper's 185 tasks
    on hub data; needs backend: hf)."""
    backend: Literal["lite", "hf"] = "lite"
    """What runs the plans' tools: lite (the offline zoo) or hf (hub models per tool, set in env.hf)."""
    n_samples: int = num(20, gt=0)
    """Input / target samples per task; a plan's score is its mean metric over them."""
    samples_per_step: int = num(8, gt=0)
    """Samples each plan is scored on in an RLTF step, drawn afresh each step (the train split only;
    evaluation uses all n_samples)."""
    cache_mib: int = num(512, ge=0)
    """Memory budget in MiB of the cache of tool executions shared by the plans (0: no cache)."""
    data_seed: int = num(0, ge=0)
    """Seeds which samples each task gets (the train / validation / test split itself is persisted
    in envs/openagi/splits/)."""
    hf: dict[str, Any] = field(default_factory=dict)
    """backend: hf only: HFBackendConfig settings (model_ids per tool, metric_models, device, dtype,
    memory_budget_gib, batch sizes, max_new_tokens, ...; envs/openagi/hf/config.py)."""
    data_dir: str = "data/openagi"
    """suite: full only: the folder the hub data is built into once (envs/openagi/hf/suite.py) and
    read from afterwards."""
    datasets: dict[str, Any] = field(default_factory=dict)
    """suite: full only: per-source overrides of the hub datasets, e.g.
    {imagenet: {path, split, config, revision, streaming, columns}}."""
    max_image_side: int = num(256, ge=16)
    """suite: full only: images are shrunk so that their longer side is at most this many pixels."""
    tools: list[str] = field(default_factory=list)
    """Extra tools: "package.module:callable" entries, each called with the env's ToolRegistry when
    the env is built (to register tools on it); the decoder, SFT, RLTF and evaluation all see them."""

    def validate(self, section: str = "env") -> None:
        """Raise :class:`EnvConfigError` (keys named ``<section>.<key>``) for a config that cannot run."""
        if self.name != "openagi":
            raise EnvConfigError(f"bad value for '{section}.name': {self.name!r}; an OpenAGIEnvConfig is the "
                                 "openagi env's section")
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
        from envs.openagi.hf.config import HFBackendConfig  # heavy: the hf backend package imports torch

        try:
            return HFBackendConfig.from_dict(self.hf)
        except (TypeError, ValueError) as e:
            raise EnvConfigError(f"bad value for '{section}.hf': {e}") from None

    def data_sources(self, section: str = "env") -> dict:
        """``datasets`` applied to the default hub sources of the full suite."""
        from envs.openagi.hf.sources import resolve_sources  # heavy: the hf backend package imports torch

        try:
            return resolve_sources(self.datasets)
        except (TypeError, ValueError) as e:
            raise EnvConfigError(f"bad value for '{section}.datasets': {e}") from None

    @property
    def cache_bytes(self) -> int:
        return self.cache_mib * 2**20
