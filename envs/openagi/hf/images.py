"""Image conversions between the project's convention and what HF models take.

The project's images are float32 ``(H, W, 3)`` arrays in [0, 1]. HF image processors expect
``PIL`` images (or uint8 arrays; float arrays would be rescaled by 1/255 a second time), and the
Swin2SR restorers take [0, 1] float tensors directly.
"""

from __future__ import annotations

import warnings
import zlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from skimage.color import lab2rgb, rgb2lab

_EPS = 1e-4


def check_image(x: Any, where: str) -> np.ndarray:
    """``x`` as a float32 (H, W, 3) array in [0, 1], or a ValueError naming ``where``."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{where}: expected an image as a numpy array (H, W, 3) in [0, 1], got {type(x).__name__}")
    if x.ndim != 3 or x.shape[2] != 3 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"{where}: expected an image of shape (H, W, 3), got {x.shape}")
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"{where}: expected a float image in [0, 1], got dtype {x.dtype}")
    lo, hi = float(x.min()), float(x.max())
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo < -_EPS or hi > 1 + _EPS:
        raise ValueError(f"{where}: image values must lie in [0, 1], got [{lo:.4g}, {hi:.4g}]")
    return np.clip(x, 0.0, 1.0).astype(np.float32, copy=False)


def check_text(x: Any, where: str) -> str:
    if not isinstance(x, str):
        raise TypeError(f"{where}: expected text (str), got {type(x).__name__}")
    return x


def to_pil(img: np.ndarray) -> Image.Image:
    return Image.fromarray((np.clip(img, 0.0, 1.0) * 255.0).round().astype(np.uint8), mode="RGB")


def to_tensor(imgs: Sequence[np.ndarray]) -> torch.Tensor:
    """Same-shape images -> a (B, 3, H, W) float32 tensor."""
    return torch.from_numpy(np.stack(imgs)).permute(0, 3, 1, 2).contiguous()


def from_tensor(t: torch.Tensor) -> list[np.ndarray]:
    """(B, 3, H, W) -> float32 (H, W, 3) arrays clipped to [0, 1]."""
    arr = t.detach().float().clamp_(0.0, 1.0).permute(0, 2, 3, 1).cpu().numpy()
    return [np.ascontiguousarray(a, dtype=np.float32) for a in arr]


def resize(img: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    """Anti-aliased resize of a float image to (H, W)."""
    if img.shape[:2] == tuple(hw):
        return img.astype(np.float32, copy=False)
    t = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1)[None].float()
    out = torch.nn.functional.interpolate(t, size=tuple(hw), mode="bilinear", antialias=True, align_corners=False)
    return from_tensor(out)[0]


def keep_luminance(source: np.ndarray, colored: np.ndarray) -> np.ndarray:
    """The source's CIE-Lab lightness with the colored image's a/b chroma (same shapes)."""
    lab = rgb2lab(colored.astype(np.float64))
    lab[..., 0] = rgb2lab(source.astype(np.float64))[..., 0]
    with warnings.catch_warnings():  # out-of-gamut colours are clipped, as intended
        warnings.simplefilter("ignore", UserWarning)
        rgb = lab2rgb(lab)
    return np.clip(rgb, 0.0, 1.0).astype(np.float32)


def group_by_shape(imgs: Sequence[np.ndarray]) -> list[list[int]]:
    """Indices of same-shape images, in first-seen order (a batch must share one shape)."""
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for i, img in enumerate(imgs):
        groups[img.shape].append(i)
    return list(groups.values())


def content_seed(seed: int, data: bytes | str) -> int:
    """A per-sample seed from the content, so a sample's output never depends on its batch."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return (zlib.crc32(raw) ^ (seed * 0x9E3779B1)) & 0x7FFFFFFF
