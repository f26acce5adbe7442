"""The full suite's hub data, proven offline: tiny local datasets with the real column schemas.

Each hub source (ImageNet-1k, COCO captions / instances, CNN/DailyMail, SST-2, TextVQA, SQuAD)
is stood in for by a few rows written with ``datasets`` (same features, same split names) to a
temp dir, the source overrides point at those dirs, and the real builder runs end to end with
the tiny hf models of tests/hf_tiny.py: record selection, augmentations, German targets from the
Machine Translation expert, the Arrow build, the reload from disk, and plans scored through
``OpenAGIEnv`` with the paper's metrics. Also: the GPU configs and ``dry_run`` (loads nothing).
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub / datasets
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import datasets as hfd
import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from envs.openagi.env import OpenAGIEnv
from envs.openagi.hf import HFBackend, HFBackendConfig
from envs.openagi.hf.records import add_german, fetch_records, load_records, prepare_image
from envs.openagi.hf.sources import DEFAULT_SOURCES, DatasetAccessError, hub_error, resolve_sources
from envs.openagi.hf.suite import (
    DiskSamples,
    build_full_suite,
    full_suite_dir,
    load_full_suite,
    source_for,
    split_tasks,
    task_samples,
)
from envs.openagi.metrics import compute_metric
from envs.openagi.registry import TEXT
from envs.openagi.split import load_split
from envs.openagi.suite import task_specs
from rltf.config.loading import CONFIG_DIR, ConfigError, load_config
from rltf.stages.describe import describe_run
from tests import hf_tiny

try:
    import diffusers  # noqa: F401

    HAS_DIFFUSERS = True
except ImportError:
    HAS_DIFFUSERS = False

N = 3  # samples per task
SIDE = 24  # max image side: tiny images keep the tiny models fast
WORDS = hf_tiny.WORDS
SPECS = task_specs("full")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models gain nothing from threads; on a busy 2-core box threads spin-wait."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


# ------------------------------------------------------------------- tiny stand-in hub datasets

IMAGENET_NAMES = ["tench, Tinca tinca", "goldfish, Carassius auratus", "tabby, tabby cat", "golden retriever"]
COCO_NAMES = ["person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
              "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse"]


def _img(rng: np.random.Generator, h: int, w: int) -> Image.Image:
    return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))


def _sentence(rng: np.random.Generator, n: int) -> str:
    return " ".join(WORDS[i] for i in rng.integers(6, len(WORDS), n)) + "."


def write_sources(root: Path) -> dict[str, dict]:
    """Seven tiny DatasetDicts with the hub datasets' features and split names -> overrides."""
    rng = np.random.default_rng(7)
    shapes = [(30, 40), (44, 26), (36, 36), (50, 30), (28, 46), (40, 40)]
    tables = {
        "imagenet": ("validation", {"image": hfd.Image(), "label": hfd.ClassLabel(names=IMAGENET_NAMES)},
                     {"image": [_img(rng, *s) for s in shapes], "label": [0, 1, 2, 3, 2, 0]}),
        "coco_captions": ("val", {
            "question_id": hfd.Value("string"), "image": hfd.Image(), "question": hfd.Value("string"),
            "answer": hfd.Sequence(hfd.Value("string")), "id": hfd.Value("int64"), "license": hfd.Value("int8"),
            "file_name": hfd.Value("string"), "coco_url": hfd.Value("string"), "height": hfd.Value("int32"),
            "width": hfd.Value("int32"), "date_captured": hfd.Value("string")}, {
            "question_id": [f"{i:012d}.jpg" for i in range(5)], "image": [_img(rng, *s) for s in shapes[:5]],
            "question": ["Please carefully observe the image and come up with a caption for the image."] * 5,
            "answer": [[_sentence(rng, 6), _sentence(rng, 5)] for _ in range(5)], "id": list(range(5)),
            "license": [1] * 5, "file_name": [f"{i:012d}.jpg" for i in range(5)], "coco_url": ["http://x"] * 5,
            "height": [s[0] for s in shapes[:5]], "width": [s[1] for s in shapes[:5]], "date_captured": ["2013"] * 5}),
        "coco_instances": ("val", {
            "image_id": hfd.Value("int64"), "image": hfd.Image(), "width": hfd.Value("int64"),
            "height": hfd.Value("int64"), "objects": hfd.Sequence({
                "bbox_id": hfd.Value("int64"), "category": hfd.ClassLabel(names=COCO_NAMES),
                "bbox": hfd.Sequence(hfd.Value("float64"), length=4), "area": hfd.Value("int64")})}, {
            "image_id": list(range(5)), "image": [_img(rng, *s) for s in shapes[:5]],
            "width": [s[1] for s in shapes[:5]], "height": [s[0] for s in shapes[:5]],
            "objects": [  # row 1 has no objects: it must be skipped
                {"bbox_id": [1, 2, 3], "category": [16, 0, 16], "bbox": [[0, 0, 5, 5]] * 3, "area": [10, 30, 25]},
                {"bbox_id": [], "category": [], "bbox": [], "area": []},
                {"bbox_id": [4], "category": [2], "bbox": [[1, 1, 2, 2]], "area": [4]},
                {"bbox_id": [5, 6], "category": [15, 14], "bbox": [[0, 0, 1, 1]] * 2, "area": [5, 9]},
                {"bbox_id": [7], "category": [0], "bbox": [[0, 0, 3, 3]], "area": [9]}]}),
        "cnn_dailymail": ("test", {"article": hfd.Value("string"), "highlights": hfd.Value("string"),
                                   "id": hfd.Value("string")}, {
            "article": [_sentence(rng, 30) + " " + _sentence(rng, 20) for _ in range(4)],
            "highlights": [_sentence(rng, 8) + "\n" + _sentence(rng, 6) for _ in range(4)],
            "id": [f"{i:040x}" for i in range(4)]}),
        "sst2": ("validation", {"idx": hfd.Value("int32"), "sentence": hfd.Value("string"),
                                "label": hfd.ClassLabel(names=["negative", "positive"])}, {
            "idx": list(range(5)), "sentence": [_sentence(rng, 7) + " " for _ in range(5)], "label": [0, 1, 1, 0, 1]}),
        "textvqa": ("validation", {
            "image_id": hfd.Value("string"), "question_id": hfd.Value("int32"), "question": hfd.Value("string"),
            "question_tokens": hfd.Sequence(hfd.Value("string")), "image": hfd.Image(),
            "image_width": hfd.Value("int32"), "image_height": hfd.Value("int32"),
            "flickr_original_url": hfd.Value("string"), "flickr_300k_url": hfd.Value("string"),
            "answers": hfd.Sequence(hfd.Value("string")), "image_classes": hfd.Sequence(hfd.Value("string")),
            "set_name": hfd.Value("string"), "ocr_tokens": hfd.Sequence(hfd.Value("string"))}, {
            "image_id": [f"{i:016x}" for i in range(4)], "question_id": list(range(4)),
            "question": ["what number is on the player jersey?", "what color is the big car?",
                         "what is the name of the bear?", "which word is in this photo?"],
            "question_tokens": [["what"]] * 4, "image": [_img(rng, *s) for s in shapes[:4]],
            "image_width": [s[1] for s in shapes[:4]], "image_height": [s[0] for s in shapes[:4]],
            "flickr_original_url": ["http://x"] * 4, "flickr_300k_url": ["http://x"] * 4,
            "answers": [["22", "22", "23"], ["red", "blue", "blue"], ["bear"], ["good", "bad", "good", "bad"]],
            "image_classes": [["Person"]] * 4, "set_name": ["val"] * 4, "ocr_tokens": [["22"]] * 4}),
        "squad": ("validation", {
            "id": hfd.Value("string"), "title": hfd.Value("string"), "context": hfd.Value("string"),
            "question": hfd.Value("string"),
            "answers": hfd.Sequence({"text": hfd.Value("string"), "answer_start": hfd.Value("int32")})}, {
            "id": [str(i) for i in range(4)], "title": ["Super_Bowl_50"] * 4,
            "context": ["The cat sits in the green field with a dog. " + _sentence(rng, 12) for _ in range(4)],
            "question": ["where is the cat?", "what is with the cat?", "which field?", "who sits?"],
            "answers": [{"text": ["in the green field", "the field"], "answer_start": [13, 21]},
                        {"text": ["a dog"], "answer_start": [38]}, {"text": ["green"], "answer_start": [24]},
                        {"text": ["The cat"], "answer_start": [0]}]}),
    }
    overrides = {}
    for name, (split, features, columns) in tables.items():
        ds = hfd.Dataset.from_dict(columns, features=hfd.Features(features))
        hfd.DatasetDict({split: ds}).save_to_disk(str(root / name))
        overrides[name] = {"path": str(root / name)}
    return overrides


