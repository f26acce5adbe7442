"""Image Super Resolution: x2 iterative back-projection (Irani & Peleg), consistent with the input
under the x2 area-averaging model."""

from __future__ import annotations

import cv2
import numpy as np

from envs.openagi.task_data.images import downsample

SR_BACKPROJECTIONS = 3


def _bicubic_x2(img: np.ndarray) -> np.ndarray:
    return cv2.resize(img, (img.shape[1] * 2, img.shape[0] * 2), interpolation=cv2.INTER_CUBIC)


def super_resolve(img: np.ndarray, iterations: int = SR_BACKPROJECTIONS) -> np.ndarray:
    """x2 upscaling by iterative back-projection under the x2 area-averaging model."""
    out = _bicubic_x2(img)
    for _ in range(iterations):
        out = out + _bicubic_x2(img - downsample(out))
    return np.clip(out, 0.0, 1.0).astype(np.float32)
