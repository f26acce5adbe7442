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
  :data:`~envs.openagi.lite.image.deblurring.DEBLUR_SIGMA`) and a fixed, small noise-to-signal
  ratio: sharpens blurred images, rings on sharp ones and amplifies any noise left in its input
  (so denoise first).
- Colorization: keeps the input's luminance and predicts chroma (Cb, Cr) from it: a kernel
  regression of chroma on luminance fitted on every pixel of the TRAIN photo crops only,
  tabulated, cached (:mod:`envs.openagi.lite.image.caching`), and smoothed spatially because
  colour is low-frequency. The kernel width and the smoothing were chosen by leave-one-photo-out
  validation on the TRAIN photos; richer local features (multi-scale luminance means and
  deviations, with ridge or gradient boosting) overfitted them and did worse there.
- Image Classification: a colour-invariant ink map (projection on the image's main colour axis,
  background read from the border) at 8x8, classified by an RBF SVM trained on TRAIN digits
  rendered the same colourful way (with random shifts); returns the English digit word. Any
  input size. The SVM is kept as plain arrays (no pickle) and evaluated in numpy.

None of them reads ground truth. ``python -m envs.openagi.lite.image_experts`` prints timings,
quality figures and how the choice and order of restoration tools change the score.

The experts live in :mod:`envs.openagi.lite.image`, one module each; this module registers them
under their OpenAGI names and reports on them.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

import numpy as np

from envs.openagi.lite.image.classification import classifier_model, classify
from envs.openagi.lite.image.colorization import colorize, colorizer_table
from envs.openagi.lite.image.common import _check_images
from envs.openagi.lite.image.deblurring import deblur, deblur_batch
from envs.openagi.lite.image.denoising import denoise, denoise_batch
from envs.openagi.lite.image.super_resolution import super_resolve
from envs.openagi.metrics.image import image_similarity_batch
from envs.openagi.registry import ToolRegistry
from envs.openagi.suite import RESTORER
from envs.openagi.task_data.images import (
    DEGRADATIONS,
    degrade_image,
    digit_images,
    downsample,
    photo_crops,
    to_grayscale,
)
from envs.openagi.tools import register_spec

# ------------------------------------------------------------------------------------ registration


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


BATCH_RESTORERS: dict[str, Callable[[Sequence[np.ndarray]], list[np.ndarray]]] = {
    "Image Denoising": denoise_batch,
    "Image Deblurring": deblur_batch,
}
"""Restorers with a batched implementation (bit for bit the per-image one, on all same-sized images at once)."""


def _stacked(
    tool: str, fn: Callable[[Sequence[np.ndarray]], list[np.ndarray]]
) -> Callable[[Sequence[object]], list[np.ndarray]]:
    def run(batch: Sequence[object]) -> list[np.ndarray]:
        return fn(_check_images(tool, batch))

    run.__name__ = fn.__name__
    return run


def register_image_experts(registry: ToolRegistry, batched: bool = True) -> None:
    """Register the five image experts under their OpenAGI names; ``batched=False``: each restorer
    runs image by image and the classifier makes its ink maps image by image (the reference the
    batched ones are checked and timed against)."""
    for name, fn in IMAGE_RESTORERS.items():  # each image restored alone: the same in any batch
        if batched and name in BATCH_RESTORERS:
            register_spec(registry, name, _stacked(name, BATCH_RESTORERS[name]), batch_invariant=True)
        else:
            register_spec(registry, name, _batched(name, fn), batch_invariant=True)
    register_spec(
        registry,
        "Image Classification",
        lambda batch: classify(_check_images("Image Classification", batch), batched=batched),
    )


# ------------------------------------------------------------------------------------------ report


def description_plan(degradations: Sequence[str]) -> list[str]:
    """The naive plan: one restorer per degradation word, in description order."""
    return [RESTORER[d] for d in DEGRADATIONS if d in degradations]


def all_plans(tools: Sequence[str] = tuple(IMAGE_RESTORERS)) -> list[tuple[str, ...]]:
    """Every ordered subset of ``tools`` without repeats (the empty plan included)."""
    return [p for k in range(len(tools) + 1) for p in itertools.permutations(tools, k)]


def plan_scores(
    images: list[np.ndarray], score: Callable[[list[np.ndarray]], float]
) -> dict[tuple[str, ...], float]:
    """The metric ``score`` of every restoration plan applied to ``images`` (prefixes are shared)."""
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
