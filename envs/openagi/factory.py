"""The OpenAGI env built from its config: validated, with its backend, tools, tasks and metrics.

:func:`make_env` gives one env, :func:`make_envs` the two a training run needs (they share one
registry, one task set and, on the hf backend, one model cache):

* the **train** env: the persisted split's train tasks, each plan scored on ``samples_per_step``
  samples drawn per call (``score(..., rng=...)``);
* the **held-out** env: every task (``split="all"``; the caller picks validation / test ids from
  the persisted split), each plan scored on all of the task's samples.

The registry is the backend's (``lite``: the offline zoo; ``hf``: hub models, loaded lazily)
plus every ``tools`` entry of the config: ``"package.module:callable"``, called with the registry
(:func:`apply_tools`). The hf backend's metric models score the full suite's metrics through the
env's own metric table. :func:`describe_env` says all of this without loading anything.
"""

from __future__ import annotations

import contextlib
import importlib
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from common.config_fields import as_settings
from common.errors import user_code_failure
from envs.openagi.config import EnvConfigError, OpenAGIEnvConfig
from envs.openagi.env import OpenAGIEnv
from envs.openagi.registry import ToolRegistry
from envs.openagi.split import load_split
from envs.openagi.suite import task_specs
from envs.openagi.tools import OPENAGI_TOOLS

HELD_OUT = "all"  # the held-out env holds every task; validation / test ids come from the persisted split


def as_config(config: OpenAGIEnvConfig | Mapping[str, Any] | None) -> OpenAGIEnvConfig:
    """A :class:`OpenAGIEnvConfig` from itself, a mapping of its fields, or ``None`` (the defaults)."""
    return as_settings(OpenAGIEnvConfig, config, EnvConfigError, "env config")


# ------------------------------------------------------------------------------------ tools
def resolve_tool_hook(entry: str, section: str = "env") -> Callable[[ToolRegistry], Any]:
    """The callable an ``env.tools`` entry ``"package.module:attribute"`` names."""
    module_name, sep, attr = entry.partition(":") if isinstance(entry, str) else ("", "", "")
    if not sep or not module_name or not attr:
        raise EnvConfigError(f"bad entry {entry!r} in '{section}.tools': expected 'package.module:callable'")
    try:
        obj: Any = importlib.import_module(module_name)
    except BaseException as e:  # whatever the user's module raises on import, sys.exit and Ctrl-C included
        raise EnvConfigError(f"'{section}.tools' entry {entry!r}: cannot import module {module_name!r} "
                             f"({user_code_failure(e)})") from e
    for i, part in enumerate(attr.split(".")):
        if not hasattr(obj, part):
            owner = ".".join([module_name, *attr.split(".")[:i]])
            raise EnvConfigError(f"'{section}.tools' entry {entry!r}: {owner!r} has no attribute {part!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise EnvConfigError(f"'{section}.tools' entry {entry!r}: {module_name}.{attr} is a "
                             f"{type(obj).__name__}, not a callable receiving the tool registry")
    return obj


def apply_tools(registry: ToolRegistry, entries: list[str], section: str = "env") -> ToolRegistry:
    """Call every ``tools`` entry with ``registry`` (in order); each registers its tools on it."""
    for entry in entries:
        hook = resolve_tool_hook(entry, section)
        try:
            hook(registry)
        except BaseException as e:  # the user's hook failed (sys.exit and Ctrl-C included): one line naming it
            raise EnvConfigError(f"'{section}.tools' entry {entry!r} failed on the env's registry: "
                                 f"{user_code_failure(e)}") from e
    return registry


