"""The full OpenAGI suite (185 tasks: 117 linear, 68 nonlinear) on hub data, built once, reloaded.

Task ids, descriptions, degradations and reference plans come from the grammar
(:func:`envs.openagi.suite.task_specs`); samples come from the hub sources of
:mod:`envs.openagi.hf.records`, ``n_samples`` clean records per source (seeded), shared by all the
tasks on that source and degraded per task with the lite suite's augmentations: images by
:func:`envs.openagi.task_data.images.degrade_image` (blur, a real x2 downsampling, noise,
grayscale), text by :func:`envs.openagi.task_data.texts.cloze` (one word masked). German targets
are the English ones translated by the backend's Machine Translation expert, as in the paper.

Metrics follow the paper: ViT score for image outputs, CLIP score (generated image vs. the
caption) for text -> image, BERTScore F1 for every text output; the env scores those names with
its hf backend's models (``OpenAGIEnv(metrics=backend.metric_models.batch_metrics())``, as
``envs.make`` builds it): no process-global metric table is rewritten.

Built once into ``<data_dir>/<key>/`` (``key`` from ``n_samples``, the seed, the image size and
the sources): Arrow datasets written by ``save_to_disk``, one per task (``tasks/task-XXX``) plus
the clean records per source (``records/<source>``, with their German targets) and a
``manifest.json``. Images are stored as lossless 8-bit PNG. Later calls read it with
``load_from_disk``; samples are decoded on access (a small shared LRU keeps recent ones), so a
suite of 18,500 samples does not sit in memory as float arrays.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import warnings
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from common.atomic import atomic_dir
from envs.openagi.hf.models import BERTSCORE, CLIP_SCORE, VIT_SCORE
from envs.openagi.hf.records import Record, add_german, fetch_records, save_records
from envs.openagi.hf.sources import DataSource, needed_sources, resolve_sources
from envs.openagi.registry import IMAGE, TEXT, ToolRegistry
from envs.openagi.split import load_split
from envs.openagi.suite import CLOZED, TaskSpec, task_specs
from envs.openagi.task_data.images import degrade_image
from envs.openagi.task_data.texts import cloze
from envs.openagi.tasks import Sample, Task

log = logging.getLogger(__name__)

FORMAT = 1
MANIFEST = "manifest.json"
DEFAULT_MAX_IMAGE_SIDE = 256

# The paper's metric per output kind (every other kind is text: BERTScore F1).
FULL_METRICS: Mapping[str, str] = {"image": VIT_SCORE, "generated_image": CLIP_SCORE}


def metric_for(spec: TaskSpec) -> str:
    return FULL_METRICS.get(spec.output_kind, BERTSCORE)


def source_for(spec: TaskSpec) -> str:
    """The raw dataset a task's samples come from."""
    kind = spec.output_kind
    if kind in ("image", "class_label"):
        return "imagenet"
    if kind in ("caption", "generated_image", "translation"):
        return "coco_captions"
    if kind == "object_names":
        return "coco_instances"
    if kind == "summary":
        return "cnn_dailymail"
    if kind == "sentiment":
        return "sst2"
    if kind == "answer":
        return "textvqa" if spec.inputs[0] == IMAGE else "squad"
    raise ValueError(f"no data source for output kind {kind!r} ({spec.description!r})")


# ------------------------------------------------------------------------------------ samples


def _to_float(img: np.ndarray) -> np.ndarray:
    return img.astype(np.float32) / 255.0


def _to_uint8(img: np.ndarray) -> np.ndarray:
    return (np.clip(img, 0.0, 1.0) * 255.0).round().astype(np.uint8)


def task_rng(seed: int, task_id: int) -> np.random.Generator:
    """The RNG of one task's degradations (noise, masked words): fixed by seed and task id."""
    return np.random.default_rng(np.random.SeedSequence([seed, 1, task_id]))


