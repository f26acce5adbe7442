"""Bounded numeric fields for settings dataclasses, the check of their bounds, and the coercion of
a mapping into a settings dataclass (:func:`as_settings`).

Env configs (OpenAGI's ``OpenAGIEnvConfig``) declare ``n_samples: int = num(20, gt=0)``; rltf's run
config uses the same helper for its own sections, so one run config is checked by one
rule at every depth (``rltf.config.loading.validate_config``) and an env config built on its own is
checked the same way (:func:`bound_errors`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import field
from typing import Any

OPS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def num(default: float | int, *, ge: float | None = None, gt: float | None = None,
        le: float | None = None, lt: float | None = None) -> Any:
    """A numeric dataclass field with bounds (kept in the field's metadata, checked by :func:`bound_errors`)."""
    bounds = {k: v for k, v in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt)) if v is not None}
    return field(default=default, metadata={"bounds": bounds})


def bounded_fields(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any, dict]]:
    """``(dotted key, value, bounds)`` of every :func:`num` field of ``obj`` and its nested dataclasses."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            yield from bounded_fields(value, f"{prefix}{f.name}.")
        elif "bounds" in f.metadata:
            yield f"{prefix}{f.name}", value, f.metadata["bounds"]


def bound_errors(obj: Any, prefix: str = "") -> Iterator[str]:
    """A message per field of ``obj`` outside its bounds, not a number, or not finite (``inf``,
    ``nan``: no setting means either), naming the key."""
    for key, value, bounds in bounded_fields(obj, prefix):
        expected = " and ".join(f"{OPS[o]} {v}" for o, v in bounds.items())
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            yield f"bad value for {key!r}: {value!r}; expected a number {expected}".rstrip()
            continue
        if not math.isfinite(value):
            yield f"bad value for {key!r}: {value!r}; expected a finite number {expected}".rstrip()
            continue
        if not all(_holds(value, op, limit) for op, limit in bounds.items()):
            kind = "an integer" if isinstance(value, int) else "a number"
            yield f"bad value for {key!r}: {value!r}; expected {kind} {expected}"


def _holds(value: float, op: str, limit: float) -> bool:
    return {"ge": value >= limit, "gt": value > limit, "le": value <= limit, "lt": value < limit}[op]


def as_settings(cls: type, config: Any, error: type[Exception], what: str) -> Any:
    """An instance of the settings dataclass ``cls`` from itself, a mapping of its fields, or
    ``None`` (the defaults); a mapping with an unknown key raises ``error`` naming ``what``."""
    if config is None:
        return cls()
    if isinstance(config, cls):
        return config
    if isinstance(config, Mapping):
        try:
            return cls(**dict(config))
        except TypeError as e:
            raise error(f"bad {what} {dict(config)!r}: {e}") from None
    raise TypeError(f"expected a {cls.__name__} or a mapping of its fields, got {type(config).__name__}")
