"""Image Denoising: wavelet BayesShrink on Y, Cb and Cr, each with its noise level estimated from the
image (Donoho's MAD)."""

from __future__ import annotations

import numpy as np

from envs.openagi.lite.image.common import _rgb, _ycbcr


def noise_sigma(channel: np.ndarray) -> float:
    """Robust noise estimate (Donoho's MAD of the finest diagonal Haar band); 0 if flat."""
    import pywt

    _, (_, _, hh) = pywt.dwt2(channel, "db1")
    hh = np.abs(hh[hh != 0])
    return float(np.median(hh) / 0.6745) if hh.size else 0.0


def denoise(img: np.ndarray) -> np.ndarray:
    """Wavelet BayesShrink on Y, Cb and Cr, each with its own estimated noise level."""
    from skimage.restoration import denoise_wavelet

    chans = list(_ycbcr(img))
    for i, c in enumerate(chans):
        sigma = noise_sigma(c)
        if sigma > 0:
            chans[i] = denoise_wavelet(
                c, sigma=sigma, method="BayesShrink", mode="soft", rescale_sigma=False
            )
    return _rgb(*chans)
