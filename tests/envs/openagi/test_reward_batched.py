"""The batched image experts (restorers, the classifier's ink maps) and image metric give the per-sample
path's outputs, bit for bit, on the lite suite's real inputs (and on the intermediate images plans feed
them), so batching changes no reward. The text side: tests/envs/openagi/test_reward_batched_text.py."""

from __future__ import annotations

import numpy as np
import pytest

from envs.openagi.env import OpenAGIEnv
from envs.openagi.lite import build_lite_registry
from envs.openagi.lite.image.classification import classify, ink_map, ink_maps
from envs.openagi.lite.image.common import _check_images
from envs.openagi.lite.image.deblurring import deblur, deblur_batch
from envs.openagi.lite.image.denoising import denoise, denoise_batch
from envs.openagi.lite.image.super_resolution import super_resolve
from envs.openagi.lite.image_experts import IMAGE_RESTORERS
from envs.openagi.metrics.image import image_similarity_batch
from envs.openagi.plans import enumerate_plans
from envs.openagi.suite import build_suite
from envs.openagi.task_data.images import DEGRADATIONS, degrade_image, digit_images


@pytest.fixture(scope="module")
def image_tasks():
    return [t for t in build_suite("lite", 0, 4) if "image" in t.inputs]


@pytest.fixture(scope="module")
def images(image_tasks) -> list[np.ndarray]:
    """Every image input of the suite's image tasks (64x64 and 32x32 photos, 32x32 and 16x16
    digits), each restorer's output on some of them (SR doubles the size), and odd cases: a flat
    image (no noise to estimate), odd sizes, the smallest image an expert takes."""
    inputs = [s.inputs[0] for t in image_tasks for s in t.samples]
    restored = [fn(x) for fn in IMAGE_RESTORERS.values() for x in inputs[::9]]
    odd = [np.full((8, 8, 3), 0.5, np.float32), np.random.default_rng(0).random((5, 7, 3), dtype=np.float32),
           np.random.default_rng(1).random((2, 2, 3), dtype=np.float32), super_resolve(inputs[0])[:, :-3]]
    return inputs + restored + odd


def assert_same_images(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w), f"differs by up to {np.abs(g - w).max()} on a {w.shape} image"


def test_image_inputs_cover_several_shapes(images):
    assert len({x.shape for x in images}) >= 6


@pytest.mark.parametrize("batch_fn, one_fn", [(denoise_batch, denoise), (deblur_batch, deblur)])
def test_batched_restorer_is_the_per_image_one_bit_for_bit(images, batch_fn, one_fn):
    want = [one_fn(x) for x in images]
    assert_same_images(batch_fn(images), want)
    assert_same_images(batch_fn(images[::-1]), want[::-1])  # mixed shapes come back in input order
    assert_same_images(batch_fn(images[:1]), want[:1])
    assert batch_fn([]) == []


def test_batched_ink_maps_are_the_per_image_ones_bit_for_bit(images):
    """Every image the classifier may get: the suite's inputs and restorer outputs, digits under each
    degradation (ink on either side of the background), flat and tiny images."""
    rng = np.random.default_rng(0)
    digits = [degrade_image(d, [DEGRADATIONS[i % len(DEGRADATIONS)]], rng)
              for i, (d, _) in enumerate(digit_images(60, 3))]
    batch = _check_images("Image Classification", images + digits + [np.zeros((16, 16, 3), np.float32)])
    want = np.stack([ink_map(x) for x in batch])
    got = ink_maps(batch)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want), f"differs by up to {np.abs(got - want).max()}"
    assert classify(batch) == classify(batch, batched=False)
    assert ink_maps([]).shape == (0, 8, 8) and classify([]) == []


def test_batched_ssim_is_the_per_pair_one_bit_for_bit(images, image_tasks):
    pairs = [(s.inputs[0], s.target) for t in image_tasks if t.target == "image" for s in t.samples]
    preds = [p for p, _ in pairs] + [denoise(p) for p, _ in pairs[::5]]
    targets = [t for _, t in pairs] + [t for _, t in pairs[::5]]
    # the metric's odd cases: another size (resized), a label, NaN, grayscale, tiny images (1 - MAE)
    preds += [images[-1], "seven", np.full((64, 64, 3), np.nan, np.float32), targets[0][..., 0],
              np.zeros((2, 2, 3), np.float32)]
    targets += [targets[0], targets[0], targets[0], targets[0], np.ones((2, 2, 3), np.float32)]
    got = image_similarity_batch(preds, targets)
    assert got == image_similarity_batch(preds, targets, batched=False)
    assert 0.0 < min(got[: len(pairs)]) and max(got) <= 1.0


def test_batched_ssim_rejects_what_the_per_pair_one_rejects():
    with pytest.raises(ValueError, match="target must be"):
        image_similarity_batch([np.zeros((8, 8, 3))], ["not an image"])
    with pytest.raises(ValueError, match="1 predictions for 2 targets"):
        image_similarity_batch([np.zeros((8, 8, 3))], [np.zeros((8, 8, 3))] * 2)


def test_batched_and_per_sample_envs_give_the_same_rewards(image_tasks):
    """Every valid plan (up to two tools) of a few image tasks, cold cache: identical per-sample scores."""
    def env(batched: bool) -> OpenAGIEnv:
        metrics = {} if batched else {"image_similarity": lambda p, t: image_similarity_batch(p, t, batched=False)}
        return OpenAGIEnv(tasks=image_tasks, cache_bytes=0, registry=build_lite_registry(batched=batched),
                          metrics=metrics)

    fast, slow = env(True), env(False)
    tasks = [image_tasks[i] for i in (0, 7, 16, 22)]
    pairs = [(t, p) for t in tasks for p in enumerate_plans(fast.registry, t.inputs, t.target, fast.limits)
             if len(p.tools) <= 2]
    assert len(pairs) > 20
    got, want = fast.reward_plans(pairs), slow.reward_plans(pairs)
    assert [r.scores for r in got] == [r.scores for r in want]
    assert any(r.reward > 0 for r in got)
