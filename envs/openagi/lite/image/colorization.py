"""Colorization: keep the luminance, predict chroma from it with a kernel regression fitted on the
TRAIN photo crops (tabulated and cached), smoothed spatially."""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np

from envs.openagi.lite.image.caching import _cached
from envs.openagi.lite.image.common import _rgb, _ycbcr
from envs.openagi.task_data.images import LUMA, TRAIN_PHOTOS, train_photo_crops

COLOR_SMOOTH = 0.25
"""Chroma is smoothed with a Gaussian of sigma = this x the image's longer side."""

_COLORIZER_CONFIG = {
    "version": 3,
    "sources": list(TRAIN_PHOTOS),
    "n_crops": 600,
    "crop_seed": 1,
    "bandwidth": 0.04,
    "grid": 256,
}


def train_colorizer(config: dict = _COLORIZER_CONFIG) -> np.ndarray:
    """Fit luminance -> (Cb, Cr) on every pixel of the TRAIN crops; return a (grid, 2) table.

    Nadaraya-Watson kernel regression (Gaussian kernel of width ``bandwidth`` in luminance),
    computed on a fine histogram: the expected chroma of a pixel given its luminance.
    """
    grid = config["grid"]
    crops = np.stack(train_photo_crops(config["n_crops"], config["crop_seed"]))
    y, cb, cr = _ycbcr(crops)
    bins = np.clip(np.rint(y.ravel() * (grid - 1)).astype(np.int64), 0, grid - 1)
    count = np.bincount(bins, minlength=grid).astype(np.float64)
    sums = np.stack([np.bincount(bins, weights=c.ravel(), minlength=grid) for c in (cb, cr)], axis=-1)
    offsets = np.arange(grid) / (grid - 1)
    kernel = np.exp(-0.5 * ((offsets[:, None] - offsets[None, :]) / config["bandwidth"]) ** 2)
    weight = kernel @ count
    table = (kernel @ sums) / np.maximum(weight, 1e-12)[:, None]
    return table.astype(np.float32)


@lru_cache(maxsize=1)
def colorizer_table() -> np.ndarray:
    """The trained luminance -> chroma table (trained on first use, then cached on disk)."""
    return _cached("colorizer", _COLORIZER_CONFIG, lambda c: {"table": train_colorizer(c)})["table"]


def colorize(img: np.ndarray, table: np.ndarray | None = None) -> np.ndarray:
    """Keep the luminance, replace the chroma by the learned prediction (smoothed)."""
    table = colorizer_table() if table is None else table
    y = img @ LUMA
    grid = np.linspace(0.0, 1.0, len(table))
    chroma = np.stack([np.interp(y, grid, table[:, k]) for k in range(2)], axis=-1).astype(np.float32)
    sigma = COLOR_SMOOTH * max(y.shape)
    chroma = cv2.GaussianBlur(chroma, (0, 0), sigmaX=sigma, sigmaY=sigma, borderType=cv2.BORDER_REFLECT)
    return _rgb(y, chroma[..., 0], chroma[..., 1])
