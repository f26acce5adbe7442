"""Image Classification: a colour-invariant ink map classified by an RBF SVM trained on TRAIN digits,
kept as plain arrays (no pickle) and evaluated in numpy; returns the English digit word.
:func:`ink_maps` (what :func:`classify` runs) makes the ink maps of a whole batch at once, bit for bit
as :func:`ink_map` makes each."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import cv2
import numpy as np
from sklearn.svm import SVC

from envs.openagi.lite.image.caching import _cached
from envs.openagi.task_data.images import DIGIT_WORDS, train_digit_images

INK_SIZE = 8
"""The classifier's input size: any image is resized to INK_SIZE x INK_SIZE first."""

_CLASSIFIER_CONFIG = {
    "version": 1,
    "n_train": 4800,
    "seed": 11,
    "max_shift": 2,
    "C": 10.0,
    "ink_size": INK_SIZE,
}


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


def ink_maps(images: Sequence[np.ndarray], size: int = INK_SIZE) -> np.ndarray:
    """:func:`ink_map` of each image, as one (n, size, size) float32 array: every step after the
    resize runs on the stack (the SVD, median and percentiles image by image inside numpy)."""
    if not images:
        return np.zeros((0, size, size), np.float32)
    x = np.stack([
        cv2.resize(img, (size, size), interpolation=cv2.INTER_AREA if min(img.shape[:2]) >= size
                   else cv2.INTER_LINEAR).reshape(-1, 3)
        for img in images
    ]).astype(np.float64)  # (n, size * size, 3)
    xc = x - x.mean(axis=1, keepdims=True)
    _, _, vt = np.linalg.svd(xc, full_matrices=False)
    p = np.stack([xc[i] @ vt[i, 0] for i in range(len(x))]).reshape(-1, size, size)
    border = np.concatenate([p[:, 0], p[:, -1], p[:, :, 0], p[:, :, -1]], axis=1)
    bg = np.median(border, axis=1)
    flat = p.reshape(len(p), -1)
    negative = np.percentile(flat, 98, axis=1) - bg < bg - np.percentile(flat, 2, axis=1)
    p = np.where(negative[:, None, None], -p, p)  # ink lies on the negative side
    bg = np.where(negative, -bg, bg)
    hi = np.percentile(p.reshape(len(p), -1), 98, axis=1)
    scale = np.maximum(hi - bg, 1e-3)
    return np.clip((p - bg[:, None, None]) / scale[:, None, None], 0.0, 1.2).astype(np.float32)


def _shift(img: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """Translate by (dy, dx) pixels, filling with the nearest border colour."""
    m = np.float32([[1, 0, dx], [0, 1, dy]])
    return cv2.warpAffine(img, m, (img.shape[1], img.shape[0]), borderMode=cv2.BORDER_REPLICATE)


def _classifier_features(images: Sequence[np.ndarray], size: int, batched: bool = False) -> np.ndarray:
    if batched:
        return ink_maps(images, size).reshape(len(images), -1).astype(np.float64)
    return np.stack([ink_map(img, size).ravel() for img in images]).astype(np.float64)


def train_classifier(config: dict = _CLASSIFIER_CONFIG) -> dict[str, np.ndarray]:
    """Fit an RBF SVM on ink maps of TRAIN digits (random colours and shifts).

    Returns the fitted model as plain arrays (support vectors, dual coefficients, intercepts),
    which :func:`svm_predict` evaluates without sklearn or pickle.
    """
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


def classify(images: Sequence[np.ndarray], batched: bool = True) -> list[str]:
    """English digit words for a batch of images of any size (``batched=False``: the ink maps image
    by image, the reference :func:`ink_maps` is checked and timed against)."""
    if not images:
        return []
    x = _classifier_features(images, _CLASSIFIER_CONFIG["ink_size"], batched=batched)
    return [DIGIT_WORDS[int(c)] for c in svm_predict(classifier_model(), x)]
