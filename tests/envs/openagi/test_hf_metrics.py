"""The `hf` backend of the OpenAGI env (envs.openagi.hf), proven offline on tiny random checkpoints
(tests/hf_tiny.py, loaded back through the backend exactly as a hub id would be; fixtures in
tests/envs/openagi/conftest.py, helpers in tests/hf_experts.py): the paper's metrics (BERTScore, ViT
score, CLIP score) and the score summary."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import math

import pytest
import torch

from envs.openagi.hf import (
    TaskScore,
    bertscore_f1,
    clip_score,
    summarize_scores,
    vit_score,
)
from tests.hf_experts import rand_images

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_bertscore_properties(backend):
    s = backend.metric_models
    a, b = "the cat sits on the grass", "a red car is in the field"
    same, diff, swapped = s.bertscore_f1([a, a, b], [a, b, a])
    assert same == pytest.approx(1.0, abs=1e-5)
    assert 0.0 <= diff < 0.999 and diff == pytest.approx(swapped, abs=1e-6)  # F1 is symmetric
    assert s.bertscore_f1(["", "", a], ["", a, ""]) == [1.0, 0.0, 0.0]
    p, r, f = s.bertscore([a], [a + " with a dog"])[0]
    assert p == pytest.approx(1.0, abs=1e-4) or p > r  # every word of a is in the longer reference
    assert f == pytest.approx(2 * p * r / (p + r))
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        s.bertscore_f1([a, b], [a])


def test_bertscore_layer_choice(tiny):
    _, metrics = tiny
    a, b = ["the cat sits on the grass"], ["a red car is in the field"]
    last = bertscore_f1(a, b, model=metrics["bertscore"], device="cpu", local_files_only=True)
    first = bertscore_f1(a, b, model=metrics["bertscore"], num_layers=1, device="cpu", local_files_only=True)
    assert last != first
    with pytest.raises(ValueError, match="bertscore_num_layers=9 but .* has 3 layers"):
        bertscore_f1(a, b, model=metrics["bertscore"], num_layers=9, device="cpu", local_files_only=True)


def test_vit_score_is_a_cosine_similarity(backend, tiny):
    images = rand_images(10)
    s = backend.metric_models.vit_score(images, images)
    assert s == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)
    d = backend.metric_models.vit_score(images, [1.0 - x for x in images])
    assert all(0.0 <= v < 1.0 for v in d)
    # by hand: cosine of the ViT [CLS] embeddings
    import transformers as tf

    from envs.openagi.hf.images import to_pil

    path = tiny[1]["vit"]
    model, proc = tf.ViTModel.from_pretrained(path, add_pooling_layer=False), tf.ViTImageProcessor.from_pretrained(path)
    with torch.no_grad():
        e = [model(**proc(images=[to_pil(x)], return_tensors="pt")).last_hidden_state[0, 0]
             for x in (images[0], 1 - images[0])]
    assert d[0] == pytest.approx(max(0.0, float(torch.nn.functional.cosine_similarity(e[0], e[1], dim=0))), abs=1e-5)
    assert vit_score(images[:1], images[:1], model=path, device="cpu",
                     local_files_only=True) == pytest.approx([1.0], abs=1e-5)


def test_clip_score_matches_clips_cosine(backend, tiny):
    import transformers as tf

    from envs.openagi.hf.images import to_pil

    images, texts = rand_images(11), ["a photo of a cat", "a red car", ""]
    scores = backend.metric_models.clip_score(images, texts)
    path = tiny[1]["clip"]
    model, proc = tf.CLIPModel.from_pretrained(path), tf.CLIPProcessor.from_pretrained(path)
    with torch.no_grad():
        out = model(**proc(text=texts, images=[to_pil(x) for x in images], padding=True, return_tensors="pt"))
    cos = torch.nn.functional.cosine_similarity(out.image_embeds, out.text_embeds, dim=-1)
    assert scores == pytest.approx([min(max(float(c), 0.0), 1.0) for c in cos], abs=1e-5)
    assert clip_score(images, texts, model=path, device="cpu", local_files_only=True) == pytest.approx(scores, abs=1e-6)
    metric_fns = backend.metric_models.batch_metrics()
    assert metric_fns["clip"](images, texts) == pytest.approx(scores, abs=1e-6)
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        backend.metric_models.compute("bleu", ["a"], ["a"])


def test_summarize_scores_weighted_average_and_families():
    scores = [
        TaskScore(0, "restoration", "vit", 0.6, n_samples=10),
        TaskScore(1, "caption", "bertscore", 0.2, n_samples=10),
        TaskScore(2, "caption", "bertscore", 0.4, n_samples=30),
        TaskScore(3, "text_to_image", "clip", 0.3, n_samples=10),
    ]
    s = summarize_scores(scores)
    assert s.by_metric == pytest.approx({"vit": 0.6, "bertscore": 0.3, "clip": 0.3})
    # the weighted average of the metric means, weighted by their task counts = the task mean
    assert s.overall == pytest.approx((0.6 * 1 + 0.3 * 2 + 0.3 * 1) / 4)
    assert s.by_family == pytest.approx({"restoration": 0.6, "caption": 0.3, "text_to_image": 0.3})
    assert s.tasks_by_metric == {"vit": 1, "bertscore": 2, "clip": 1} and s.n_tasks == 4
    per_sample = summarize_scores(scores, weighting="sample")
    assert per_sample.overall == pytest.approx((6 + 2 + 12 + 3) / 60)
    assert per_sample.by_metric["bertscore"] == pytest.approx((2 + 12) / 40)
    with pytest.raises(ValueError, match="task 0 appears twice"):
        summarize_scores(scores + [TaskScore(0, "x", "vit", 0.1)])
    with pytest.raises(ValueError, match="not a number in"):
        TaskScore(5, "x", "vit", math.nan)
    with pytest.raises(ValueError, match="no task scores"):
        summarize_scores([])