# ---------------------------------------------------------------------------------- building
class _Parts:
    """What the envs of one config share: the registry, the metrics, the tasks (full suite)."""

    def __init__(self, config: OpenAGIEnvConfig, device: str | None, build_guard):
        self.config = config
        self.metrics: dict[str, Any] = {}
        self.tasks = None
        if config.backend == "hf":
            from envs.openagi.hf import HFBackend  # heavy: the hf backend imports torch

            hf = config.hf_backend_config()
            if device is not None and device.startswith("cuda") and (hf.device or "cuda") == "cuda":
                hf.device = device  # one GPU per process
            backend = HFBackend(hf)
            self.registry = backend.registry()
            self.metrics = backend.metric_models.batch_metrics()
        else:
            from envs.openagi.lite import build_lite_registry  # heavy: the lite experts (scikit-learn, scikit-image)

            self.registry = build_lite_registry()
        apply_tools(self.registry, list(config.tools))
        if config.suite == "full":
            from envs.openagi.hf.suite import build_full_suite  # heavy: the hf backend imports torch

            with build_guard if build_guard is not None else contextlib.nullcontext():
                self.tasks = build_full_suite(config.data_dir, config.n_samples, config.data_seed, self.registry,
                                              sources=config.datasets, max_image_side=config.max_image_side)

    def env(self, split: str) -> OpenAGIEnv:
        c = self.config
        per_step = c.samples_per_step if split == "train" else None
        common = dict(suite=c.suite, backend=c.backend, registry=self.registry, samples_per_step=per_step,
                      cache_bytes=c.cache_bytes, metrics=self.metrics)
        if self.tasks is None:
            return OpenAGIEnv(split=split, n_samples=c.n_samples, data_seed=c.data_seed, **common)
        if split == HELD_OUT:
            return OpenAGIEnv(split=split, tasks=self.tasks, **common)
        from envs.openagi.hf.suite import split_tasks  # heavy: the hf backend imports torch

        return OpenAGIEnv(split=split, tasks=split_tasks(self.tasks, c.suite)[split], **common)


def make_env(config: OpenAGIEnvConfig | Mapping[str, Any] | None = None, split: str = "train", *,
             device: str | None = None, build_guard=None) -> OpenAGIEnv:
    """One env of ``split`` (train, validation, test or all). The train split scores a plan on
    ``samples_per_step`` samples, every other split on all of them. ``device``: where hf experts
    configured for ``cuda`` (or no device) run, e.g. this process's GPU; ``build_guard``: a
    context manager the one-time build of the full suite's data runs in (e.g.
    ``accelerator.main_process_first()``)."""
    config = as_config(config)
    config.validate()
    return _Parts(config, device, build_guard).env(split)


def gym_entry_point(config: OpenAGIEnvConfig | Mapping[str, Any] | None = None, split: str = "train", *,
                    device: str | None = None, build_guard=None, render_mode: str | None = None,
                    **env_kwargs) -> OpenAGIEnv:
    """``gym.make("OpenAGI-Lite-v0", ...)``: with ``config`` the env :func:`make_env` builds from
    it; without, ``OpenAGIEnv(split=split, **env_kwargs)`` on the lite suite and backend unless
    the keywords say otherwise."""
    if config is None:
        if device is not None or build_guard is not None:
            raise TypeError("device= and build_guard= need a config=: they are make_env arguments")
        return OpenAGIEnv(split=split, render_mode=render_mode, **{"suite": "lite", "backend": "lite", **env_kwargs})
    if env_kwargs:
        raise TypeError(f"gym.make with config= takes no OpenAGIEnv keywords ({', '.join(sorted(env_kwargs))}): "
                        "set them in the config")
    env = make_env(config, split, device=device, build_guard=build_guard)
    env.render_mode = render_mode
    return env


gym_entry_point.metadata = OpenAGIEnv.metadata  # gym.make reads the render modes off the entry point


def make_envs(config: OpenAGIEnvConfig | Mapping[str, Any] | None = None, *, device: str | None = None,
              build_guard=None) -> tuple[OpenAGIEnv, OpenAGIEnv]:
    """``(train env, held-out env)`` sharing one registry and task set (see the module docstring)."""
    config = as_config(config)
    config.validate()
    parts = _Parts(config, device, build_guard)
    return parts.env("train"), parts.env(HELD_OUT)


# -------------------------------------------------------------------------------- describing
def describe_env(config: OpenAGIEnvConfig | Mapping[str, Any] | None = None) -> list[str]:
    """What :func:`make_envs` would build and load, as lines of text; validates, loads nothing (no
    weights, no datasets). Each ``tools`` entry is resolved (its module imported: the user's code runs,
    as ``env.name``'s does), so a dry run refuses an entry the run would refuse; none is called."""
    config = as_config(config)
    config.validate()
    for entry in config.tools:
        resolve_tool_hook(entry)
    return _suite_lines(config) + _expert_lines(config)