def task_samples(spec: TaskSpec, task_id: int, records: Sequence[Record], seed: int) -> list[tuple[tuple, Any]]:
    """(inputs, target) for each record: the task's degradations applied, the target in the
    task's language. Images come back float32 in [0, 1]."""
    rng = task_rng(seed, task_id)
    degr = spec.degradations

    def text(value: str | None, d: tuple[str, ...], what: str) -> str:
        if value is None:
            raise ValueError(f"task {task_id}: its {source_for(spec)} records have no {what}")
        return cloze(value, rng) if CLOZED in d else value

    def image(rec: Record, d: tuple[str, ...]) -> np.ndarray:
        if rec.image is None:
            raise ValueError(f"task {task_id}: its {source_for(spec)} records have no image")
        return degrade_image(_to_float(rec.image), d, rng)

    out = []
    for rec in records:
        if spec.output_kind == "image":
            out.append(((image(rec, degr[0]),), _to_float(rec.image)))
            continue
        if spec.inputs == (IMAGE,):
            inputs: tuple = (image(rec, degr[0]),)
        elif spec.inputs == (TEXT,):
            inputs = (text(rec.text, degr[0], "text"),)
        elif spec.inputs == (IMAGE, TEXT):
            inputs = (image(rec, degr[0]), text(rec.query, degr[1], "query"))
        elif spec.inputs == (TEXT, TEXT):
            inputs = (text(rec.text, degr[0], "document"), text(rec.query, degr[1], "query"))
        else:
            raise ValueError(f"task {task_id}: unsupported inputs {spec.inputs}")
        if spec.output_kind == "generated_image":
            target = rec.target  # CLIP scores the generated image against the clean caption
        elif spec.language == "de":
            if rec.target_de is None:
                raise ValueError(f"task {task_id}: German target missing; records need add_german first")
            target = rec.target_de
        else:
            target = rec.target
        out.append((inputs, target))
    return out


_DECODED: OrderedDict[tuple[str, int], Sample] = OrderedDict()
DECODED_CACHE_ITEMS = 512  # decoded samples kept across all tasks (~0.6 MB each at 256 px)


class DiskSamples(Sequence[Sample]):
    """A task's samples read from its Arrow dataset, decoded (PNG -> float32) on access."""

    def __init__(self, path: str | os.PathLike):
        import datasets  # heavy: datasets (~0.4 s), only when hub data is read

        self.path = str(path)
        self._ds = datasets.load_from_disk(self.path)
        self._inputs = sorted(c for c in self._ds.column_names if c.startswith("input_"))

    def __len__(self) -> int:
        return self._ds.num_rows

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = int(index)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"sample {index} of a task with {len(self)} samples")
        key = (self.path, i)
        hit = _DECODED.get(key)
        if hit is not None:
            _DECODED.move_to_end(key)
            return hit
        row = self._ds[i]
        sample = Sample(row["uid"], tuple(_decode(row[c]) for c in self._inputs), _decode(row["target"]))
        _DECODED[key] = sample
        while len(_DECODED) > DECODED_CACHE_ITEMS:
            _DECODED.popitem(last=False)
        return sample

    def __iter__(self) -> Iterator[Sample]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"DiskSamples({self.path!r}, n={len(self)})"


def _decode(value: Any) -> Any:
    if isinstance(value, str):
        return value
    img = _to_float(np.asarray(value.convert("RGB"), dtype=np.uint8))
    img.setflags(write=False)  # shared through the decode cache: experts must not write in place
    return img


def _encode(value: Any, modality: str) -> Any:
    return Image.fromarray(_to_uint8(value)) if modality == IMAGE else value


