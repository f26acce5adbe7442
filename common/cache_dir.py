"""rltf's cache folder: where learned lite experts keep what they trained (so a second run does not
retrain), the oracle store, the converted SmolLM2 planner."""

from __future__ import annotations

import os
from pathlib import Path


def rltf_cache_dir(*parts: str) -> Path:
    """``$RLTF_CACHE_DIR`` or ``~/.cache/rltf``, joined with ``parts`` and created."""
    root = Path(os.environ.get("RLTF_CACHE_DIR") or Path.home() / ".cache" / "rltf")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
