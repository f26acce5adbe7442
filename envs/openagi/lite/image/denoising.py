"""Image Denoising: wavelet BayesShrink on Y, Cb and Cr, each with its noise level estimated from the
image (Donoho's MAD).

:func:`denoise` is one image through ``skimage.restoration.denoise_wavelet``; :func:`denoise_batch`
(what the registry runs) is the same computation for a batch, every channel of every same-sized
image in one PyWavelets transform: bit for bit the same outputs (``tests/envs/openagi/test_reward_batched.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pywt
from skimage.restoration import denoise_wavelet

from envs.openagi.lite.image.common import _rgb, _ycbcr, shape_groups

_WAVELET = "db1"


def noise_sigma(channel: np.ndarray) -> float:
    """Robust noise estimate (Donoho's MAD of the finest diagonal Haar band); 0 if flat."""
    _, (_, _, hh) = pywt.dwt2(channel, "db1")
    hh = np.abs(hh[hh != 0])
    return float(np.median(hh) / 0.6745) if hh.size else 0.0


def denoise(img: np.ndarray) -> np.ndarray:
    """Wavelet BayesShrink on Y, Cb and Cr, each with its own estimated noise level."""
    chans = list(_ycbcr(img))
    for i, c in enumerate(chans):
        sigma = noise_sigma(c)
        if sigma > 0:
            chans[i] = denoise_wavelet(
                c, sigma=sigma, method="BayesShrink", mode="soft", rescale_sigma=False
            )
    return _rgb(*chans)


# ------------------------------------------------------------------------------------ batched
def _mad_sigmas(hh: np.ndarray) -> list[float]:
    """:func:`noise_sigma` of each channel of a stack, from its finest diagonal band ``hh`` (n, h, w)."""
    mags = np.abs(hh.reshape(len(hh), -1))
    if mags.all():  # no zero coefficient: one median per row
        return (np.median(mags, axis=1) / 0.6745).tolist()
    out = []
    for m in mags:
        m = m[m != 0]
        out.append(float(np.median(m) / 0.6745) if m.size else 0.0)
    return out


def _bayes_shrink(coeffs: list, sigmas: list[float], shape: tuple[int, int], dtype) -> np.ndarray:
    """skimage's BayesShrink soft thresholding (``_wavelet_threshold``) of a stack's decomposition
    ``coeffs``, each channel with its own noise level, then the inverse transform."""
    var = [s**2 for s in sigmas]
    eps = np.finfo(dtype).eps
    shrunk = [coeffs[0]]
    for level in coeffs[1:]:
        out = {}
        for key, d in level.items():
            dvar = np.mean(d * d, axis=(1, 2))  # (skimage: np.mean(details * details) per channel)
            thresh = [v / np.sqrt(max(dv - v, eps)) for v, dv in zip(var, dvar)]
            out[key] = pywt.threshold(d, value=np.array(thresh).reshape(-1, 1, 1), mode="soft")
        shrunk.append(out)
    h, w = shape
    return pywt.waverecn(shrunk, _WAVELET, axes=(1, 2))[:, :h, :w].astype(dtype)


def denoise_batch(images: Sequence[np.ndarray]) -> list[np.ndarray]:
    """:func:`denoise` of each image: Y, Cb and Cr of all same-sized images in one stack, decomposed
    once (the finest diagonal band of that decomposition gives each channel's noise level)."""
    out: list[np.ndarray] = [None] * len(images)  # type: ignore[list-item]
    for shape, idx in shape_groups(images).items():
        h, w = shape[:2]
        ycc = np.stack([np.stack(_ycbcr(images[i])) for i in idx])  # (n, 3, h, w)
        flat = ycc.reshape(-1, h, w)
        levels = max(pywt.dwtn_max_level((h, w), _WAVELET) - 3, 1)  # skimage's default depth
        coeffs = pywt.wavedecn(flat, _WAVELET, level=levels, axes=(1, 2))
        sigmas = _mad_sigmas(coeffs[-1]["dd"])
        live = [k for k, s in enumerate(sigmas) if s > 0]  # a flat channel is left as it is
        if live:
            sub = [coeffs[0][live]] + [{key: d[live] for key, d in level.items()} for level in coeffs[1:]]
            flat[live] = _bayes_shrink(sub, [sigmas[k] for k in live], (h, w), flat.dtype)
        for j, i in enumerate(idx):
            out[i] = _rgb(ycc[j, 0], ycc[j, 1], ycc[j, 2])
    return out