def save_task(path: Path, spec: TaskSpec, uids: Sequence[str], pairs: Sequence[tuple[tuple, Any]]) -> None:
    import datasets  # heavy: datasets (~0.4 s), only when hub data is read

    feats: dict[str, Any] = {"uid": datasets.Value("string")}
    cols: dict[str, list] = {"uid": list(uids)}
    for k, modality in enumerate(spec.inputs):
        feats[f"input_{k}"] = datasets.Image() if modality == IMAGE else datasets.Value("string")
        cols[f"input_{k}"] = [_encode(x[k], modality) for x, _ in pairs]
    target_modality = IMAGE if spec.output_kind == "image" else TEXT
    feats["target"] = datasets.Image() if target_modality == IMAGE else datasets.Value("string")
    cols["target"] = [_encode(y, target_modality) for _, y in pairs]
    datasets.Dataset.from_dict(cols, features=datasets.Features(feats)).save_to_disk(str(path))


# ------------------------------------------------------------------------------- build / load


def build_key(n_samples: int, seed: int, sources: Mapping[str, DataSource], max_image_side: int) -> str:
    """The build folder's name: readable settings plus a hash of everything the data depends on."""
    spec = {"format": FORMAT, "n_samples": n_samples, "seed": seed, "max_image_side": max_image_side,
            "sources": {k: sources[k].to_dict() for k in sorted(sources)}}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    return f"full-n{n_samples}-s{seed}-{digest}"


def full_suite_dir(data_dir: str | os.PathLike, n_samples: int = 100, seed: int = 0,
                   sources: Mapping[str, Any] | None = None, max_image_side: int = DEFAULT_MAX_IMAGE_SIDE) -> Path:
    """Where :func:`build_full_suite` keeps (or would keep) this suite."""
    return Path(data_dir).expanduser() / build_key(n_samples, seed, resolve_sources(sources), max_image_side)


def build_full_suite(
    data_dir: str | os.PathLike,
    n_samples: int = 100,
    seed: int = 0,
    registry: ToolRegistry | None = None,
    *,
    sources: Mapping[str, Any] | None = None,
    max_image_side: int = DEFAULT_MAX_IMAGE_SIDE,
    rebuild: bool = False,
) -> tuple[Task, ...]:
    """The 185 tasks with ``n_samples`` samples each, from disk, building them first if needed.

    Building reads the hub sources (``sources`` overrides :data:`~envs.openagi.hf.sources.DEFAULT_SOURCES`)
    and needs ``registry`` (the hf backend's) for the Machine Translation expert that writes
    the German targets; loading needs neither. The build goes to a temporary folder renamed
    into place at the end, so an interrupted build leaves nothing half-written behind and
    concurrent builders (several processes) end with one complete copy.
    """
    if not isinstance(n_samples, int) or n_samples < 1:
        raise ValueError(f"n_samples={n_samples!r}; expected an int >= 1")
    resolved = resolve_sources(sources)
    root = Path(data_dir).expanduser() / build_key(n_samples, seed, resolved, max_image_side)
    if rebuild and root.exists():
        shutil.rmtree(root)
        _DECODED.clear()  # decoded samples of the old copy must not outlive it
    if (root / MANIFEST).is_file():
        try:
            return load_full_suite(root)
        except Exception as exc:  # a damaged or stale copy: rebuild it when we can, else say which
            if registry is None:
                raise ValueError(f"the built full suite at {root} is damaged or stale ({type(exc).__name__}: "
                                 f"{exc}); delete {root} or pass the hf backend's registry to rebuild it") from exc
            warnings.warn(f"the built full suite at {root} is damaged or stale ({type(exc).__name__}: {exc}); "
                          "rebuilding it", RuntimeWarning, stacklevel=2)
            shutil.rmtree(root)
            _DECODED.clear()
    if registry is None:
        raise FileNotFoundError(
            f"the full suite is not built yet at {root}; pass the hf backend's registry (its Machine "
            "Translation expert writes the German targets) to build it once from the hub datasets")
    translate = registry["Machine Translation"]
    specs = task_specs("full")
    names = needed_sources(source_for(s) for s in specs)
    records: dict[str, list[Record]] = {}
    for name in names:
        log.info("fetching %d records of %s (%s)", n_samples, name, resolved[name].describe())
        records[name] = fetch_records(resolved[name], n_samples, seed, max_image_side)
    log.info("translating targets to German with %s", getattr(translate.fn, "__doc__", "") or "Machine Translation")
    records = add_german(records, lambda texts: translate(texts))

    with _quiet_datasets(), atomic_dir(root, complete_marker=MANIFEST) as tmp:
        _write_build(tmp, root, specs, names, records, resolved, translate, n_samples, seed, max_image_side)
    return load_full_suite(root)


