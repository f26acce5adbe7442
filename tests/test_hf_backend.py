"""The `hf` backend and the paper's metrics, proven offline on tiny random checkpoints.

Every architecture the backend runs is built from a config (tests/hf_tiny.py), saved to a temp
directory and loaded back through the backend exactly as a hub id would be. Outputs are
meaningless; loading, preprocessing, batching, generation, postprocessing, the LRU model cache,
plan execution and the environment are the real code.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import math
import sys

import numpy as np
import pytest
import torch

import hf_tiny
from envs.openagi.hf import (
    DEFAULT_EXPERTS,
    HFBackend,
    HFBackendConfig,
    MemoryBudgetError,
    ModelCache,
    ModelLoadError,
    TaskScore,
    bertscore_f1,
    build_hf_registry,
    clip_score,
    describe_models,
    load_model,
    normalise_label,
    summarize_scores,
    vit_score,
)
from envs.openagi.hf.images import keep_luminance
from envs.openagi.hf.loader import resolve_dtype
from envs.openagi.plans import PlanLimits, check_plan, parse_plan
from envs.openagi.registry import IMAGE, TEXT
from envs.openagi.tools import OPENAGI_TOOLS

try:
    import diffusers  # noqa: F401  (optional extra: Text to Image Generation, Colorization)

    HAS_DIFFUSERS = True
except ImportError:
    HAS_DIFFUSERS = False
needs_diffusers = pytest.mark.skipif(not HAS_DIFFUSERS, reason="diffusers (optional extra) not installed")
RESTORERS = ("Image Super Resolution", "Image Deblurring", "Image Denoising")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models gain nothing from threads, and on a busy 2-core box threads spin-wait
    (measured here: 10-30x slower with 2 threads under load); restored afterwards."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """(tool -> checkpoint dir, metric -> checkpoint dir), built once per session."""
    return hf_tiny.build_all(tmp_path_factory.mktemp("hf_tiny"), with_diffusers=HAS_DIFFUSERS)


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


@pytest.fixture(scope="module")
def backend(tiny):
    return HFBackend(make_config(tiny))


@pytest.fixture(scope="module")
def registry(backend):
    return backend.registry()


def rand_images(seed: int, shapes=((20, 28), (20, 28), (13, 17))) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random((h, w, 3), dtype=np.float32) for h, w in shapes]


def gray(img: np.ndarray) -> np.ndarray:
    return np.repeat(img.mean(axis=2, keepdims=True), 3, axis=2).astype(np.float32)


TEXTS = ["the cat is on the [MASK] grass.", "what a good photo of a dog", ""]
DOCS = ["The cat sits in the green field with a dog.", "A document about a big bear.", ""]
QUERIES = ["where is the cat?", "what is it about?", "who?"]


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


# ---------------------------------------------------------------------------- each tool's output


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
    allowed = {normalise_label(l) for l in ("tabby, tabby cat", "golden retriever", "Egyptian cat", "goldfish, x")}
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


# ------------------------------------------------------------- batching, determinism, precision


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


# ------------------------------------------------------------------------------ the LRU cache


def test_lru_evicts_least_recently_used_under_the_budget(tiny):
    config = make_config(tiny)
    specs = {t: config.expert(t) for t in ("Sentiment Analysis", "Fill Mask", "Text Generation")}
    sizes = {t: load_model(s, torch.float32, local_files_only=True).nbytes for t, s in specs.items()}
    calls = []

    def loader(tool):
        def load():
            calls.append(tool)
            return load_model(specs[tool], torch.float32, local_files_only=True)
        return load

    a, b, c = specs
    budget = sizes[a] + sizes[b] + sizes[c] - min(sizes.values()) // 2  # any two fit, not three
    cache = ModelCache("cpu", budget)
    cache.get(a, loader(a))
    cache.get(b, loader(b))
    cache.get(a, loader(a))  # touch a: b is now the least recently used
    cache.get(c, loader(c))
    assert cache.keys() == [a, c] and cache.evictions == 1 and cache.used_bytes <= budget
    cache.get(b, loader(b))  # b again: reloaded, a evicted
    assert cache.keys() == [c, b] and calls == [a, b, c, b] and cache.hits == 1

    with pytest.raises(MemoryBudgetError, match="more than the whole memory budget"):
        ModelCache("cpu", sizes[a] // 2).get(a, loader(a))


def test_backend_respects_its_memory_budget(tiny):
    config = make_config(tiny, memory_budget_gib=1e-9 * 1)  # far below any model
    reg = HFBackend(config).registry()
    with pytest.raises(MemoryBudgetError):
        reg["Sentiment Analysis"](["good"])


# ---------------------------------------------------------------------------- config, errors


def test_config_rejects_unknown_names_and_values():
    with pytest.raises(ValueError, match="unknown name 'Image Clasification'"):
        HFBackendConfig(model_ids={"Image Clasification": "x"})
    with pytest.raises(ValueError, match="dtype='float8'"):
        HFBackendConfig(dtype="float8")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['treshold'\]"):
        HFBackendConfig(options={"Object Detection": {"treshold": 0.5}})
    with pytest.raises(ValueError, match="unknown hf backend setting"):
        HFBackendConfig.from_dict({"devices": "cpu"})
    with pytest.raises(ValueError, match="batch size for 'Fill Mask'"):
        HFBackendConfig(batch_sizes={"Fill Mask": 0})
    cfg = HFBackendConfig.from_dict({"model_ids": {"Machine Translation": "t5-large"}, "batch_size": 4})
    assert cfg.expert("Machine Translation").model_id == "t5-large"
    assert cfg.expert("Fill Mask").model_id == DEFAULT_EXPERTS["Fill Mask"].model_id
    assert cfg.tool_batch_size("Text to Image Generation") == 4


def test_missing_checkpoint_is_a_clear_error_and_no_download(tmp_path, tiny):
    missing = str(tmp_path / "no-such-model")
    reg = HFBackend(make_config(tiny, model_ids={**tiny[0], "Fill Mask": missing})).registry()
    with pytest.raises(ModelLoadError, match=r"'Fill Mask' model .*no-such-model"):
        reg["Fill Mask"](["a [MASK]"])


def test_missing_diffusers_is_a_clear_error(tiny, monkeypatch):
    monkeypatch.setitem(sys.modules, "diffusers", None)  # `import diffusers` now raises ImportError
    reg = HFBackend(make_config(tiny)).registry()
    with pytest.raises(ModelLoadError, match=r"Text to Image Generation.*`pip install diffusers`"):
        reg["Text to Image Generation"](["a cat"])


def test_describe_models_lists_everything_and_loads_nothing(tiny):
    rows = describe_models(make_config(tiny))
    assert [r["name"] for r in rows] == [s.name for s in OPENAGI_TOOLS] + ["bertscore", "vit", "clip"]
    assert {r["model_id"] for r in rows if r["name"] == "Fill Mask"} == {tiny[0]["Fill Mask"]}
    defaults = {r["name"]: r for r in describe_models()}
    assert defaults["Image Denoising"]["model_id"] == "caidas/swin2SR-realworld-sr-x4-64-bsrgan-psnr"
    assert defaults["Text to Image Generation"]["library"] == "diffusers"
    gpu = describe_models(HFBackendConfig(device="cuda", dtype="bfloat16"))  # fine on a CPU-only box too
    assert {r["device"].split(":")[0] for r in gpu} == {"cuda"}


# ------------------------------------------------------------------ plans, executor, environment

PLANS = [
    ("Image Super Resolution, Image Denoising, Image Deblurring, Image Classification", (IMAGE,), TEXT),
    ("Colorization, Image Captioning, Machine Translation", (IMAGE,), TEXT),
    ("Fill Mask, Text Summarization, Sentiment Analysis", (TEXT,), TEXT),
    ("Text Generation, Text to Image Generation, Object Detection", (TEXT,), TEXT),
    ("(Image Denoising, Colorization) (Fill Mask) Visual Question Answering, Machine Translation", (IMAGE, TEXT), TEXT),
    ("() (Fill Mask) Question Answering, Machine Translation", (TEXT, TEXT), TEXT),
]


@pytest.mark.parametrize("text,inputs,target", PLANS, ids=[p[0][:40] for p in PLANS])
def test_linear_and_nonlinear_plans_run_through_the_executor(registry, text, inputs, target):
    from envs.openagi.executor import PlanExecutor
    from envs.openagi.tasks import Sample

    plan = parse_plan(text, registry)
    if not HAS_DIFFUSERS and set(plan.all_tools) & set(hf_tiny.DIFFUSERS_TOOLS):
        pytest.skip("diffusers (optional extra) not installed")
    check_plan(plan, registry, inputs, target, PlanLimits(max_tools=6, max_branch=3, max_tail=2))
    data = {IMAGE: [gray(x) for x in rand_images(8)], TEXT: ["the [MASK] sits on the grass.", "a good dog", "what"]}
    if inputs == (TEXT, TEXT):
        data = {0: DOCS, 1: QUERIES}
    columns = [data[i] if inputs == (TEXT, TEXT) else data[m] for i, m in enumerate(inputs)]
    samples = [Sample(uid=f"s{i}", inputs=tuple(col[i] for col in columns), target="") for i in range(3)]
    run = PlanExecutor(registry).run(plan, samples)
    assert run.errors == [None, None, None]
    assert all(isinstance(o, str) for o in run.outputs)


def test_a_plan_through_the_environment_end_to_end(registry):
    from envs.openagi.env import OpenAGIEnv
    from envs.openagi.plans import LinearPlan, NonlinearPlan
    from envs.openagi.tasks import Sample, Task

    images = rand_images(9)
    restore = Task(0, "Given noisy blurry image, how to return the regular image step by step?", (IMAGE,), IMAGE,
                   "image_similarity", "restoration", (("noisy", "blurry"),),
                   LinearPlan(("Image Denoising", "Image Deblurring")),
                   [Sample(f"r{i}", (x,), x) for i, x in enumerate(images)])
    qa = Task(1, "Given English document and clozed English query, how to answer the question in English step by step?",
              (TEXT, TEXT), TEXT, "token_f1", "qa", ((), ("clozed",)),
              NonlinearPlan(((), ("Fill Mask",)), "Question Answering"),
              [Sample(f"q{i}", (d, q), d.split(" ")[0] if d else "") for i, (d, q) in enumerate(zip(DOCS, QUERIES))])
    env = OpenAGIEnv(registry=registry, tasks=[restore, qa], split="all")
    for task in (restore, qa):
        env.reset(options={"task": task.id})
        _, reward, terminated, _, info = env.step(str(task.reference_plan))
        assert terminated and info["valid"] and info["sample_errors"] == [None] * 3, info
        assert 0.0 <= reward <= 1.0 and len(info["scores"]) == 3
    # the same plan again is served from the execution cache: no new expert calls
    calls = env.executor.tool_calls
    env.reset(options={"task": 0})
    env.step(str(restore.reference_plan))
    assert env.executor.tool_calls == calls


# ------------------------------------------------------------------------------------ metrics


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
        e = [model(**proc(images=[to_pil(x)], return_tensors="pt")).last_hidden_state[0, 0] for x in (images[0], 1 - images[0])]
    assert d[0] == pytest.approx(max(0.0, float(torch.nn.functional.cosine_similarity(e[0], e[1], dim=0))), abs=1e-5)
    assert vit_score(images[:1], images[:1], model=path, device="cpu", local_files_only=True) == pytest.approx([1.0], abs=1e-5)


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
