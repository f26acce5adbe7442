"""The offline image side of the lite zoo: data, degradations, experts and the image metric."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import envs.openagi.lite.image_experts as ie
from envs.openagi.lite.image.caching import _cached
from envs.openagi.lite.image.classification import classifier_model
from envs.openagi.lite.image.colorization import colorize, colorizer_table
from envs.openagi.lite.image.deblurring import deblur
from envs.openagi.lite.image.denoising import denoise
from envs.openagi.lite.image.super_resolution import super_resolve
from envs.openagi.metrics.image import image_similarity, image_similarity_batch
from envs.openagi.registry import IMAGE, TEXT, ToolRegistry
from envs.openagi.task_data.images import (
    DEGRADATIONS,
    DIGIT_WORDS,
    LUMA,
    TASK_DIGITS,
    TASK_PHOTOS,
    TRAIN_DIGITS,
    TRAIN_PHOTOS,
    _scaled,
    blur,
    degrade_image,
    digit_images,
    downsample,
    load_photo,
    photo_crops,
    to_grayscale,
    train_digit_images,
    train_photo_crops,
)

CLASSIFIER_MIN_ACCURACY = 0.93  # measured 0.977 on all 597 clean task digits


@pytest.fixture(scope="module", autouse=True)
def fresh_cache(tmp_path_factory):
    """Learned experts train into a private cache dir, so the tests exercise training too."""
    root = tmp_path_factory.mktemp("rltf-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLTF_CACHE_DIR", str(root))
        colorizer_table.cache_clear()
        classifier_model.cache_clear()
        yield root
        colorizer_table.cache_clear()
        classifier_model.cache_clear()


@pytest.fixture(scope="module")
def crops() -> list[np.ndarray]:
    return photo_crops(16, seed=3)


def mean_sim(preds, targets) -> float:
    return float(np.mean(image_similarity_batch(preds, targets)))


# ----------------------------------------------------------------------------- data
def test_photo_crops_are_deterministic_and_well_formed():
    a, b, c = photo_crops(6, seed=0), photo_crops(6, seed=0), photo_crops(6, seed=1)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    for x in a + photo_crops(2, seed=0, size=48):
        assert x.dtype == np.float32 and x.ndim == 3 and x.shape[2] == 3
        assert x.shape[0] == x.shape[1] in (48, 64)
        assert 0.0 <= x.min() and x.max() <= 1.0
        assert x.std() > 0.05  # flat crops are skipped
        assert np.abs(x - x.mean(axis=2, keepdims=True)).mean() > 0.02  # and grey ones


def test_photo_pools_are_disjoint_and_task_crops_come_from_task_photos():
    assert not set(TASK_PHOTOS) & set(TRAIN_PHOTOS)
    for name in TASK_PHOTOS + TRAIN_PHOTOS:
        img = load_photo(name)
        assert img.dtype == np.float32 and img.shape[2] == 3 and img.max() <= 1.0

    def best_match(crop: np.ndarray, sources) -> float:
        best = np.inf
        for name in sources:
            for f in (2, 3, 4):
                src = _scaled(name, f)
                res = cv2.matchTemplate(src, crop, cv2.TM_SQDIFF)
                best = min(best, float(res.min()) / crop.size)
        return best

    for crop in photo_crops(3, seed=7):
        assert best_match(crop, TASK_PHOTOS) < 1e-6
        assert best_match(crop, TRAIN_PHOTOS) > 1e-4
    assert best_match(train_photo_crops(1, seed=7)[0], TRAIN_PHOTOS) < 1e-6


def test_digits_are_coloured_labelled_deterministic_and_split_by_index():
    assert set(TASK_DIGITS).isdisjoint(TRAIN_DIGITS)
    assert len(TASK_DIGITS) + len(TRAIN_DIGITS) == 1797
    a, b = digit_images(20, seed=0), digit_images(20, seed=0)
    assert all(np.array_equal(x, y) and u == v for (x, u), (y, v) in zip(a, b))
    for img, word in a + digit_images(3, seed=1, size=40):
        assert word in DIGIT_WORDS
        assert img.dtype == np.float32 and img.shape in ((32, 32, 3), (40, 40, 3))
        assert 0.0 <= img.min() and img.max() <= 1.0
        assert np.abs(img - img.mean(axis=2, keepdims=True)).max() > 0.05  # not grey
    assert {w for _, w in digit_images(200, seed=0)} == set(DIGIT_WORDS)
    assert {w for _, w in train_digit_images(200, seed=0)} == set(DIGIT_WORDS)


# ----------------------------------------------------------------------------- degradations
def test_degradations_are_seeded_and_applied_in_a_fixed_order(crops):
    img = crops[0]
    original = img.copy()
    one = degrade_image(img, ["noisy", "blurry"], np.random.default_rng(5))
    two = degrade_image(img, ["blurry", "noisy"], np.random.default_rng(5))
    other = degrade_image(img, ["noisy", "blurry"], np.random.default_rng(6))
    assert np.array_equal(one, two) and not np.array_equal(one, other)
    assert np.array_equal(img, original)  # input untouched
    assert np.allclose(degrade_image(img, ["low-resolutioned", "blurry"], np.random.default_rng(0)),
                       blur(downsample(img)), rtol=1e-5, atol=1e-6)


def test_each_degradation_does_what_its_name_says(crops):
    img = crops[1]
    rng = np.random.default_rng(0)
    low = degrade_image(img, ["low-resolutioned"], rng)
    assert low.shape == (32, 32, 3)
    noisy = degrade_image(img, ["noisy"], rng)
    assert 0.05 < np.std(noisy - img) < 0.12
    blurry = degrade_image(img, ["blurry"], rng)
    assert np.abs(np.diff(blurry, axis=0)).mean() < 0.7 * np.abs(np.diff(img, axis=0)).mean()
    gray = degrade_image(img, ["grayscale"], rng)
    assert np.array_equal(gray[..., 0], gray[..., 1]) and np.array_equal(gray[..., 1], gray[..., 2])
    everything = degrade_image(img, list(DEGRADATIONS), rng)
    assert everything.shape == (32, 32, 3) and everything.dtype == np.float32
    assert 0.0 <= everything.min() and everything.max() <= 1.0


def test_unknown_degradation_is_a_clear_error(crops):
    with pytest.raises(ValueError, match="pixelated"):
        degrade_image(crops[0], ["noisy", "pixelated"], np.random.default_rng(0))
    with pytest.raises(ValueError, match="string"):
        degrade_image(crops[0], "noisy", np.random.default_rng(0))
    with pytest.raises(ValueError, match="image"):
        degrade_image(np.zeros((8, 8)), ["noisy"], np.random.default_rng(0))


# ----------------------------------------------------------------------------- experts
@pytest.fixture(scope="module")
def registry() -> ToolRegistry:
    reg = ToolRegistry()
    ie.register_image_experts(reg)
    return reg


def test_experts_are_registered_with_openagi_modalities(registry):
    restorers = ("Image Super Resolution", "Image Denoising", "Image Deblurring", "Colorization")
    assert set(registry.names) == {*restorers, "Image Classification"}
    for name in restorers:
        assert registry[name].inputs == (IMAGE,) and registry[name].output == IMAGE
    assert registry["Image Classification"].inputs == (IMAGE,)
    assert registry["Image Classification"].output == TEXT


def test_experts_are_batched_and_keep_shapes(registry, crops):
    batch = crops[:3]
    for name in ("Image Denoising", "Image Deblurring", "Colorization"):
        out = registry[name](batch)
        assert len(out) == 3
        for x, y in zip(batch, out):
            assert y.shape == x.shape and y.dtype == np.float32
            assert 0.0 <= y.min() and y.max() <= 1.0
    odd = np.random.default_rng(0).random((17, 23, 3), dtype=np.float32)
    small = [downsample(x) for x in batch] + [odd]
    for x, y in zip(small, registry["Image Super Resolution"](small)):
        assert y.shape == (2 * x.shape[0], 2 * x.shape[1], 3)
    assert registry["Image Denoising"]([]) == []
    with pytest.raises(TypeError, match="Image Deblurring"):
        registry["Image Deblurring"](["not an image"])


def test_denoising_helps_on_noisy_crops_and_barely_touches_clean_ones(crops):
    rng = np.random.default_rng(1)
    noisy = [degrade_image(c, ["noisy"], rng) for c in crops]
    assert mean_sim([denoise(x) for x in noisy], crops) > mean_sim(noisy, crops) + 0.1
    assert mean_sim([denoise(c) for c in crops], crops) > 0.98


def test_deblurring_helps_on_blurry_crops_and_rings_on_sharp_ones(crops):
    rng = np.random.default_rng(2)
    blurry = [degrade_image(c, ["blurry"], rng) for c in crops]
    assert mean_sim([deblur(x) for x in blurry], crops) > mean_sim(blurry, crops) + 0.08
    assert mean_sim([deblur(c) for c in crops], crops) < 0.8


def test_super_resolution_beats_nearest_and_bicubic_and_misuse_costs(crops):
    small = [downsample(c) for c in crops]
    sr = mean_sim([super_resolve(x) for x in small], crops)
    assert sr > mean_sim(small, crops) + 0.02  # the metric enlarges un-upscaled images (nearest)
    bicubic = [cv2.resize(x, (64, 64), interpolation=cv2.INTER_CUBIC) for x in small]
    assert sr > mean_sim(bicubic, crops) + 0.005
    assert mean_sim([super_resolve(c) for c in crops], crops) < 0.98  # doubled a full-size image


def test_colorizer_beats_gray_on_average_and_misuse_costs(fresh_cache, crops):
    many = photo_crops(48, seed=11)
    gray = [to_grayscale(c) for c in many]
    colorized = [colorize(g) for g in gray]
    assert mean_sim(colorized, many) > mean_sim(gray, many) + 0.008
    for g, c in zip(gray[:4], colorized[:4]):  # luminance is kept
        assert np.allclose(g @ LUMA, c @ LUMA, rtol=0, atol=0.03)  # up to clipping to [0, 1] (seen: 0.027)
    assert mean_sim([colorize(c) for c in crops], crops) < 0.97  # colour replaced
    assert list((fresh_cache / "lite").glob("colorizer-*.npz"))


def test_restoration_order_matters(crops):
    rng = np.random.default_rng(4)
    low_noisy = [degrade_image(c, ["low-resolutioned", "noisy"], rng) for c in crops]
    good = [super_resolve(denoise(x)) for x in low_noisy]  # physical inverse order
    naive = [denoise(super_resolve(x)) for x in low_noisy]  # description order
    assert mean_sim(good, crops) > mean_sim(naive, crops) + 0.05
    noisy_blurry = [degrade_image(c, ["noisy", "blurry"], rng) for c in crops]
    assert mean_sim([denoise(deblur(x)) for x in noisy_blurry], crops) < mean_sim(
        [denoise(x) for x in noisy_blurry], crops
    ) - 0.05  # deblurring first amplifies the noise


def test_plan_search_covers_every_ordered_subset(crops):
    assert len(ie.all_plans()) == 65
    scores = ie.plan_scores([downsample(c) for c in crops[:2]], lambda b: mean_sim(b, crops[:2]))
    assert set(scores) == set(ie.all_plans())
    plan = ie.description_plan(["grayscale", "low-resolutioned"])
    assert plan == ["Image Super Resolution", "Colorization"]


def test_classifier_is_accurate_on_clean_task_digits_and_takes_any_size(fresh_cache, registry):
    digits = digit_images(200, seed=0)
    preds = registry["Image Classification"]([d for d, _ in digits])
    accuracy = np.mean([p == w for p, (_, w) in zip(preds, digits)])
    assert accuracy >= CLASSIFIER_MIN_ACCURACY
    resized = [cv2.resize(d, (s, s + 7)) for (d, _), s in zip(digits[:30], range(12, 72, 2))]
    again = registry["Image Classification"](resized)
    assert np.mean([p == w for p, (_, w) in zip(again, digits)]) >= 0.8
    assert list((fresh_cache / "lite").glob("digit-svm-*.npz"))


def test_learned_experts_are_reloaded_from_the_cache(fresh_cache):
    table = colorizer_table()
    colorizer_table.cache_clear()
    assert np.array_equal(colorizer_table(), table)
    calls = []

    def train(config):
        calls.append(config)
        return {"w": np.arange(3.0)}

    first = _cached("probe", {"a": 1}, train)
    second = _cached("probe", {"a": 1}, train)
    _cached("probe", {"a": 2}, train)
    assert np.array_equal(first["w"], second["w"]) and len(calls) == 2


# ----------------------------------------------------------------------------- metric
def test_image_similarity_properties(crops):
    a, b = crops[0], crops[1]
    assert image_similarity(a, a) == pytest.approx(1.0)
    assert 0.0 <= image_similarity(b, a) < 0.9
    noisy = degrade_image(a, ["noisy"], np.random.default_rng(0))
    assert image_similarity(noisy, a) < image_similarity(denoise(noisy), a) < 1.0
    assert image_similarity(1.0 - a, a) >= 0.0  # anti-correlated: clipped, not negative


def test_image_similarity_handles_sizes_and_non_images(crops):
    a = crops[2]
    small = downsample(a)
    nearest = cv2.resize(small, (64, 64), interpolation=cv2.INTER_NEAREST)
    assert image_similarity(small, a) == pytest.approx(image_similarity(nearest, a))
    assert 0.0 < image_similarity(small, a) < 1.0
    assert image_similarity(super_resolve(a), a) < 1.0  # too big: decimated, not rejected
    assert image_similarity("a photo of a cat", a) == 0.0
    assert image_similarity(None, a) == 0.0
    assert image_similarity(np.zeros((4, 4, 5)), a) == 0.0
    assert image_similarity(a @ LUMA, to_grayscale(a)) == pytest.approx(1.0)  # (H, W) is grey
    assert image_similarity_batch([a, "x"], [a, a]) == [pytest.approx(1.0), 0.0]
    with pytest.raises(ValueError, match="2 predictions for 1 targets"):
        image_similarity_batch([a, a], [a])
