"""Shared helpers of the `hf` backend tests (tests/envs/openagi/test_hf_*.py): the backend config
over the tiny random checkpoints of tests/hf_tiny.py, sample images and texts, the optional
diffusers extra."""

from __future__ import annotations

import numpy as np
import pytest

from envs.openagi.hf import HFBackendConfig

try:
    import diffusers  # noqa: F401  (optional extra: Text to Image Generation, Colorization)

    HAS_DIFFUSERS = True
except ImportError:
    HAS_DIFFUSERS = False


needs_diffusers = pytest.mark.skipif(not HAS_DIFFUSERS, reason="diffusers (optional extra) not installed")


RESTORERS = ("Image Super Resolution", "Image Deblurring", "Image Denoising")


def make_config(tiny, **kw) -> HFBackendConfig:
    tools, metrics = tiny
    base = dict(
        model_ids=tools, metric_models=metrics, device="cpu", local_files_only=True, max_new_tokens=4,
        generate_kwargs={"Text to Image Generation": {"num_inference_steps": 2},
                         "Colorization": {"num_inference_steps": 2}},
        options={"Object Detection": {"threshold": 0.0}},
    )
    base.update(kw)
    return HFBackendConfig(**base)


def rand_images(seed: int, shapes=((20, 28), (20, 28), (13, 17))) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random((h, w, 3), dtype=np.float32) for h, w in shapes]


def gray(img: np.ndarray) -> np.ndarray:
    return np.repeat(img.mean(axis=2, keepdims=True), 3, axis=2).astype(np.float32)


TEXTS = ["the cat is on the [MASK] grass.", "what a good photo of a dog", ""]


DOCS = ["The cat sits in the green field with a dog.", "A document about a big bear.", ""]


QUERIES = ["where is the cat?", "what is it about?", "who?"]