# --------------------------------------------------------------------------------- fixtures

TOOLS_NEEDED = ("Machine Translation", "Image Denoising", "Image Deblurring", "Image Super Resolution",
                "Image Classification", "Fill Mask", "Question Answering", "Visual Question Answering",
                "Sentiment Analysis")


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """The tiny checkpoints the plans below use (+ Text to Image Generation with diffusers)."""
    root = tmp_path_factory.mktemp("hf_tiny_data")
    tools = TOOLS_NEEDED + (("Text to Image Generation",) if HAS_DIFFUSERS else ())
    built: dict[str, str] = {}
    out_tools, out_metrics = {}, {}
    for table, names, out in ((hf_tiny.TOOL_BUILDERS, tools, out_tools), (hf_tiny.METRIC_BUILDERS, None, out_metrics)):
        for name, (dirname, build) in table.items():
            if names is not None and name not in names:
                continue
            if dirname not in built:
                built[dirname] = str(build(root / dirname))
            out[name] = built[dirname]
    return out_tools, out_metrics


@pytest.fixture(scope="module")
def backend(tiny_models):
    tools, metrics = tiny_models
    return HFBackend(HFBackendConfig(
        model_ids=tools, metric_models=metrics, device="cpu", local_files_only=True, max_new_tokens=4,
        generate_kwargs={"Text to Image Generation": {"num_inference_steps": 2}}))


