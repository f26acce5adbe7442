"""Learned experts' arrays, trained once per config and kept as .npz under ``rltf_cache_dir('lite')``."""

from __future__ import annotations

import hashlib
import io
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from common.atomic import write_atomic
from common.cache_dir import rltf_cache_dir


def _config_key(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


def _cached(
    name: str, config: dict, train: Callable[[dict], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Arrays trained once per config and kept as .npz under ``rltf_cache_dir('lite')``."""
    path: Path = rltf_cache_dir("lite") / f"{name}-{_config_key(config)}.npz"
    if path.exists():
        try:
            # the file is ours to close: np.load leaves it open when a damaged archive fails to load
            with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as f:
                arrays = {k: f[k] for k in f.files}
            if not arrays:
                raise ValueError("no arrays")
            return arrays
        except Exception as exc:  # truncated (BadZipFile), empty (EOFError), garbage: never use it
            warnings.warn(f"learned-expert cache {path} is damaged ({type(exc).__name__}: {exc}); "
                          f"retraining {name} and overwriting it", RuntimeWarning, stacklevel=2)
    arrays = train(config)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_atomic(path, buf.getvalue())
    return arrays
