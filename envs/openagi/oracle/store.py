"""Oracle entries on disk: one JSON file per task key under ``rltf_cache_dir('oracle')``.

The oracle is deterministic and costs seconds per task (every valid plan executed on every sample),
so it is searched once per key (:mod:`envs.openagi.oracle.fingerprint`) and read back by every
later run, evaluation and comparison arm. Each file holds the entry, its key and a checksum; a
file that does not parse, names another key or fails its checksum (truncated, overwritten with
garbage) is searched again and rewritten, and the result is the one the search gives. Files are
written atomically (:func:`common.atomic.write_atomic`): concurrent runs searching the same task
write the same bytes, and a reader sees one whole file or none.

``RLTF_ORACLE_CACHE=0`` searches every time (nothing read or written).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from common.atomic import write_atomic
from common.cache_dir import rltf_cache_dir

logger = logging.getLogger(__name__)

DISABLE_VARIABLE = "RLTF_ORACLE_CACHE"
FIELDS = {"task_id": int, "reference_plan": str, "reference_score": float, "oracle_plan": str,
          "oracle_score": float, "n_plans": int}
"""The stored fields of an :class:`envs.openagi.oracle.OracleEntry` and their types."""


def cache_enabled() -> bool:
    return os.environ.get(DISABLE_VARIABLE, "1").strip().lower() not in ("0", "false", "no", "off")


def default_dir() -> Path:
    return rltf_cache_dir("oracle")


def entry_path(directory: Path, key: str) -> Path:
    return Path(directory) / f"{key}.json"


def _checksum(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def load(directory: Path, key: str) -> dict[str, Any] | None:
    """The stored fields of ``key``; None when there is no file, or (logged) a damaged one."""
    path = entry_path(directory, key)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
        fields = doc["entry"]
        if doc.get("key") != key:
            raise ValueError(f"it holds key {str(doc.get('key'))[:16]}...")
        if set(fields) != set(FIELDS) or not all(_typed(fields[k], t) for k, t in FIELDS.items()):
            raise ValueError(f"its fields are {sorted(fields)}")
        if doc.get("checksum") != _checksum(fields):
            raise ValueError("its checksum does not match")
        return fields
    except Exception as exc:  # truncated, garbage, another layout: search again and overwrite it
        logger.info("oracle cache %s is damaged (%s: %s); searching again", path, type(exc).__name__, exc)
        return None


def _typed(value: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, kind) and not isinstance(value, bool)


def save(directory: Path, key: str, fields: dict[str, Any]) -> Path:
    """Write ``fields`` (:data:`FIELDS`) under ``key``, atomically."""
    doc = {"key": key, "checksum": _checksum(fields), "entry": fields}
    return write_atomic(entry_path(directory, key), json.dumps(doc, sort_keys=True, indent=1) + "\n")
