"""Image similarity for image-output tasks: SSIM over the RGB channels, in [0, 1].

OpenAGI scored images by cosine similarity of ViT embeddings; offline we use SSIM, which is
sensitive to exactly what restoration changes (noise, blur, lost detail, lost colour).

A prediction of the wrong size is first resized to the target's size with nearest-neighbour
interpolation (the metric does not interpolate on the prediction's behalf): an image that was
never upscaled is scored as its blocky enlargement, and one upscaled when it did not need to be
as its decimation; both lose some score but are not scored 0. A prediction that is not an image
array (e.g. a string) or holds NaN or inf scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np
from skimage.metrics import structural_similarity

_SSIM_WIN = 7  # skimage's default Gaussian-free 7x7 window


def _as_rgb(x: Any) -> np.ndarray | None:
    """A float32 (H, W, 3) array in [0, 1], or None when ``x`` is not an image."""
    if not isinstance(x, np.ndarray) or x.size == 0 or not np.issubdtype(x.dtype, np.number):
        return None
    if x.ndim == 3 and x.shape[2] == 1:
        x = x[..., 0]
    if x.ndim == 2:
        x = np.repeat(x[..., None], 3, axis=2)
    if x.ndim != 3 or x.shape[2] != 3:
        return None
    x = np.nan_to_num(x.astype(np.float32), nan=0.0, posinf=1.0, neginf=0.0)
    return np.clip(x, 0.0, 1.0)


def _non_finite(x: Any) -> bool:
    """An image array holding NaN or inf."""
    return (isinstance(x, np.ndarray) and x.size > 0 and np.issubdtype(x.dtype, np.inexact)
            and not bool(np.isfinite(x).all()))


def image_similarity(pred: Any, target: np.ndarray) -> float:
    """SSIM of ``pred`` against ``target`` over RGB (data range 1), negatives clipped to 0.

    ``pred`` is resized (nearest neighbour) to the target's size first when the sizes differ.
    """
    t = _as_rgb(target)
    if t is None:
        got = getattr(target, "shape", type(target).__name__)
        raise ValueError(f"target must be an (H, W, 3) image array, got {got}")
    if _non_finite(pred):  # a NaN/inf image is no restoration of anything (zeros would score ~0.1)
        return 0.0
    p = _as_rgb(pred)
    if p is None:
        return 0.0
    if p.shape[:2] != t.shape[:2]:
        p = cv2.resize(p, (t.shape[1], t.shape[0]), interpolation=cv2.INTER_NEAREST)
    side = min(t.shape[:2])
    win = min(_SSIM_WIN, side if side % 2 else side - 1)
    if win < 3:  # too small for a structural comparison: fall back to 1 - mean absolute error
        return float(max(0.0, 1.0 - np.abs(p - t).mean()))
    s = structural_similarity(p, t, channel_axis=-1, data_range=1.0, win_size=win)
    return float(min(1.0, max(0.0, s)))


def image_similarity_batch(preds: Sequence[Any], targets: Sequence[np.ndarray]) -> list[float]:
    """:func:`image_similarity` for each (pred, target) pair."""
    if len(preds) != len(targets):
        raise ValueError(f"got {len(preds)} predictions for {len(targets)} targets")
    return [image_similarity(p, t) for p, t in zip(preds, targets)]
