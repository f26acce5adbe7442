"""The `hf` backend of the OpenAGI env (envs.openagi.hf), proven offline on tiny random checkpoints
(tests/hf_tiny.py, loaded back through the backend exactly as a hub id would be; fixtures in
tests/envs/openagi/conftest.py, helpers in tests/hf_experts.py): the registry of the 15 tools
(loaded lazily, shared checkpoints once), each tool's output, batching, determinism and precision."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"


import numpy as np
import pytest
import torch

from envs.openagi.hf import (
    HFBackend,
    build_hf_registry,
    normalise_label,
)
from envs.openagi.hf.images import keep_luminance
from envs.openagi.hf.loader import resolve_dtype
from envs.openagi.registry import IMAGE, TEXT
from envs.openagi.tools import OPENAGI_TOOLS
from tests import hf_tiny
from tests.hf_experts import DOCS, HAS_DIFFUSERS, QUERIES, TEXTS, gray, make_config, needs_diffusers, rand_images

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------------------ the registry
def test_registry_has_the_15_tools_and_loads_nothing(tiny):
    backend = HFBackend(make_config(tiny))
    reg = backend.registry()
    assert reg.names == tuple(s.name for s in OPENAGI_TOOLS)
    for spec in OPENAGI_TOOLS:
        assert reg[spec.name].inputs == spec.inputs and reg[spec.name].output == spec.output
    assert len(backend.cache) == 0 and backend.cache.loads == 0
    assert build_hf_registry(make_config(tiny)).names == reg.names


def test_only_the_tools_a_plan_uses_are_loaded_and_shared_checkpoints_load_once(tiny):
    backend = HFBackend(make_config(tiny))
    reg = backend.registry()
    images = rand_images(0)
    x = reg["Image Denoising"](images)
    x = reg["Image Deblurring"](x)
    captions = reg["Image Captioning"](x)
    assert all(isinstance(c, str) for c in captions)
    tools, _ = tiny
    loaded = {key[1] for key in backend.cache.keys()}
    assert loaded == {tools["Image Denoising"], tools["Image Captioning"]}
    assert backend.cache.loads == 2  # Denoising and Deblurring share the x4 restorer
    assert reg["Image Denoising"]([]) == []  # an empty batch loads nothing new
    assert backend.cache.loads == 2


# ------------------------------------------------------------------------------ each tool's output
@pytest.mark.parametrize("tool", [s.name for s in OPENAGI_TOOLS])
def test_every_tool_follows_the_data_conventions(registry, tool):
    spec = registry[tool]
    if spec.inputs == (IMAGE, TEXT):
        args = (rand_images(1), ["what color is the cat?", "how many dogs?", "is it red?"])
    elif spec.inputs == (TEXT, TEXT):
        args = (DOCS, QUERIES)
    elif spec.inputs == (IMAGE,):
        args = (rand_images(1),)
    else:
        args = (TEXTS,)
    if tool in hf_tiny.DIFFUSERS_TOOLS and not HAS_DIFFUSERS:
        pytest.skip("diffusers (optional extra) not installed")
    out = spec(*args)
    assert len(out) == 3
    for i, o in enumerate(out):
        if spec.output == TEXT:
            assert isinstance(o, str)
            continue
        assert isinstance(o, np.ndarray) and o.dtype == np.float32 and o.ndim == 3 and o.shape[2] == 3
        assert 0.0 <= o.min() and o.max() <= 1.0
        if tool == "Image Super Resolution":
            assert o.shape[:2] == (2 * args[0][i].shape[0], 2 * args[0][i].shape[1])
        elif tool in ("Image Deblurring", "Image Denoising", "Colorization"):
            assert o.shape == args[0][i].shape
        else:  # Text to Image Generation: the tiny pipeline's 16x16 canvas
            assert o.shape == (16, 16, 3)


def test_classification_labels_are_normalised(registry):
    labels = registry["Image Classification"](rand_images(2))
    allowed = {normalise_label(label)
               for label in ("tabby, tabby cat", "golden retriever", "Egyptian cat", "goldfish, x")}
    assert set(labels) <= allowed
    assert normalise_label("Tabby, tabby cat") == "tabby" and normalise_label("golden_retriever") == "golden retriever"


def test_object_detection_names_unique_known_and_thresholded(tiny, registry):
    out = registry["Object Detection"](rand_images(3))
    for text in out:
        names = text.split(", ")
        assert text and len(names) == len(set(names)) and set(names) <= {"person", "dog", "cat"}
    strict = HFBackend(make_config(tiny, options={"Object Detection": {"threshold": 0.999}})).registry()
    assert strict["Object Detection"](rand_images(3)) == ["", "", ""]


def test_question_answering_returns_a_span_of_each_own_document(tiny, registry):
    answers = registry["Question Answering"](DOCS, QUERIES)
    for doc, ans in zip(DOCS, answers):
        assert ans in doc
    assert answers[0] and answers[1] and answers[2] == ""  # every document gets its own answer
    # a document longer than one window: answers still come from that sample's document
    long_doc = " ".join(["the big red car was on the field."] * 30)
    small = HFBackend(make_config(tiny, options={"Question Answering": {"max_length": 32, "stride": 8}})).registry()
    ans = small["Question Answering"]([long_doc, DOCS[0]], ["what was on the field?", QUERIES[0]])
    assert ans[0] and ans[0] in long_doc and ans[1] in DOCS[0]


def test_fill_mask_fills_every_mask_and_keeps_the_rest(registry):
    out = registry["Fill Mask"](["a [MASK] cat and a [MASK] dog.", "no mask here", "[MASK]"])
    assert "[MASK]" not in out[0] and out[0].startswith("a ") and " cat and a " in out[0] and out[0].endswith(" dog.")
    assert out[1] == "no mask here"
    assert out[2] and "[MASK]" not in out[2]


def test_text_generation_continues_the_prompt(registry):
    out = registry["Text Generation"](["the cat is", "a dog"])
    assert out[0].startswith("the cat is") and out[1].startswith("a dog")


@needs_diffusers
def test_colorization_keeps_the_input_luminance(registry):
    from skimage.color import rgb2lab

    src = [gray(x) for x in rand_images(4)]
    out = registry["Colorization"](src)
    for s, o in zip(src, out):
        assert np.abs(rgb2lab(o)[..., 0] - rgb2lab(s)[..., 0]).mean() < 1.0  # L in [0, 100]
    # and the merge itself: a gray source with a colourful edit keeps the source's L exactly-ish
    s = gray(rand_images(5)[0])
    colourful = np.clip(s * np.array([1.0, 0.6, 0.3], dtype=np.float32), 0, 1)
    merged = keep_luminance(s, colourful)
    assert np.abs(rgb2lab(merged)[..., 0] - rgb2lab(s)[..., 0]).mean() < 1.0
    assert np.abs(merged[..., 0] - merged[..., 2]).mean() > 0.01  # it has colour now


def test_inputs_are_checked_with_clear_errors(registry):
    with pytest.raises(ValueError, match=r"Image Deblurring input 0, sample 1: image values must lie in \[0, 1\]"):
        registry["Image Deblurring"]([rand_images(0)[0], rand_images(0)[0] * 3])
    with pytest.raises(TypeError, match="Fill Mask input 0, sample 0: expected text"):
        registry["Fill Mask"]([3])
    with pytest.raises(ValueError, match=r"shape \(H, W, 3\)"):
        registry["Image Classification"]([np.zeros((4, 4), np.float32)])


# ------------------------------------------------------------------------------ batching, determinism, precision
def test_batch_size_does_not_change_outputs(tiny, backend):
    one = HFBackend(make_config(tiny, batch_size=1), cache=backend.cache).registry()
    many = backend.registry()
    images = rand_images(6, shapes=((20, 28), (13, 17), (20, 28), (24, 24)))
    for tool in ("Image Classification", "Image Deblurring", "Image Super Resolution"):
        a, b = one[tool](images), many[tool](images)
        for x, y in zip(a, b):
            if isinstance(x, np.ndarray):
                np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)  # images in [0, 1]; other GEMM shapes
            else:
                assert x == y
    texts = ["the cat is [MASK].", "a big [MASK] dog", "what is this", "good"]
    for tool in ("Fill Mask", "Sentiment Analysis", "Machine Translation", "Text Summarization", "Text Generation"):
        assert one[tool](texts) == many[tool](texts), tool
    assert one["Question Answering"](DOCS, QUERIES) == many["Question Answering"](DOCS, QUERIES)
    if HAS_DIFFUSERS:  # seeded per sample from its content: same image in any batch
        a = one["Text to Image Generation"](["a red car", "a dog"])
        b = many["Text to Image Generation"](["a dog", "a red car"])
        np.testing.assert_allclose(a[0], b[1], rtol=1e-5, atol=1e-5)
        assert not np.allclose(a[0], a[1])


def test_half_precision_only_where_safe(tiny):
    cpu = torch.device("cpu")
    assert resolve_dtype("auto", cpu, ("bfloat16", "float16")) == torch.float32
    assert resolve_dtype("float16", cpu, ("bfloat16",)) == torch.float32  # T5 never runs in float16
    assert resolve_dtype("bfloat16", cpu, ("bfloat16",)) == torch.bfloat16
    assert resolve_dtype("bfloat16", cpu, ()) == torch.float32  # Swin2SR restorers stay float32
    backend = HFBackend(make_config(tiny, dtype="bfloat16"))
    reg = backend.registry()
    assert all(isinstance(s, str) for s in reg["Sentiment Analysis"](TEXTS))
    assert all(isinstance(s, str) for s in reg["Machine Translation"](TEXTS))
    out = reg["Image Deblurring"](rand_images(7))
    assert all(o.dtype == np.float32 for o in out)
    dtypes = {key[0]: key[2] for key in backend.cache.keys()}
    assert dtypes == {"text-classification": "bfloat16", "seq2seq": "bfloat16", "image-to-image": "float32"}
    assert backend.experts.model_key("Machine Translation")[2] == "bfloat16"
    fp16 = HFBackend(make_config(tiny, dtype="float16"))
    assert fp16.experts.model_key("Machine Translation")[2] == "float32"
    assert fp16.experts.model_key("Sentiment Analysis")[2] == "float16"