@pytest.fixture(scope="module")
def registry(backend):
    return backend.registry()


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return write_sources(tmp_path_factory.mktemp("hub_standins"))


@pytest.fixture(scope="module")
def built(tmp_path_factory, registry, sources):
    data_dir = tmp_path_factory.mktemp("openagi_data")
    tasks = build_full_suite(data_dir, N, 0, registry, sources=sources, max_image_side=SIDE)
    return data_dir, tasks


def _records(data_dir: Path, sources, name: str):
    root = full_suite_dir(data_dir, N, 0, sources, SIDE)
    return load_records(root / "records" / name, name)


# ------------------------------------------------------------------------------- the suite


def test_the_185_tasks_their_metrics_and_split(built):
    _, tasks = built
    assert len(tasks) == 185 and sum(t.is_linear for t in tasks) == 117
    assert [t.description for t in tasks] == [s.description for s in SPECS]
    assert [t.reference_plan for t in tasks] == [s.reference_plan for s in SPECS]
    by_kind = {s.output_kind: t.metric for s, t in zip(SPECS, tasks)}
    assert by_kind["image"] == "vit" and by_kind["generated_image"] == "clip"
    assert {m for k, m in by_kind.items() if k not in ("image", "generated_image")} == {"bertscore"}
    assert Counter(t.metric for t in tasks) == {"bertscore": 168, "vit": 15, "clip": 2}
    assert all(isinstance(t.samples, DiskSamples) and len(t.samples) == N for t in tasks)
    uids = [s.uid for t in tasks for s in t.samples]
    assert len(set(uids)) == len(uids) == 185 * N
    parts = split_tasks(tasks)
    assert {k: [t.id for t in v] for k, v in parts.items()} == load_split("full")


