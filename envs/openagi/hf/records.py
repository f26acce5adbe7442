"""The full suite's records: rows of a :class:`~envs.openagi.hf.sources.DataSource` -> clean,
normalised :class:`Record` s.

A source yields records: one clean image and/or text with its English ground truth, picked by a
seeded draw (:func:`fetch_records`), images resized to at most ``max_image_side`` pixels. German
ground truths are added afterwards by the backend's Machine Translation expert
(:func:`add_german`), as the paper did. :func:`save_records` / :func:`load_records` keep them on
disk.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from PIL import Image

from envs.openagi.hf.experts import normalise_label
from envs.openagi.hf.sources import OPTIONAL_ROLES, ROLES, DataSource, open_source, raise_hub_error, source_seed


@dataclass(frozen=True)
class Record:
    """One clean item of a source: what the tasks built on it degrade and ask about.

    ``image`` is uint8 (H, W, 3), ``target`` the English ground truth, ``target_de`` its German
    translation (added by :func:`add_german`). ``index`` is the row in the source split (the
    position in the shuffled stream when streaming).
    """

    source: str
    index: int
    target: str
    image: np.ndarray | None = field(default=None, compare=False)
    text: str | None = None
    query: str | None = None
    target_de: str | None = None


def prepare_image(image: Any, max_side: int) -> np.ndarray:
    """A PIL image (or array) as uint8 RGB, shrunk (area filter) so its longer side is at most
    ``max_side``, with even height and width so that x2 downsampling halves it exactly."""
    if max_side < 4:
        raise ValueError(f"max_image_side={max_side}; expected at least 4 pixels")
    if isinstance(image, np.ndarray):
        arr = image
        if arr.dtype != np.uint8:
            arr = (np.clip(arr, 0, 1) * 255).round().astype(np.uint8)
        image = Image.fromarray(arr)
    if not isinstance(image, Image.Image):
        raise TypeError(f"expected an image (PIL or numpy), got {type(image).__name__}")
    image = image.convert("RGB")
    w, h = image.size
    scale = min(1.0, max_side / max(w, h))
    nw, nh = max(2, int(w * scale) // 2 * 2), max(2, int(h * scale) // 2 * 2)
    if (nw, nh) != (w, h):
        image = image.resize((nw, nh), Image.Resampling.BOX if scale < 1 else Image.Resampling.BICUBIC)
    return np.asarray(image, dtype=np.uint8).copy()


def _get(row: Mapping[str, Any], dotted: str) -> Any:
    """``row["a"]["b"]``; a list of structs gives the list of their ``b``."""
    value: Any = row
    for part in dotted.split("."):
        if isinstance(value, Mapping):
            value = value[part]
        elif isinstance(value, list):
            value = [v[part] for v in value]
        else:
            raise KeyError(dotted)
    return value


def _feature(features: Any, dotted: str) -> Any:
    """The ``datasets`` feature at ``dotted``, through dicts and (Large)List / Sequence."""
    f = features
    for part in dotted.split("."):
        while hasattr(f, "feature") and not isinstance(f, Mapping):
            f = f.feature
        if not isinstance(f, Mapping) or part not in f:
            return None
        f = f[part]
    while hasattr(f, "feature") and not isinstance(f, Mapping):
        f = f.feature
    return f


def _label_name(value: Any, feature: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    names = getattr(feature, "names", None)
    if isinstance(value, (int, np.integer)) and value < 0:
        return ""  # ClassLabel's "no label" (-1), e.g. on unlabeled test splits: the row is skipped
    if isinstance(value, (int, np.integer)) and names:
        if not 0 <= int(value) < len(names):
            raise ValueError(f"{where}: label {value} outside its {len(names)} class names")
        return names[int(value)]
    raise ValueError(f"{where}: label {value!r} is an integer without class names; expected a ClassLabel "
                     "or string column")


def _clean(text: Any) -> str:
    return " ".join(str(text).split()) if text is not None else ""


def _most_common(answers: Sequence[str]) -> str:
    answers = [_clean(a) for a in answers if _clean(a)]
    if not answers:
        return ""
    counts = Counter(answers)
    best = max(counts.values())
    return next(a for a in answers if counts[a] == best)  # ties: the first given


Extractor = Callable[[Mapping[str, Any], DataSource, Any, int], "dict[str, Any] | None"]


def _imagenet(row, src, features, side):
    col = src.column("label")
    label = normalise_label(_label_name(_get(row, col), _feature(features, col), f"{src.name} column {col!r}"))
    return {"image": prepare_image(_get(row, src.column("image")), side), "target": label} if label else None


def _coco_captions(row, src, features, side):
    captions = _get(row, src.column("captions"))
    captions = [captions] if isinstance(captions, str) else list(captions or [])
    caption = next((_clean(c) for c in captions if _clean(c)), "")
    if not caption:
        return None
    return {"image": prepare_image(_get(row, src.column("image")), side), "text": caption, "target": caption}


def _coco_instances(row, src, features, side):
    col = src.column("labels")
    feat = _feature(features, col)
    labels = [_label_name(v, feat, f"{src.name} column {col!r}") for v in _get(row, col) or []]
    if not any(labels):
        return None  # an image without annotated objects asks nothing
    areas = None
    if "areas" in src.columns:
        try:
            areas = [float(a) for a in _get(row, src.column("areas"))]
        except KeyError:
            areas = None
    total: dict[str, float] = {}
    for i, name in enumerate(labels):  # biggest objects first (a detector's most confident ones)
        name = normalise_label(name)
        if not name:
            continue
        total[name] = total.get(name, 0.0) + (areas[i] if areas and i < len(areas) else 0.0)
    names = sorted(total, key=lambda n: -total[n])  # stable: ties keep first-seen order
    return {"image": prepare_image(_get(row, src.column("image")), side), "target": ", ".join(names)}


def _cnn(row, src, features, side):
    article, summary = _clean(_get(row, src.column("article"))), _clean(_get(row, src.column("summary")))
    return {"text": article, "target": summary} if article and summary else None


def _sst2(row, src, features, side):
    col = src.column("label")
    label = _label_name(_get(row, col), _feature(features, col), f"{src.name} column {col!r}").strip().lower()
    sentence = _clean(_get(row, src.column("sentence")))
    if label not in ("positive", "negative") or not sentence:
        return None
    return {"text": sentence, "target": label}


def _textvqa(row, src, features, side):
    question = _clean(_get(row, src.column("question")))
    answers = _get(row, src.column("answers"))
    answer = _most_common([answers] if isinstance(answers, str) else list(answers or []))
    if not question or not answer:
        return None
    return {"image": prepare_image(_get(row, src.column("image")), side), "query": question, "target": answer}


def _squad(row, src, features, side):
    context, question = _clean(_get(row, src.column("context"))), _clean(_get(row, src.column("question")))
    answers = _get(row, src.column("answers"))
    answers = [answers] if isinstance(answers, str) else list(answers or [])
    answer = next((_clean(a) for a in answers if _clean(a)), "")
    return {"text": context, "query": question, "target": answer} if context and question and answer else None


EXTRACTORS: Mapping[str, Extractor] = MappingProxyType({
    "imagenet": _imagenet, "coco_captions": _coco_captions, "coco_instances": _coco_instances,
    "cnn_dailymail": _cnn, "sst2": _sst2, "textvqa": _textvqa, "squad": _squad,
})


def _check_columns(ds: Any, source: DataSource) -> None:
    names = getattr(ds, "column_names", None)
    if not names:  # a stream without known features: rows are checked as they come
        return
    for role in ROLES[source.name]:
        if role not in source.columns:
            if (source.name, role) in OPTIONAL_ROLES:
                continue
            raise ValueError(f"data source {source.name!r}: no column set for {role!r}")
        top = source.column(role).split(".")[0]
        if top not in names and (source.name, role) not in OPTIONAL_ROLES:
            raise ValueError(f"data source {source.name!r} ({source.path!r}): column {top!r} (for {role!r}) "
                             f"not found; the split has: {', '.join(names)}. Set "
                             f"env.datasets.{source.name}.columns.{role} to the right column")


def _extract(row: Mapping[str, Any], source: DataSource, features: Any, side: int) -> dict[str, Any] | None:
    try:
        return EXTRACTORS[source.name](row, source, features, side)
    except KeyError as exc:
        raise ValueError(f"data source {source.name!r}: a row has no field {exc.args[0]!r}; rows have "
                         f"{sorted(row)}; set env.datasets.{source.name}.columns") from None


def fetch_records(source: DataSource, n: int, seed: int, max_image_side: int = 256,
                  max_scan: int | None = None) -> list[Record]:
    """``n`` usable records of ``source``: rows in a seeded random order, unusable rows (no
    object annotated, no answer, unlabeled) skipped. A source with fewer usable rows than ``n``
    repeats them in the same order (the tasks' degradations then still differ)."""
    import datasets  # heavy: datasets (~0.4 s), only when hub data is read

    if n < 1:
        raise ValueError(f"n_samples={n}: expected at least 1")
    ds = open_source(source)
    _check_columns(ds, source)
    features = getattr(ds, "features", None)
    rng = np.random.default_rng(source_seed(seed, source.name))
    picked: list[tuple[int, dict[str, Any]]] = []
    if isinstance(ds, datasets.IterableDataset):
        scan = max_scan or max(1000, 20 * n)
        stream = iter(ds.shuffle(seed=int(rng.integers(2**31)), buffer_size=source.shuffle_buffer))
        for pos in range(scan):
            try:  # a stream meets the hub only now: auth and network errors surface here
                row = next(stream)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 - translated, original chained
                if source.is_local:
                    raise
                raise_hub_error(source, exc)
            rec = _extract(row, source, features, max_image_side)
            if rec is not None:
                picked.append((pos, rec))
                if len(picked) == n:
                    break
    else:
        order = rng.permutation(len(ds))
        scan = len(ds) if max_scan is None else min(len(ds), max_scan)
        for i in order[:scan]:
            rec = _extract(ds[int(i)], source, features, max_image_side)
            if rec is not None:
                picked.append((int(i), rec))
                if len(picked) == n:
                    break
    if not picked:
        raise ValueError(f"data source {source.name!r} ({source.describe()}): no usable row found")
    picked = [picked[j % len(picked)] for j in range(n)]
    return [Record(source=source.name, index=i, **rec) for i, rec in picked]


def add_german(records: Mapping[str, Sequence[Record]], translate: Callable[[list[str]], list[str]],
               chunk: int = 256) -> dict[str, list[Record]]:
    """Every record with ``target_de``: the English target translated by ``translate`` (the
    Machine Translation expert, batched), each distinct string once."""
    unique = list(dict.fromkeys(r.target for recs in records.values() for r in recs))
    german: dict[str, str] = {}
    for start in range(0, len(unique), chunk):
        part = unique[start : start + chunk]
        out = list(translate(part))
        if len(out) != len(part) or not all(isinstance(t, str) for t in out):
            raise ValueError(f"the translator returned {len(out)} outputs for {len(part)} texts; expected one "
                             "string per text")
        german.update(zip(part, out))
    return {name: [dataclasses.replace(r, target_de=german[r.target]) for r in recs]
            for name, recs in records.items()}


# ------------------------------------------------------------------------------------ on disk


def save_records(records: Sequence[Record], path: str | os.PathLike) -> Path:
    """Write records as an Arrow dataset (``save_to_disk``); images as lossless PNG."""
    import datasets  # heavy: datasets (~0.4 s), only when hub data is read

    cols: dict[str, list] = {"index": [r.index for r in records], "target": [r.target for r in records],
                             "target_de": [r.target_de for r in records]}
    feats: dict[str, Any] = {"index": datasets.Value("int64"), "target": datasets.Value("string"),
                             "target_de": datasets.Value("string")}
    if any(r.image is not None for r in records):
        cols["image"] = [Image.fromarray(r.image) for r in records]
        feats["image"] = datasets.Image()
    for key in ("text", "query"):
        if any(getattr(r, key) is not None for r in records):
            cols[key] = [getattr(r, key) for r in records]
            feats[key] = datasets.Value("string")
    ds = datasets.Dataset.from_dict(cols, features=datasets.Features(feats))
    ds.save_to_disk(str(path))
    return Path(path)


def load_records(path: str | os.PathLike, source: str) -> list[Record]:
    import datasets  # heavy: datasets (~0.4 s), only when hub data is read

    ds = datasets.load_from_disk(str(path))
    out = []
    for row in ds:
        image = np.asarray(row["image"].convert("RGB"), dtype=np.uint8) if "image" in row else None
        out.append(Record(source=source, index=int(row["index"]), target=row["target"], image=image,
                          text=row.get("text"), query=row.get("query"), target_de=row["target_de"]))
    return out