@contextlib.contextmanager
def _quiet_datasets() -> Iterator[None]:
    """No "Saving the dataset" progress bar for each of the ~190 small writes of a build."""
    from datasets.utils import logging as dlog  # heavy: datasets (~0.4 s), only when hub data is read

    was = dlog.is_progress_bar_enabled()
    dlog.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            dlog.enable_progress_bar()


def _write_build(tmp: Path, root: Path, specs, names, records, resolved, translate, n_samples: int, seed: int,
                 max_image_side: int) -> None:
    """Write every part into ``tmp``, which then becomes ``root`` (see :func:`build_full_suite`)."""
    for name in names:
        save_records(records[name], tmp / "records" / name)
    entries = []
    key = root.name
    for i, spec in enumerate(specs):
        name = f"task-{i:03d}"
        pairs = task_samples(spec, i, records[source_for(spec)], seed)
        save_task(tmp / "tasks" / name, spec, [f"{key}/{name}/{j}" for j in range(len(pairs))], pairs)
        entries.append({"id": i, "description": spec.description, "metric": metric_for(spec),
                        "source": source_for(spec), "n_samples": len(pairs)})
    manifest = {
        "format": FORMAT, "suite": "full", "key": key, "n_samples": n_samples, "seed": seed,
        "max_image_side": max_image_side, "sources": {n: resolved[n].to_dict() for n in names},
        "translator": (getattr(translate.fn, "__doc__", None) or "Machine Translation").strip(),
        "records": {n: [r.index for r in records[n]] for n in names},
        "tasks": entries,
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


def load_full_suite(path: str | os.PathLike) -> tuple[Task, ...]:
    """The tasks of a built suite folder (see :func:`build_full_suite`); checks it is current."""
    root = Path(path).expanduser()
    manifest_file = root / MANIFEST
    if not manifest_file.is_file():
        raise FileNotFoundError(f"{root} is not a built full suite (no {MANIFEST}); build it with build_full_suite")
    manifest = json.loads(manifest_file.read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{manifest_file}: format {manifest.get('format')!r}, this rltf reads {FORMAT}; "
                         "rebuild it (build_full_suite(..., rebuild=True))")
    specs = task_specs("full")
    entries = manifest["tasks"]
    if len(entries) != len(specs):
        raise ValueError(f"{manifest_file} holds {len(entries)} tasks, the suite has {len(specs)}; rebuild it")
    for entry, (i, spec) in zip(entries, enumerate(specs)):
        if entry["id"] != i or entry["description"] != spec.description:
            raise ValueError(f"{manifest_file} is stale: task {i} is {entry['description']!r} there but "
                             f"{spec.description!r} in the suite; rebuild it (build_full_suite(..., rebuild=True))")
    tasks = []
    for i, spec in enumerate(specs):
        task = Task(id=i, description=spec.description, inputs=spec.inputs, target=spec.target,
                    metric=metric_for(spec), family=spec.family, degradations=spec.degradations,
                    reference_plan=spec.reference_plan)
        task.samples = DiskSamples(root / "tasks" / f"task-{i:03d}")  # type: ignore[assignment]
        tasks.append(task)
    return tuple(tasks)


def split_tasks(tasks: Sequence[Task], suite: str = "full") -> dict[str, list[Task]]:
    """The persisted split (``envs/openagi/splits/<suite>.json``) applied to ``tasks``."""
    by_id = {t.id: t for t in tasks}
    return {part: [by_id[i] for i in ids] for part, ids in load_split(suite).items()}
