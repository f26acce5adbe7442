"""The offline image experts of the lite zoo: real, fast, classical or project-trained methods.

- Image Super Resolution: x2 iterative back-projection (Irani & Peleg): bicubic enlargement, then
  a few rounds of "downsample, compare with the input, add back the upsampled difference", so the
  output is consistent with the input under the x2 area-averaging model. Always doubles H and W;
  it keeps (and enlarges) whatever noise the input has.
- Image Denoising: wavelet BayesShrink (``skimage.restoration.denoise_wavelet``) on each of Y,
  Cb and Cr with that channel's noise level estimated from the image (Donoho's MAD), so a clean
  image is left nearly untouched, and noise that an earlier x2 enlargement has spread over
  2x2 blocks is underestimated and mostly kept (so denoise before super-resolving).
- Image Deblurring: Wiener deconvolution with an assumed Gaussian PSF (sigma
  :data:`DEBLUR_SIGMA`) and a fixed, small noise-to-signal ratio: sharpens blurred images, rings
  on sharp ones and amplifies any noise left in its input (so denoise first).
- Colorization: keeps the input's luminance and predicts chroma (Cb, Cr) from it: a kernel
  regression of chroma on luminance fitted on every pixel of the TRAIN photo crops only,
  tabulated, cached with :func:`rltf_cache_dir`, and smoothed spatially because colour is
  low-frequency. The kernel width and the smoothing were chosen by leave-one-photo-out
  validation on the TRAIN photos; richer local features (multi-scale luminance means and
  deviations, with ridge or gradient boosting) overfitted them and did worse there.
- Image Classification: a colour-invariant ink map (projection on the image's main colour axis,
  background read from the border) at 8x8, classified by an RBF SVM trained on TRAIN digits
  rendered the same colourful way (with random shifts); returns the English digit word. Any
  input size. The SVM is kept as plain arrays (no pickle) and evaluated in numpy.

None of them reads ground truth. ``python -m envs.openagi.lite.image_experts`` prints timings,
quality figures and how the choice and order of restoration tools change the score.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from envs.openagi.cache_dir import rltf_cache_dir
from envs.openagi.lite.image_data import (
    BLUR_SIGMA,
    DEGRADATIONS,
    DIGIT_WORDS,
    LUMA,
    TRAIN_PHOTOS,
    degrade_image,
    digit_images,
    downsample,
    photo_crops,
    to_grayscale,
    train_digit_images,
    train_photo_crops,
)
from envs.openagi.registry import ToolRegistry
from envs.openagi.tools import register_spec

SR_BACKPROJECTIONS = 3
DEBLUR_SIGMA = BLUR_SIGMA
"""The PSF the deblurrer assumes (the benchmark's blur; a real deblurrer is trained for one)."""
DEBLUR_NSR = 0.004
"""Wiener noise-to-signal ratio: small, i.e. tuned for blur without noise."""
_DEBLUR_PAD = 12
COLOR_SMOOTH = 0.25
"""Chroma is smoothed with a Gaussian of sigma = this x the image's longer side."""
INK_SIZE = 8
"""The classifier's input size: any image is resized to INK_SIZE x INK_SIZE first."""

_COLORIZER_CONFIG = {
    "version": 3,
    "sources": list(TRAIN_PHOTOS),
    "n_crops": 600,
    "crop_seed": 1,
    "bandwidth": 0.04,
    "grid": 256,
}
_CLASSIFIER_CONFIG = {
    "version": 1,
    "n_train": 4800,
    "seed": 11,
    "max_shift": 2,
    "C": 10.0,
    "ink_size": INK_SIZE,
}


# ----------------------------------------------------------------------------- input checks
def _check_images(tool: str, batch: Sequence[object]) -> list[np.ndarray]:
    out = []
    for x in batch:
        if not isinstance(x, np.ndarray) or x.ndim != 3 or x.shape[2] != 3 or min(x.shape[:2]) < 2:
            got = getattr(x, "shape", type(x).__name__)
            raise TypeError(f"{tool} expects (H, W, 3) float image arrays, got {got}")
        out.append(np.clip(np.nan_to_num(x.astype(np.float32, copy=False)), 0.0, 1.0))
    return out


# ----------------------------------------------------------------------------- super resolution
def _bicubic_x2(img: np.ndarray) -> np.ndarray:
    return cv2.resize(img, (img.shape[1] * 2, img.shape[0] * 2), interpolation=cv2.INTER_CUBIC)


def super_resolve(img: np.ndarray, iterations: int = SR_BACKPROJECTIONS) -> np.ndarray:
    """x2 upscaling by iterative back-projection under the x2 area-averaging model."""
    out = _bicubic_x2(img)
    for _ in range(iterations):
        out = out + _bicubic_x2(img - downsample(out))
    return np.clip(out, 0.0, 1.0).astype(np.float32)


# ----------------------------------------------------------------------------- denoising
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


# ----------------------------------------------------------------------------- deblurring
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


# ----------------------------------------------------------------------------- colorization
def _ycbcr(img: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = img @ LUMA
    return y, (img[..., 2] - y) * 0.564, (img[..., 0] - y) * 0.713


def _rgb(y: np.ndarray, cb: np.ndarray, cr: np.ndarray) -> np.ndarray:
    r = y + 1.403 * cr
    b = y + 1.773 * cb
    g = (y - LUMA[0] * r - LUMA[2] * b) / LUMA[1]
    return np.clip(np.stack([r, g, b], axis=-1), 0.0, 1.0).astype(np.float32)


def _config_key(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


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


def _cached(
    name: str, config: dict, train: Callable[[dict], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Arrays trained once per config and kept as .npz under ``rltf_cache_dir('lite')``."""
    path: Path = rltf_cache_dir("lite") / f"{name}-{_config_key(config)}.npz"
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
        except (OSError, ValueError):
            pass  # a corrupt or partial file: retrain and overwrite it
    arrays = train(config)
    tmp = path.with_suffix(f".{time.time_ns()}.tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)
    return arrays


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


# ----------------------------------------------------------------------------- classification
def ink_map(img: np.ndarray, size: int = INK_SIZE) -> np.ndarray:
    """A colour-invariant ``size`` x ``size`` map of "how far from the background colour".

    Pixels are projected on the image's main colour axis (first principal component); the
    border's median is the background (0) and the 98th percentile of the far side is ink (1).
    """
    interp = cv2.INTER_AREA if min(img.shape[:2]) >= size else cv2.INTER_LINEAR
    x = cv2.resize(img, (size, size), interpolation=interp).reshape(-1, 3).astype(np.float64)
    xc = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(xc, full_matrices=False)
    p = (xc @ vt[0]).reshape(size, size)
    bg = float(np.median(np.concatenate([p[0], p[-1], p[:, 0], p[:, -1]])))
    if np.percentile(p, 98) - bg < bg - np.percentile(p, 2):  # ink lies on the negative side
        p, bg = -p, -bg
    hi = float(np.percentile(p, 98))
    return np.clip((p - bg) / max(hi - bg, 1e-3), 0.0, 1.2).astype(np.float32)


def _shift(img: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """Translate by (dy, dx) pixels, filling with the nearest border colour."""
    m = np.float32([[1, 0, dx], [0, 1, dy]])
    return cv2.warpAffine(img, m, (img.shape[1], img.shape[0]), borderMode=cv2.BORDER_REPLICATE)


def _classifier_features(images: Sequence[np.ndarray], size: int) -> np.ndarray:
    return np.stack([ink_map(img, size).ravel() for img in images]).astype(np.float64)


def train_classifier(config: dict = _CLASSIFIER_CONFIG) -> dict[str, np.ndarray]:
    """Fit an RBF SVM on ink maps of TRAIN digits (random colours and shifts).

    Returns the fitted model as plain arrays (support vectors, dual coefficients, intercepts),
    which :func:`svm_predict` evaluates without sklearn or pickle.
    """
    from sklearn.svm import SVC

    rng = np.random.default_rng(config["seed"])
    s = config["max_shift"]
    images, labels = [], []
    for img, word in train_digit_images(config["n_train"], config["seed"]):
        images.append(_shift(img, int(rng.integers(-s, s + 1)), int(rng.integers(-s, s + 1))))
        labels.append(DIGIT_WORDS.index(word))
    x = _classifier_features(images, config["ink_size"])
    svc = SVC(C=config["C"], kernel="rbf", gamma="scale").fit(x, np.array(labels))
    model = {
        "support_vectors": svc.support_vectors_,
        "dual_coef": svc.dual_coef_,
        "intercept": svc.intercept_,
        "n_support": svc.n_support_.astype(np.int64),
        "classes": svc.classes_.astype(np.int64),
        "gamma": np.array(svc._gamma),
    }
    ours = svm_predict(model, x[:500])
    if not np.array_equal(ours, svc.predict(x[:500])):  # the array form must be the same model
        raise RuntimeError("svm_predict disagrees with sklearn's SVC.predict on training digits")
    return model


def svm_predict(model: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """One-vs-one RBF SVM prediction (libsvm's voting) from the arrays of :func:`train_classifier`."""
    sv, coef, b = model["support_vectors"], model["dual_coef"], model["intercept"]
    starts = np.concatenate([[0], np.cumsum(model["n_support"])])
    d2 = (x**2).sum(1)[:, None] + (sv**2).sum(1)[None, :] - 2.0 * x @ sv.T
    k = np.exp(-float(model["gamma"]) * np.maximum(d2, 0.0))
    n_classes = len(model["classes"])
    votes = np.zeros((len(x), n_classes), dtype=np.int64)
    pair = 0
    for i in range(n_classes):
        si = slice(starts[i], starts[i + 1])
        for j in range(i + 1, n_classes):
            sj = slice(starts[j], starts[j + 1])
            dec = k[:, si] @ coef[j - 1, si] + k[:, sj] @ coef[i, sj] + b[pair]
            votes[:, i] += dec > 0
            votes[:, j] += dec <= 0
            pair += 1
    return model["classes"][votes.argmax(axis=1)]


@lru_cache(maxsize=1)
def classifier_model() -> dict[str, np.ndarray]:
    """The trained digit SVM (trained on first use, then cached on disk)."""
    return _cached("digit-svm", _CLASSIFIER_CONFIG, train_classifier)


def classify(images: Sequence[np.ndarray]) -> list[str]:
    """English digit words for a batch of images of any size."""
    if not images:
        return []
    x = _classifier_features(images, _CLASSIFIER_CONFIG["ink_size"])
    return [DIGIT_WORDS[int(c)] for c in svm_predict(classifier_model(), x)]


# ----------------------------------------------------------------------------- registration
def _batched(
    tool: str, fn: Callable[[np.ndarray], np.ndarray]
) -> Callable[[Sequence[object]], list[np.ndarray]]:
    def run(batch: Sequence[object]) -> list[np.ndarray]:
        return [fn(x) for x in _check_images(tool, batch)]

    run.__name__ = fn.__name__
    return run


IMAGE_RESTORERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Image Super Resolution": super_resolve,
    "Image Denoising": denoise,
    "Image Deblurring": deblur,
    "Colorization": colorize,
}
RESTORER_FOR: dict[str, str] = {
    "low-resolutioned": "Image Super Resolution",
    "noisy": "Image Denoising",
    "blurry": "Image Deblurring",
    "grayscale": "Colorization",
}
"""The restorer each degradation word names (in description order, see ``DEGRADATIONS``)."""


def register_image_experts(registry: ToolRegistry) -> None:
    """Register the five image experts under their OpenAGI names."""
    for name, fn in IMAGE_RESTORERS.items():
        register_spec(registry, name, _batched(name, fn))
    register_spec(
        registry,
        "Image Classification",
        lambda batch: classify(_check_images("Image Classification", batch)),
    )


# ----------------------------------------------------------------------------- report
def description_plan(degradations: Sequence[str]) -> list[str]:
    """The naive plan: one restorer per degradation word, in description order."""
    return [RESTORER_FOR[d] for d in DEGRADATIONS if d in degradations]


def all_plans(tools: Sequence[str] = tuple(IMAGE_RESTORERS)) -> list[tuple[str, ...]]:
    """Every ordered subset of ``tools`` without repeats (the empty plan included)."""
    return [p for k in range(len(tools) + 1) for p in itertools.permutations(tools, k)]


def plan_scores(
    images: list[np.ndarray], score: Callable[[list[np.ndarray]], float]
) -> dict[tuple[str, ...], float]:
    """``score`` of every restoration plan applied to ``images`` (prefixes are shared)."""
    out: dict[tuple[str, ...], float] = {}

    def walk(plan: tuple[str, ...], batch: list[np.ndarray]) -> None:
        out[plan] = score(batch)
        for name, fn in IMAGE_RESTORERS.items():
            if name not in plan:
                walk((*plan, name), [fn(x) for x in batch])

    walk((), images)
    return out


_ABBREV = {
    "Image Super Resolution": "SR",
    "Image Denoising": "DN",
    "Image Deblurring": "DB",
    "Colorization": "CO",
}


def _short(plan: Sequence[str]) -> str:
    return ">".join(_ABBREV[p] for p in plan) or "-"


def degradation_combos() -> list[tuple[str, ...]]:
    """The 15 non-empty degradation subsets, each in description order."""
    return [c for k in range(1, 5) for c in itertools.combinations(DEGRADATIONS, k)]


def plan_table(
    clean: Sequence[np.ndarray],
    score: Callable[[list[np.ndarray]], float],
    seed: int,
    margin: float = 0.01,
) -> int:
    """Print, per degradation combination, the score of no restoration, of the description-order
    plan, and of the best and worst of all 65 plans; return on how many combinations the best
    plan beats the description-order plan by more than ``margin``."""
    columns = " ".join(f"{c:>6s}" for c in ("none", "descr", "best", "worst"))
    print(f"{'degradations':42s} {columns}  best plan (descr plan)")
    wins = 0
    for i, combo in enumerate(degradation_combos()):
        rng = np.random.default_rng([seed, i])
        scores = plan_scores([degrade_image(c, combo, rng) for c in clean], score)
        naive = tuple(description_plan(combo))
        best = max(scores, key=scores.get)
        wins += scores[best] > scores[naive] + margin
        print(
            f"{' '.join(combo):42s} {scores[()]:6.3f} {scores[naive]:6.3f} {scores[best]:6.3f} "
            f"{min(scores.values()):6.3f}  {_short(best)} ({_short(naive)})"
        )
    print(f"best plan > description-order plan + {margin} on {wins}/15 combinations")
    return wins


def _per_sample_ms(fn: Callable[[np.ndarray], object], xs: Sequence[np.ndarray]) -> float:
    t = time.perf_counter()
    for x in xs:
        fn(x)
    return (time.perf_counter() - t) / len(xs) * 1e3


def report(n: int = 16, seed: int = 0, n_digits: int = 300, n_digit_plans: int = 100) -> None:
    """Print timings, colorizer and classifier quality, and the plan-choice tables."""
    from envs.openagi.metrics.image import image_similarity_batch

    t = time.perf_counter()
    colorizer_table()
    classifier_model()
    print(f"training (or loading) the learned experts: {time.perf_counter() - t:.1f} s")

    clean = photo_crops(n, seed)
    digits = digit_images(n_digits, seed)
    images, labels = [d for d, _ in digits], [w for _, w in digits]
    small = [downsample(c) for c in clean]
    h, w = clean[0].shape[:2]
    print(f"\nper-sample time ({h}x{w} crops; SR from {h // 2}x{w // 2}; digits 32x32):")
    for name, fn in IMAGE_RESTORERS.items():
        print(f"  {name:24s} {_per_sample_ms(fn, small if fn is super_resolve else clean):6.2f} ms")
    print(f"  {'Image Classification':24s} {_per_sample_ms(lambda x: classify([x]), images):6.2f} ms")

    def sim(batch: list[np.ndarray]) -> float:
        return float(np.mean(image_similarity_batch(batch, clean)))

    gray = [to_grayscale(c) for c in clean]
    colorized = [colorize(g) for g in gray]
    print(f"\ncolorizer, SSIM vs clean: gray {sim(gray):.4f} -> colorized {sim(colorized):.4f}")
    print(f"\nrestoration: mean SSIM vs clean over {n} task crops")
    plan_table(clean, sim, seed)

    def acc(batch: list[np.ndarray]) -> float:
        return float(np.mean([p == w for p, w in zip(classify(batch), labels)]))

    print(f"\ndigit classification accuracy on {len(digits)} task digits: clean {acc(images):.3f}")
    for i, d in enumerate(DEGRADATIONS):
        rng = np.random.default_rng([seed, 200 + i])
        print(f"  {d:18s} {acc([degrade_image(x, [d], rng) for x in images]):.3f}")
    images, labels = images[:n_digit_plans], labels[:n_digit_plans]
    print(f"\nrestore then classify: accuracy over the first {len(images)} of them")
    plan_table(images, acc, seed + 1)


if __name__ == "__main__":
    report()
