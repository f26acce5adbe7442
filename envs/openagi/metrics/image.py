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
from scipy.ndimage import uniform_filter
from skimage.metrics import structural_similarity
from skimage.util import crop

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


def image_similarity_batch(preds: Sequence[Any], targets: Sequence[np.ndarray], batched: bool = True) -> list[float]:
    """:func:`image_similarity` for each (pred, target) pair.

    ``batched`` (the default) computes the SSIM maps of all same-sized pairs at once, bit for bit
    what :func:`image_similarity` computes pair by pair (``batched=False``)."""
    if len(preds) != len(targets):
        raise ValueError(f"got {len(preds)} predictions for {len(targets)} targets")
    if not batched:
        return [image_similarity(p, t) for p, t in zip(preds, targets)]
    out = [0.0] * len(preds)
    groups: dict[tuple, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for i, (pred, target) in enumerate(zip(preds, targets)):
        t = _as_rgb(target)
        if t is None:
            got = getattr(target, "shape", type(target).__name__)
            raise ValueError(f"target must be an (H, W, 3) image array, got {got}")
        p = None if _non_finite(pred) else _as_rgb(pred)
        if p is None:
            continue
        if p.shape[:2] != t.shape[:2]:
            p = cv2.resize(p, (t.shape[1], t.shape[0]), interpolation=cv2.INTER_NEAREST)
        side = min(t.shape[:2])
        win = min(_SSIM_WIN, side if side % 2 else side - 1)
        if win < 3:
            out[i] = float(max(0.0, 1.0 - np.abs(p - t).mean()))
        else:
            groups.setdefault((t.shape, win), []).append((i, p, t))
    for (_, win), items in groups.items():
        sims = _ssim_stack(np.stack([p for _, p, _ in items]), np.stack([t for _, _, t in items]), win)
        for (i, _, _), s in zip(items, sims):
            out[i] = float(min(1.0, max(0.0, s)))
    return out


def _ssim_stack(preds: np.ndarray, targets: np.ndarray, win: int) -> list[np.floating]:
    """``structural_similarity(p, t, channel_axis=-1, data_range=1.0, win_size=win)`` of each pair of
    two (n, h, w, 3) float32 stacks: skimage's steps (uniform filter, sample covariance, K1 = 0.01,
    K2 = 0.03, mean over the map less its filter-radius border in float64, channel mean in float32),
    on all 3n channels at once."""
    n, h, w, c = preds.shape
    x = np.ascontiguousarray(np.moveaxis(preds, -1, 1)).reshape(n * c, h, w)
    y = np.ascontiguousarray(np.moveaxis(targets, -1, 1)).reshape(n * c, h, w)

    def filt(a: np.ndarray) -> np.ndarray:
        return uniform_filter(a, size=win, axes=(1, 2))

    np_ = win**2
    cov_norm = np_ / (np_ - 1)
    ux, uy = filt(x), filt(y)
    uxx, uyy, uxy = filt(x * x), filt(y * y), filt(x * y)
    vx = cov_norm * (uxx - ux * ux)
    vy = cov_norm * (uyy - uy * uy)
    vxy = cov_norm * (uxy - ux * uy)
    c1, c2 = (0.01 * 1.0) ** 2, (0.03 * 1.0) ** 2
    a1, a2 = 2 * ux * uy + c1, 2 * vxy + c2
    b1, b2 = ux**2 + uy**2 + c1, vx + vy + c2
    s = (a1 * a2) / (b1 * b2)
    pad = (win - 1) // 2
    per_channel = np.empty((n, c), dtype=s.dtype)
    for k, sk in enumerate(s):  # one 2-D map at a time: skimage's summation order
        per_channel[k // c, k % c] = crop(sk, pad).mean(dtype=np.float64)
    return [m.mean() for m in per_channel]