def test_samples_are_the_records_with_the_lite_augmentations(built, sources):
    data_dir, tasks = built
    for spec, task in zip(SPECS, tasks):  # exactly what task_samples computes, through PNG and back
        records = _records(data_dir, sources, source_for(spec))
        expected = task_samples(spec, task.id, records, 0)
        for sample, (inputs, target) in zip(task.samples, expected):
            for got, want in zip((*sample.inputs, sample.target), (*inputs, target)):
                if isinstance(want, np.ndarray):
                    assert got.dtype == np.float32 and got.shape == want.shape
                    assert np.abs(got - want).max() <= 0.5 / 255 + 1e-6  # 8-bit PNG, lossless beyond that
                else:
                    assert got == want
    imagenet = _records(data_dir, sources, "imagenet")
    by_degr = {t.degradations: t for t in tasks[:15]}
    for rec, sample in zip(imagenet, by_degr[(("low-resolutioned",),)].samples):
        h, w = rec.image.shape[:2]
        assert max(h, w) <= SIDE and h % 2 == 0 and w % 2 == 0
        assert sample.inputs[0].shape == (h // 2, w // 2, 3)  # a real x2 downsampling
        np.testing.assert_array_equal(sample.target, rec.image.astype(np.float32) / 255)
    gray = by_degr[(("grayscale",),)].samples[0].inputs[0]
    assert np.abs(gray[..., 0] - gray[..., 2]).max() <= 1 / 255
    noisy = by_degr[(("noisy",),)].samples[0]
    assert noisy.inputs[0].shape == noisy.target.shape and np.abs(noisy.inputs[0] - noisy.target).mean() > 0.02
    # clozed text: exactly one word of the clean text replaced by [MASK]
    squad = _records(data_dir, sources, "squad")
    qa = next(t for s, t in zip(SPECS, tasks)
              if s.inputs == (TEXT, TEXT) and s.degradations == (("clozed",), ("clozed",)))
    for rec, sample in zip(squad, qa.samples):
        for clean, clozed in ((rec.text, sample.inputs[0]), (rec.query, sample.inputs[1])):
            assert clozed.count("[MASK]") == 1
            pattern = re.escape(clozed).replace(re.escape("[MASK]"), r"[A-Za-z]+(?:['\-][A-Za-z]+)*")
            assert re.fullmatch(pattern, clean) and clozed != clean


def test_targets_english_and_german_from_the_machine_translation_expert(built, sources, registry):
    data_dir, tasks = built
    english = {name: [r.target for r in _records(data_dir, sources, name)] for name in
               ("imagenet", "coco_instances", "sst2", "textvqa", "squad", "cnn_dailymail", "coco_captions")}
    assert set(english["imagenet"]) <= {"tench", "goldfish", "tabby", "golden retriever"}
    assert set(english["sst2"]) <= {"positive", "negative"}
    names = {"dog, person", "car", "bird, cat", "person"}  # by total area; the object-less row is skipped
    assert set(english["coco_instances"]) <= names
    assert set(english["textvqa"]) <= {"22", "blue", "bear", "good"}  # the most common answer, ties: first
    assert set(english["squad"]) <= {"in the green field", "a dog", "green", "The cat"}
    assert all("\n" not in t for t in english["cnn_dailymail"])
    mt = registry["Machine Translation"]
    for name in english:
        recs = _records(data_dir, sources, name)
        assert [r.target_de for r in recs] == mt([r.target for r in recs])
    for spec, task in zip(SPECS, tasks):
        recs = _records(data_dir, sources, source_for(spec))
        want = ([r.target_de for r in recs] if spec.language == "de" or spec.output_kind == "translation"
                else [r.target for r in recs] if spec.output_kind != "image" else None)
        if want is not None:
            assert [s.target for s in task.samples] == want, spec.description


def _same_samples(a, b) -> bool:
    def same(x, y):
        return np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y

    return all(x.uid == y.uid and same(x.target, y.target) and all(map(same, x.inputs, y.inputs))
               for ta, tb in zip(a, b) for x, y in zip(ta.samples, tb.samples))


def test_reloaded_without_the_registry_and_the_same_seed_rebuilds_the_same_data(built, sources, registry, tmp_path):
    data_dir, tasks = built
    again = build_full_suite(data_dir, N, 0, None, sources=sources, max_image_side=SIDE)  # nothing to build
    assert len(list(Path(data_dir).iterdir())) == 1 and _same_samples(tasks, again)
    fresh = build_full_suite(tmp_path / "fresh", N, 0, registry, sources=sources, max_image_side=SIDE)
    assert len(fresh) == 185 and _same_samples(tasks, fresh)  # same seed -> the same numbers, from scratch
    manifests = [json.loads((full_suite_dir(d, N, 0, sources, SIDE) / "manifest.json").read_text())
                 for d in (data_dir, tmp_path / "fresh")]
    assert manifests[0]["records"] == manifests[1]["records"]
    src = resolve_sources(sources)
    first = fetch_records(src["imagenet"], 4, seed=0, max_image_side=SIDE)
    assert [r.index for r in first] == [r.index for r in fetch_records(src["imagenet"], 4, 0, SIDE)]
    assert [r.index for r in first] != [r.index for r in fetch_records(src["imagenet"], 4, 5, SIDE)]
    spec, recs = SPECS[1], _records(data_dir, sources, "imagenet")  # noisy image -> regular image
    a, b, c = (task_samples(spec, 1, recs, s) for s in (0, 0, 1))
    assert np.array_equal(a[0][0][0], b[0][0][0]) and not np.array_equal(a[0][0][0], c[0][0][0])
    # a different sample count or seed is a different build, never a stale reuse
    assert full_suite_dir(data_dir, N + 1, 0, sources, SIDE) != full_suite_dir(data_dir, N, 0, sources, SIDE)
    assert full_suite_dir(data_dir, N, 1, sources, SIDE) != full_suite_dir(data_dir, N, 0, sources, SIDE)
    with pytest.raises(FileNotFoundError, match="not built yet.*Machine\\s+Translation"):
        build_full_suite(tmp_path / "empty", N, 0, None, sources=sources, max_image_side=SIDE)


def test_a_stale_build_is_refused(built, sources, tmp_path):
    data_dir, _ = built
    root = full_suite_dir(data_dir, N, 0, sources, SIDE)
    copy = tmp_path / "copy"
    shutil.copytree(root / "tasks" / "task-000", copy / "tasks" / "task-000")
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["tasks"][3]["description"] = "Given an old task, how to do it step by step?"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="stale: task 3 is 'Given an old task"):
        load_full_suite(copy)


