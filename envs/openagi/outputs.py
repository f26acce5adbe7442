"""What an expert may return for one sample, checked before it is scored or cached.

An expert that returns nothing usable (None, a NaN or infinite number, an empty array, an array
holding NaN / inf, text where an image belongs...) has failed that sample just as one that raises:
:func:`output_problem` says why, the executor records it as the sample's error (it then scores 0
with the reason in the result's ``sample_errors``) and never caches it.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from envs.openagi.registry import IMAGE, TEXT


def output_problem(value: Any, modality: str) -> str | None:
    """Why ``value`` is not a usable output of ``modality`` (``returned ...``), or None when it is.

    ``text``: a ``str``; ``image``: a float array of shape (H, W, 3) with H, W >= 1 and finite
    values; any other modality (a tool registered from outside): anything but None, a non-finite
    number or an empty / non-finite array."""
    if value is None:
        return "returned None"
    if modality == TEXT:
        return None if isinstance(value, str) else f"returned {_a(value)}, not text (str)"
    if modality == IMAGE:
        if not isinstance(value, np.ndarray):
            return f"returned {_a(value)}, not an image (a float array of shape (H, W, 3))"
        if value.ndim != 3 or value.shape[2] != 3 or value.shape[0] < 1 or value.shape[1] < 1:
            return f"returned an array of shape {value.shape}, not an image of shape (H, W, 3)"
        if not np.issubdtype(value.dtype, np.floating):
            return f"returned an array of dtype {value.dtype}, not a float image"
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return None if math.isfinite(value) else f"returned {value!r}"
    if isinstance(value, np.ndarray):
        if value.size == 0:
            return f"returned an empty array (shape {value.shape})"
        if np.issubdtype(value.dtype, np.number) and not np.isfinite(value).all():
            return "returned an array holding NaN or infinite values"
    return None


def _a(value: Any) -> str:
    """``a str`` / ``an int``: the type of ``value`` with its article."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
