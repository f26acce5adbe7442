"""Clean images shipped inside installed packages, and the four OpenAGI image degradations.

Nothing here downloads: photos come from ``skimage.data`` and scikit-learn's sample images,
handwritten digits from ``sklearn.datasets.load_digits``. Source images are split into a TASK
pool (benchmark samples are drawn only from it) and a disjoint TRAIN pool (what learned experts,
e.g. the colorizer, train on), so an expert never trains on the images it is scored on. Digits
are split the same way, by index.

Degradations are applied in one fixed order (x2 downsampling -> blur -> noise -> grayscale:
a small image, blurred at its own scale, captured with sensor noise, stored in grayscale)
whatever order they are named in, so that the inverse order of restoration (denoise, deblur,
then upscale) is not the order the words appear in a task description.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import cv2
import numpy as np
import skimage.data
from matplotlib import cbook
from sklearn.datasets import load_digits, load_sample_image

DEGRADATIONS: tuple[str, ...] = ("low-resolutioned", "noisy", "blurry", "grayscale")
"""Degradation names, in the order the words appear in task descriptions (as in OpenAGI)."""

PHYSICAL_ORDER: tuple[str, ...] = ("low-resolutioned", "blurry", "noisy", "grayscale")
"""The order degradations are actually applied in, whatever order they are named in."""

BLUR_SIGMA = 1.3
"""Gaussian blur sigma in pixels (of the full-resolution image)."""
NOISE_SIGMA = 0.09
"""Additive Gaussian noise sigma on [0, 1] intensities."""
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
"""Rec. 601 luma weights (what ``grayscale`` keeps)."""

TASK_PHOTOS: tuple[str, ...] = ("astronaut", "chelsea", "coffee", "china", "stereo_motorcycle")
"""Source photos benchmark samples are cropped from."""
TRAIN_PHOTOS: tuple[str, ...] = (
    "rocket",
    "flower",
    "immunohistochemistry",
    "retina",
    "logo",
    "hubble_deep_field",
    "grace_hopper",
)
"""Source photos learned experts train on; disjoint from :data:`TASK_PHOTOS`."""

DIGIT_WORDS: tuple[str, ...] = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
)  # fmt: skip
N_DIGITS = 1797
DIGITS_TASK_START = 1200
"""sklearn digits with index >= this are TASK digits; those below are TRAIN digits."""
TASK_DIGITS: range = range(DIGITS_TASK_START, N_DIGITS)
TRAIN_DIGITS: range = range(0, DIGITS_TASK_START)

_MIN_LUMA_STD = 0.07  # a crop flatter than this is skipped (nothing for a restorer to restore)
_MIN_CHROMA = 0.05  # ... and one greyer than this (nothing for a colorizer to do)
_MAX_TRIES = 60


def _sk(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        img = getattr(skimage.data, name)()
        if name == "stereo_motorcycle":
            img = img[0]  # left view; the right view is a near-duplicate, so it is not used
        return img[..., :3]  # logo is RGBA

    return load


def _sklearn_sample(filename: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        return load_sample_image(filename)

    return load


def _grace_hopper() -> np.ndarray:
    path = cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        raise FileNotFoundError(f"could not read matplotlib's sample image {path}")
    return img[..., ::-1]


_LOADERS: dict[str, Callable[[], np.ndarray]] = {
    **{n: _sk(n) for n in ("astronaut", "chelsea", "coffee", "stereo_motorcycle", "rocket")},
    **{n: _sk(n) for n in ("immunohistochemistry", "retina", "logo", "hubble_deep_field")},
    "china": _sklearn_sample("china.jpg"),
    "flower": _sklearn_sample("flower.jpg"),
    "grace_hopper": _grace_hopper,
}


@lru_cache(maxsize=None)
def load_photo(name: str) -> np.ndarray:
    """A whole source photo as float32 RGB in [0, 1] (read-only; cached)."""
    if name not in _LOADERS:
        raise ValueError(f"unknown source photo {name!r}; expected one of {sorted(_LOADERS)}")
    img = np.ascontiguousarray(_LOADERS[name](), dtype=np.float32) / 255.0
    img.setflags(write=False)
    return img


@lru_cache(maxsize=None)
def _scaled(name: str, factor: int) -> np.ndarray:
    """The photo shrunk by an integer factor (area averaging), so crops hold whole objects."""
    img = load_photo(name)
    if factor == 1:
        return img
    h, w = img.shape[0] // factor, img.shape[1] // factor
    out = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
    out.setflags(write=False)
    return out


def _informative(crop: np.ndarray) -> float:
    """How much a crop has to restore: 0 when too flat or too grey, else its luma std."""
    luma = crop @ LUMA
    chroma = np.abs(crop - luma[..., None]).mean()
    std = float(luma.std())
    return std if std >= _MIN_LUMA_STD and chroma >= _MIN_CHROMA else 0.0


def crops_from(
    sources: Sequence[str], n: int, seed: int, size: int = 64, scales: Sequence[int] = (2, 3, 4)
) -> list[np.ndarray]:
    """``n`` textured, colourful ``size``x``size`` crops from ``sources``, fixed by ``seed``.

    Each crop picks a source, a shrink factor and a position at random; a crop that is nearly
    flat or nearly grey is redrawn (up to a limit, after which the most textured one is kept).
    """
    if n < 0 or size < 8:
        raise ValueError(f"need n >= 0 and size >= 8, got n={n}, size={size}")
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    for _ in range(n):
        best, best_score = None, -1.0
        for _ in range(_MAX_TRIES):
            name = sources[int(rng.integers(len(sources)))]
            img = _scaled(name, int(scales[int(rng.integers(len(scales)))]))
            if img.shape[0] < size or img.shape[1] < size:
                img = _scaled(name, 1)
            y = int(rng.integers(img.shape[0] - size + 1))
            x = int(rng.integers(img.shape[1] - size + 1))
            crop = img[y : y + size, x : x + size]
            score = _informative(crop)
            if score > best_score:
                best, best_score = crop, score
            if score > 0:
                break
        out.append(np.array(best, dtype=np.float32))
    return out


def photo_crops(n: int, seed: int, size: int = 64) -> list[np.ndarray]:
    """``n`` clean RGB benchmark crops (float32 in [0, 1]) from the TASK photos only."""
    return crops_from(TASK_PHOTOS, n, seed, size)


def train_photo_crops(n: int, seed: int, size: int = 64) -> list[np.ndarray]:
    """``n`` clean RGB crops from the TRAIN photos only (for learned experts)."""
    return crops_from(TRAIN_PHOTOS, n, seed, size)


@lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    images = (d.images / 16.0).astype(np.float32)
    images.setflags(write=False)
    return images, d.target.astype(np.int64)


def render_digit(glyph: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """An 8x8 ink map in [0, 1] as a ``size``x``size`` RGB image in random fg/bg colours.

    The two colours are drawn with a clear colour difference but possibly little luminance
    difference, so turning the image grey can really erase the digit.
    """
    while True:
        fg, bg = rng.uniform(0.0, 1.0, size=3), rng.uniform(0.0, 1.0, size=3)
        if np.linalg.norm(fg - bg) > 0.6:
            break
    ink = cv2.resize(glyph.astype(np.float32), (size, size), interpolation=cv2.INTER_CUBIC)
    ink = np.clip(ink, 0.0, 1.0)[..., None]
    return (bg * (1.0 - ink) + fg * ink).astype(np.float32)


def digits_from(
    indices: Sequence[int], n: int, seed: int, size: int = 32
) -> list[tuple[np.ndarray, str]]:
    """``n`` coloured digits drawn (without replacement while possible) from ``indices``."""
    images, labels = _digits()
    rng = np.random.default_rng(seed)
    idx = np.asarray(indices)
    picks = np.concatenate([rng.permutation(idx) for _ in range(n // len(idx) + 1)])[:n]
    return [(render_digit(images[i], size, rng), DIGIT_WORDS[labels[i]]) for i in picks]


def digit_images(n: int, seed: int, size: int = 32) -> list[tuple[np.ndarray, str]]:
    """``n`` (coloured digit image, English label) pairs from the TASK digits only."""
    return digits_from(TASK_DIGITS, n, seed, size)


def train_digit_images(n: int, seed: int, size: int = 32) -> list[tuple[np.ndarray, str]]:
    """``n`` (coloured digit image, English label) pairs from the TRAIN digits only."""
    return digits_from(TRAIN_DIGITS, n, seed, size)


def _check_image(img: np.ndarray) -> np.ndarray:
    if not isinstance(img, np.ndarray) or img.ndim != 3 or img.shape[2] != 3:
        got = getattr(img, "shape", type(img).__name__)
        raise ValueError(f"expected an (H, W, 3) float image array, got {got}")
    return np.asarray(img, dtype=np.float32)


def blur(img: np.ndarray, sigma: float = BLUR_SIGMA) -> np.ndarray:
    return cv2.GaussianBlur(img, (0, 0), sigmaX=sigma, sigmaY=sigma, borderType=cv2.BORDER_REFLECT)


def downsample(img: np.ndarray) -> np.ndarray:
    """A real x2 downsampling: 2x2 area averaging (anti-aliased); H and W halve (floored)."""
    h, w = max(1, img.shape[0] // 2), max(1, img.shape[1] // 2)
    return cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)


def add_noise(img: np.ndarray, rng: np.random.Generator, sigma: float = NOISE_SIGMA) -> np.ndarray:
    return np.clip(img + rng.normal(0.0, sigma, size=img.shape).astype(np.float32), 0.0, 1.0)


def to_grayscale(img: np.ndarray) -> np.ndarray:
    """Rec. 601 luminance replicated into three channels."""
    return np.repeat((img @ LUMA)[..., None], 3, axis=2)


def degrade_image(
    img: np.ndarray, degradations: Sequence[str], rng: np.random.Generator
) -> np.ndarray:
    """Apply the named degradations in the fixed :data:`PHYSICAL_ORDER` (not the given order).

    ``rng`` draws the noise; nothing else is random. Returns a new float32 array in [0, 1].
    """
    if isinstance(degradations, str):
        raise ValueError(f"expected a sequence of degradation names, got the string {degradations!r}")
    names = set(degradations)
    unknown = names.difference(DEGRADATIONS)
    if unknown:
        raise ValueError(f"unknown degradation(s) {sorted(unknown)}; expected names from {DEGRADATIONS}")
    out = _check_image(img).copy()
    for name in PHYSICAL_ORDER:
        if name not in names:
            continue
        if name == "blurry":
            out = blur(out)
        elif name == "low-resolutioned":
            out = downsample(out)
        elif name == "noisy":
            out = add_noise(out, rng)
        else:
            out = to_grayscale(out)
    return np.clip(out, 0.0, 1.0).astype(np.float32)