def test_streaming_sources_are_seeded_too(sources):
    assert all(s.streams for s in DEFAULT_SOURCES.values())  # hub ids: never download whole repositories
    assert not any(s.streams for s in resolve_sources(sources).values())  # local copies: read whole
    src = resolve_sources({**sources, "textvqa": {**sources["textvqa"], "streaming": True, "shuffle_buffer": 8}})
    a = fetch_records(src["textvqa"], 3, 0, SIDE)
    b = fetch_records(src["textvqa"], 3, 0, SIDE)
    assert [r.index for r in a] == [r.index for r in b] and all(r.image is not None and r.query for r in a)


# ---------------------------------------------------------------------- plans through the env

PLANS = [  # (task picked by its reference plan's shape, plan text or None for the reference plan)
    ("Given noisy blurry image, how to return the regular image step by step?", None),
    ("Given noisy blurry image, how to return the regular image step by step?", "Image Deblurring, Image Denoising"),
    ("Given low-resolutioned image, how to return the class label in German step by step?", None),
    ("Given clozed English text, how to return the sentiment in English step by step?", None),
    ("Given noisy image and clozed English query, how to answer the question in German step by step?", None),
    ("Given clozed English document and clozed English query, how to answer the question in English step by step?",
     None),
    ("Given English document and clozed English query, how to answer the question in English step by step?",
     "() (Fill Mask) Question Answering"),
]


