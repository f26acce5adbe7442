"""Image Deblurring: Wiener deconvolution of an assumed Gaussian PSF with a small fixed noise-to-signal
ratio. :func:`deblur_batch` (what the registry runs) transforms all same-sized images of a batch at
once, bit for bit as :func:`deblur` does each."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from envs.openagi.lite.image.common import shape_groups
from envs.openagi.task_data.images import BLUR_SIGMA

DEBLUR_SIGMA = BLUR_SIGMA
"""The PSF the deblurrer assumes (the benchmark's blur; a real deblurrer is trained for one)."""
DEBLUR_NSR = 0.004
"""Wiener noise-to-signal ratio: small, i.e. tuned for blur without noise."""
_DEBLUR_PAD = 12


@lru_cache(maxsize=64)
def _wiener_filter(h: int, w: int, sigma: float, nsr: float) -> np.ndarray:
    """Frequency response of the Wiener inverse of a Gaussian PSF, for rfft2 of an h x w image."""
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    otf = np.exp(-2.0 * np.pi**2 * sigma**2 * (fy**2 + fx**2))  # a Gaussian's transfer function
    g = otf / (otf**2 + nsr)
    g.setflags(write=False)
    return g


def deblur(img: np.ndarray, sigma: float = DEBLUR_SIGMA, nsr: float = DEBLUR_NSR) -> np.ndarray:
    """Wiener deconvolution of a Gaussian blur (mirror-padded so borders do not wrap)."""
    pad = min(_DEBLUR_PAD, img.shape[0] - 1, img.shape[1] - 1)
    x = np.pad(img, ((pad, pad), (pad, pad), (0, 0)), mode="symmetric") if pad > 0 else img
    g = _wiener_filter(x.shape[0], x.shape[1], float(sigma), float(nsr))
    out = np.fft.irfft2(np.fft.rfft2(x, axes=(0, 1)) * g[..., None], s=x.shape[:2], axes=(0, 1))
    if pad > 0:
        out = out[pad:-pad, pad:-pad]
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def deblur_batch(images: Sequence[np.ndarray], sigma: float = DEBLUR_SIGMA,
                 nsr: float = DEBLUR_NSR) -> list[np.ndarray]:
    """:func:`deblur` of each image, the same-sized ones stacked into one FFT."""
    out: list[np.ndarray] = [None] * len(images)  # type: ignore[list-item]
    for shape, idx in shape_groups(images).items():
        pad = min(_DEBLUR_PAD, shape[0] - 1, shape[1] - 1)
        x = np.stack([images[i] for i in idx])
        if pad > 0:
            x = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode="symmetric")
        g = _wiener_filter(x.shape[1], x.shape[2], float(sigma), float(nsr))
        y = np.fft.irfft2(np.fft.rfft2(x, axes=(1, 2)) * g[..., None], s=x.shape[1:3], axes=(1, 2))
        if pad > 0:
            y = y[:, pad:-pad, pad:-pad]
        y = np.clip(y, 0.0, 1.0).astype(np.float32)
        for j, i in enumerate(idx):
            out[i] = y[j].copy()  # (not a view: the cache counts each output's own bytes)
    return out
