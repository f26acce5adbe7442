"""Image Deblurring: Wiener deconvolution of an assumed Gaussian PSF with a small fixed noise-to-signal
ratio."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

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
