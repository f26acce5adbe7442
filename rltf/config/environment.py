"""Environment variables in a run config: ``${oc.env:NAME}`` read only when ``env_interpolation`` is true.

OmegaConf resolves ``${oc.env:NAME}`` from the process's environment, so a config or an override could
copy any variable (an API key) into the saved ``config.yaml`` and the tracker. While
:func:`rltf.config.loading.load_config` resolves a config, :func:`environment_reads` swaps OmegaConf's
``oc.env`` resolver for one that refuses (``env_interpolation: false``, the default) or records each
read; :func:`environment_sourced` then names the keys whose values came from the environment, which
:func:`rltf.config.loading.config_to_yaml` saves as their ``${oc.env:NAME}`` text, never as the value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from omegaconf.resolvers import oc as oc_resolvers

FROM_ENVIRONMENT = "_rltf_from_environment"
"""The attribute of a loaded run config holding ``{key: its text}`` for the keys whose value was read from
the environment (``${oc.env:NAME}``): the config is saved with that text, not the value."""


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{dotted key: leaf}`` (a list, or an empty mapping, is a leaf)."""
    if not isinstance(tree, dict):
        return {prefix.rstrip("."): tree}
    out: dict[str, Any] = {}
    for k, v in tree.items():
        out.update(flatten(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
    return out


class Reads:
    """The environment variables ``${oc.env:NAME}`` read (``names``) or was refused (``refused``)."""

    def __init__(self):
        self.names: list[str] = []
        self.refused: list[str] = []


@contextlib.contextmanager
def environment_reads(allowed: bool) -> Iterator[Reads]:
    """While the block resolves a config, OmegaConf's ``oc.env`` resolver reads a variable only when
    ``allowed`` (``env_interpolation``) and records each read; the stock resolver is put back after."""
    reads = Reads()

    def guarded(key, *default):
        if not allowed:
            reads.refused.append(str(key))
            raise ValueError(f"reading the environment variable {key} is off (env_interpolation: false)")
        reads.names.append(str(key))
        return oc_resolvers.env(key, *default)

    OmegaConf.register_resolver("oc.env", guarded, replace=True, annotation_validation="off")
    try:
        yield reads
    finally:
        OmegaConf.register_resolver("oc.env", oc_resolvers.env, replace=True, annotation_validation="off")


def interpolation_flag(merged: DictConfig) -> tuple[bool, str | None]:
    """``(env_interpolation as the merged config sets it, None)``, or ``(False, the one-line problem)``
    when the flag itself cannot be read (it must be a literal true or false)."""
    with environment_reads(False) as reads:
        try:
            return bool(merged.env_interpolation), None
        except OmegaConfBaseException as e:
            if reads.refused:
                return False, refused_message(merged, "env_interpolation", reads.refused[-1])
            text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return False, f"bad value for 'env_interpolation': {text}; expected true or false"


def refused_message(merged: DictConfig, key: str | None, name: str) -> str:
    """The line refusing ``key``'s read of the environment variable ``name``."""
    raw = flatten(OmegaConf.to_container(merged, resolve=False)).get(key or "", None)
    shown = f"{raw!r} " if raw is not None else ""
    return (f"bad value for {key!r}: {shown}reads the environment variable {name} (${{oc.env:{name}}}), and "
            "reading the environment is off; set env_interpolation=true to allow it (what it reads is saved as its "
            "${oc.env:...} text, never as the value)")


def environment_sourced(merged: DictConfig, reads: Reads) -> dict[str, Any]:
    """``{key: unresolved text}`` of every leaf (a list: whole) whose resolution reads the environment
    (call inside the :func:`environment_reads` block that resolved ``merged``)."""
    sourced: dict[str, Any] = {}
    for key, raw in flatten(OmegaConf.to_container(merged, resolve=False)).items():
        if "${" not in str(raw):
            continue
        before = len(reads.names)
        value = OmegaConf.select(merged, key)
        if OmegaConf.is_config(value):
            OmegaConf.to_container(value, resolve=True)
        if len(reads.names) > before:
            sourced[key] = raw
    return sourced
