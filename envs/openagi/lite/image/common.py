"""The input check of every image expert and the YCbCr conversions the denoiser and colorizer share."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from envs.openagi.task_data.images import LUMA


def _check_images(tool: str, batch: Sequence[object]) -> list[np.ndarray]:
    out = []
    for x in batch:
        if not isinstance(x, np.ndarray) or x.ndim != 3 or x.shape[2] != 3 or min(x.shape[:2]) < 2:
            got = getattr(x, "shape", type(x).__name__)
            raise TypeError(f"{tool} expects (H, W, 3) float image arrays, got {got}")
        out.append(np.clip(np.nan_to_num(x.astype(np.float32, copy=False)), 0.0, 1.0))
    return out


def _ycbcr(img: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = img @ LUMA
    return y, (img[..., 2] - y) * 0.564, (img[..., 0] - y) * 0.713


def _rgb(y: np.ndarray, cb: np.ndarray, cr: np.ndarray) -> np.ndarray:
    r = y + 1.403 * cr
    b = y + 1.773 * cb
    g = (y - LUMA[0] * r - LUMA[2] * b) / LUMA[1]
    return np.clip(np.stack([r, g, b], axis=-1), 0.0, 1.0).astype(np.float32)


def shape_groups(images: Sequence[np.ndarray]) -> dict[Hashable, list[int]]:
    """The positions of ``images`` grouped by shape (first-seen order): what a batched expert stacks."""
    groups: dict[Hashable, list[int]] = {}
    for i, x in enumerate(images):
        groups.setdefault(x.shape, []).append(i)
    return groups