def test_linear_and_nonlinear_plans_score_through_the_environment(built, registry, backend):
    _, tasks = built
    metrics = backend.metric_models.batch_metrics()  # the env's own metric table: nothing process-global changes
    env = OpenAGIEnv(suite="full", registry=registry, tasks=tasks, split="all", metrics=metrics)
    plans = list(PLANS)
    if HAS_DIFFUSERS:
        plans.append(("Given clozed English text, how to generate a image step by step?", None))
    for description, text in plans:
        task = env.get_task(description)
        plan = text or str(task.reference_plan)
        env.reset(options={"task": task.id})
        _, reward, terminated, _, info = env.step(plan)
        assert terminated and info["valid"], (description, info["error"])
        assert info["sample_errors"] == [None] * N, info["sample_errors"]
        assert len(info["scores"]) == N and all(0.0 <= s <= 1.0 for s in info["scores"])
        assert reward == pytest.approx(float(np.mean(info["scores"])))
    invalid = env.reward_plans([(0, "Image Classification")])[0]
    assert not invalid.valid and invalid.reward == 0.0
    # the env's metrics are the paper's: identical images score 1 under the ViT cosine
    target = tasks[0].samples[0].target
    assert compute_metric("vit", [target], [target], metrics) == pytest.approx([1.0], abs=1e-5)
    assert compute_metric("bertscore", ["a good dog"], ["a good dog"], metrics) == pytest.approx([1.0], abs=1e-5)
    with pytest.raises(ValueError, match="unknown metric 'vit'"):  # not in the shared offline table
        compute_metric("vit", [target], [target])


# --------------------------------------------------------------------------- errors, sources


def test_source_overrides_are_checked_by_name():
    with pytest.raises(ValueError, match=r"unknown data source\(s\) \['imagenet1k'\]"):
        resolve_sources({"imagenet1k": "x"})
    with pytest.raises(ValueError, match=r"'squad': unknown setting\(s\) \['splits'\]"):
        resolve_sources({"squad": {"splits": "train"}})
    with pytest.raises(ValueError, match=r"unknown column role\(s\) \['picture'\]"):
        resolve_sources({"textvqa": {"columns": {"picture": "img"}}})
    src = resolve_sources({"cnn_dailymail": "/data/cnn", "imagenet": {"columns": {"image": "jpg"}}})
    assert src["cnn_dailymail"].path == "/data/cnn" and src["cnn_dailymail"].config == "3.0.0"
    assert dict(src["imagenet"].columns) == {"image": "jpg", "label": "label"}


def test_a_wrong_column_names_what_the_split_has(sources):
    src = resolve_sources({**sources, "sst2": {**sources["sst2"], "columns": {"sentence": "text"}}})
    with pytest.raises(ValueError, match=r"column 'text' \(for 'sentence'\) not found; the split has: idx, "
                                         r"sentence, label.*env\.datasets\.sst2\.columns\.sentence"):
        fetch_records(src["sst2"], 2, 0)
    with pytest.raises(ValueError, match=r"has splits \['validation'\], not 'train'"):
        fetch_records(resolve_sources({**sources, "sst2": {**sources["sst2"], "split": "train"}})["sst2"], 2, 0)


def test_gated_offline_and_script_errors_say_what_to_do():
    imagenet = DEFAULT_SOURCES["imagenet"]
    gated = hub_error(imagenet, hfd.exceptions.DatasetNotFoundError(
        "Dataset 'ILSVRC/imagenet-1k' is a gated dataset on the Hub. You must be authenticated to access it."))
    assert isinstance(gated, DatasetAccessError)
    for words in ("gated", "accept its terms", "hf auth login", "HF_TOKEN",
                  "https://huggingface.co/datasets/ILSVRC/imagenet-1k"):
        assert words in str(gated)
    # the real call, offline (HF_HUB_OFFLINE=1): fails at once, saying how to get the data
    with pytest.raises(DatasetAccessError, match=r"(?s)offline.*local copy.*gated.*HF_TOKEN"):
        fetch_records(imagenet, 2, 0)
    script = hub_error(DEFAULT_SOURCES["squad"], RuntimeError(
        "Dataset scripts are no longer supported, but found squad.py"))
    assert isinstance(script, DatasetAccessError) and "revision=refs/convert/parquet" in str(script)