def _suite_lines(e: OpenAGIEnvConfig) -> list[str]:
    specs = task_specs(e.suite)
    linear = sum(len(s.inputs) == 1 for s in specs)
    split = load_split(e.suite)
    lines = [f"suite       {e.suite}: {len(specs)} tasks: {linear} linear, {len(specs) - linear} nonlinear; split "
             + ", ".join(f"{k} {len(v)}" for k, v in split.items())
             + f" (envs/openagi/splits/{e.suite}.json)",
             f"            {e.n_samples} samples per task ({e.samples_per_step} per plan per training step), "
             f"data seed {e.data_seed}, execution cache {e.cache_mib} MiB"]
    if e.suite == "full":
        from envs.openagi.hf.suite import full_suite_dir, metric_for, source_for  # heavy: the hf backend imports torch

        metrics = Counter(metric_for(s) for s in specs)
        lines.append("            metrics: " + ", ".join(f"{m} {n} tasks" for m, n in sorted(metrics.items()))
                     + " (overall = task-weighted mean, as the paper's weighted average)")
        where = full_suite_dir(e.data_dir, e.n_samples, e.data_seed, e.datasets, e.max_image_side)
        built = (where / "manifest.json").is_file()
        lines.append(f"            data: {where} ("
                     + ("built: read from disk" if built
                        else "not built yet: built once at the start of the run (downloads the sources below, "
                             "runs Machine Translation)")
                     + ")")
        uses = Counter(source_for(s) for s in specs)
        lines.append(f"datasets    (images shrunk to <= {e.max_image_side} px; override with env.datasets.<name>)")
        for name, src in e.data_sources().items():
            lines.append(f"            {name:<15} {src.describe()}; {uses[name]} tasks")
    return lines


def _expert_lines(e: OpenAGIEnvConfig) -> list[str]:
    extra = ([f"            extra tools: {', '.join(e.tools)} (each called with the registry when the env is built)"]
             if e.tools else [])
    if e.backend == "lite":
        return [f"experts     lite (offline zoo, no downloads): {', '.join(s.name for s in OPENAGI_TOOLS)} "
                "(those the lite suite needs are implemented)", *extra]
    from envs.openagi.hf import describe_models  # heavy: the hf backend imports torch

    hf = e.hf_backend_config()
    budget = f"{hf.memory_budget_gib:g} GiB" if hf.memory_budget_gib else "70% of GPU memory (50% of RAM on CPU)"
    lines = [f"experts     hf backend: device {hf.device or 'cuda if available'}, dtype {hf.dtype} "
             f"(metrics {hf.metrics_dtype}), model cache budget {budget}, batch {hf.batch_size}; each model "
             "loads on first use"]
    rows = describe_models(hf)
    width = max(len(r["name"]) for r in rows)
    for role, title in (("tool", "tools"), ("metric", "metric models")):
        lines.append(f"            {title}:")
        for r in (r for r in rows if r["role"] == role):
            spec = hf.expert(r["name"]) if role == "tool" else hf.metric_model(r["name"])
            dtype = r["dtype"]
            if r["device"].startswith("cuda") and dtype in ("auto", "float16", "bfloat16"):
                # a GPU config described on a machine without CUDA: what the GPU will run
                dtype = _gpu_dtype(dtype, tuple(spec.half))
            note = " (optional extra: pip install diffusers)" if r["library"] == "diffusers" else ""
            lines.append(f"              {r['name']:<{width}}  {r['model_id']}  [{r['library']}, {dtype}]{note}")
    return lines + extra


def _gpu_dtype(requested: str, halves: tuple[str, ...]) -> str:
    """The dtype the hf loader picks on a GPU (``resolve_dtype`` without a device to ask)."""
    if requested == "auto":  # bfloat16 on Ampere and newer (float16 on older GPUs)
        return "bfloat16" if "bfloat16" in halves else "float32"
    return requested if requested in halves else "float32"