def test_images_are_shrunk_to_even_sizes_and_german_needs_one_output_per_text():
    img = prepare_image(Image.new("RGB", (301, 157), (10, 200, 30)), 100)
    assert img.dtype == np.uint8 and img.shape == (52, 100, 3) and tuple(img[0, 0]) == (10, 200, 30)
    assert prepare_image(np.zeros((7, 9, 3), np.uint8), 100).shape == (6, 8, 3)  # never enlarged
    with pytest.raises(ValueError, match="returned 1 outputs for 2 texts"):
        add_german({"sst2": fetch_like(["good", "bad"])}, lambda texts: ["gut"])


def fetch_like(targets):
    from envs.openagi.hf.records import Record

    return [Record("sst2", i, t, text=t) for i, t in enumerate(targets)]


# ------------------------------------------------------------------------ GPU configs, dry run

GPU_CONFIGS = ("openagi-flan-t5-large", "openagi-llama-lora")


@pytest.mark.parametrize("name", GPU_CONFIGS)
def test_gpu_configs_load_set_their_keys_and_dry_run_lists_everything(name):
    path = CONFIG_DIR / f"{name}.yaml"
    cfg = load_config([f"config={path}"])
    raw = yaml.safe_load(path.read_text())

    def check(section: dict, obj, prefix=""):
        for key, value in section.items():
            got = obj[key] if isinstance(obj, dict) else getattr(obj, key)
            if isinstance(value, dict) and value and not isinstance(got, dict):
                check(value, got, f"{prefix}{key}.")
            else:
                assert got == value, f"{prefix}{key}"

    check(raw, cfg)
    assert (cfg.env.suite, cfg.env.backend) == ("full", "hf") and "oracle" not in cfg.eval.schemas
    text = describe_run(cfg)  # offline, default hub ids: anything it tried to load would raise
    assert "185 tasks: 117 linear, 68 nonlinear" in text and "train 20, validation 19, test 20" in text
    assert cfg.planner.model in text and "nothing was loaded" in text
    hf = HFBackendConfig.from_dict(cfg.env.hf)
    for tool in hf_tiny.TOOL_BUILDERS:
        assert f"{tool}" in text and hf.expert(tool).model_id in text
    for metric in ("bertscore", "vit", "clip"):
        assert hf.metric_model(metric).model_id in text
    for src in resolve_sources(cfg.env.datasets).values():
        assert src.path in text
    assert "vit 15 tasks" in text and "clip 2 tasks" in text and "bertscore 168 tasks" in text


def test_dry_run_loads_nothing_even_for_models_that_do_not_exist():
    cfg = load_config([f"config={CONFIG_DIR / 'openagi-llama-lora.yaml'}",
                       "env.hf={model_ids: {Fill Mask: nobody/no-such-model}}",
                       "planner.model=nobody/no-such-planner", "eval.schemas=[rltf,oracle]"])
    text = describe_run(cfg)
    assert "nobody/no-such-model" in text and "nobody/no-such-planner" in text
    assert "warning: eval.schemas includes 'oracle'" in text


def test_dry_run_rejects_what_cannot_run(tmp_path):
    # output_dir: the working directory's checkpoints/default may hold the Quickstart's finished run
    out = f"output_dir={tmp_path}"
    with pytest.raises(ConfigError, match=r"'env.hf'.*unknown hf backend setting\(s\) \['devices'\]"):
        describe_run(load_config(["env.suite=full", "env.backend=hf", "env.hf={devices: cuda}", out]))
    with pytest.raises(ConfigError, match=r"'env.datasets'.*unknown data source\(s\) \['coco'\]"):
        describe_run(load_config(["env.suite=full", "env.backend=hf", "env.datasets={coco: x}", out]))
    with pytest.raises(ConfigError, match="'env.suite' is 'full' but 'env.backend' is 'lite'"):
        describe_run(load_config(["env.suite=full", out]))
    assert "38 tasks" in describe_run(load_config([out]))  # the offline default describes itself too
