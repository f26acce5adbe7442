"""Where the full suite's raw data comes from: hub datasets (or local copies), and opening them.

OpenAGI's sources (``shared/reference/openagi.md``): ImageNet-1k validation (restoration, class
labels), COCO val2017 captions (captions, text -> image, translation) and instances (object
names), CNN/DailyMail test (summaries), SST-2 validation (sentiment), TextVQA validation (VQA),
SQuAD validation (QA). Each source is a :class:`DataSource`: a hub id or a local directory
(``save_to_disk`` output, or any folder ``datasets.load_dataset`` reads), a config, a split, a
revision, and the columns that hold each field; all of it is overridable (``env.datasets`` in a
run config). :mod:`envs.openagi.hf.records` reads a source into clean records.

Defaults are Parquet repositories that ``datasets`` >= 4 loads without dataset scripts:

========================  ===============================  ==========  ==============================
source                    hub id (config)                  split       columns used
========================  ===============================  ==========  ==============================
``imagenet`` (gated)      ``ILSVRC/imagenet-1k``           validation  image, label (ClassLabel)
``coco_captions``         ``lmms-lab/COCO-Caption2017``    val         image, answer (5 captions)
``coco_instances``        ``detection-datasets/coco``      val         image, objects.category/.area
``cnn_dailymail``         ``abisee/cnn_dailymail`` (3.0.0) test        article, highlights
``sst2``                  ``stanfordnlp/sst2``             validation  sentence, label (ClassLabel)
``textvqa``               ``lmms-lab/textvqa``             validation  image, question, answers
``squad``                 ``rajpurkar/squad``              validation  context, question, answers.text
========================  ===============================  ==========  ==============================

Hub sources are streamed by default: only the rows read are fetched (about ``shuffle_buffer``
rows per source: ~1.3 GB of ImageNet), where a non-streaming ``load_dataset`` would download
and prepare every split of the repository. Local copies are read whole, rows drawn exactly.

ImageNet is gated: accept its terms on the hub page while logged in, then authenticate
(``hf auth login`` or ``HF_TOKEN``); anything else fails with :class:`DatasetAccessError`
saying so. Should a repository still ship a loading script (unsupported since ``datasets`` 4),
``revision: refs/convert/parquet`` reads the hub's Parquet export instead.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from common.errors import UserError

# The role -> column map each source kind needs ("a.b" reads field b of column a).
ROLES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "imagenet": ("image", "label"),
    "coco_captions": ("image", "captions"),
    "coco_instances": ("image", "labels", "areas"),
    "cnn_dailymail": ("article", "summary"),
    "sst2": ("sentence", "label"),
    "textvqa": ("image", "question", "answers"),
    "squad": ("context", "question", "answers"),
})
OPTIONAL_ROLES = frozenset({("coco_instances", "areas")})
SOURCE_NAMES: tuple[str, ...] = tuple(ROLES)


@dataclass(frozen=True)
class DataSource:
    """Where one raw dataset comes from and which columns hold what.

    ``path``: a hub dataset id, or a local directory (``save_to_disk`` output is read with
    ``load_from_disk``; any other folder with ``load_dataset``). ``streaming``: ``None`` (auto)
    streams hub ids and reads local copies whole. A stream reads only the rows it needs (through a
    seeded shuffle buffer of ``shuffle_buffer`` rows, reproducible for the same files and seed);
    ``streaming: false`` on a hub id downloads and prepares EVERY split of the repository
    (``datasets`` does, whatever ``split`` asks for), e.g. ImageNet's 140 GB train split.
    """

    name: str
    path: str
    split: str
    config: str | None = None
    revision: str | None = None
    streaming: bool | None = None
    shuffle_buffer: int = 10_000
    columns: Mapping[str, str] = field(default_factory=dict)
    gated: bool = False

    def __post_init__(self) -> None:
        if self.name not in ROLES:
            raise ValueError(f"unknown data source {self.name!r}; expected one of: {', '.join(SOURCE_NAMES)}")
        for what, value in (("path", self.path), ("split", self.split)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"data source {self.name!r}: {what}={value!r}; expected a non-empty string")
        unknown = sorted(set(self.columns) - set(ROLES[self.name]))
        if unknown:
            raise ValueError(f"data source {self.name!r}: unknown column role(s) {unknown}; "
                             f"expected some of: {', '.join(ROLES[self.name])}")
        if not isinstance(self.shuffle_buffer, int) or self.shuffle_buffer < 1:
            raise ValueError(f"data source {self.name!r}: shuffle_buffer={self.shuffle_buffer!r}; expected an int >= 1")
        object.__setattr__(self, "columns", MappingProxyType(dict(self.columns)))

    def column(self, role: str) -> str:
        return self.columns[role]

    @property
    def is_local(self) -> bool:
        return Path(self.path).expanduser().exists()

    @property
    def streams(self) -> bool:
        """Whether rows are read as a stream (auto: hub ids stream, local copies do not)."""
        return (not self.is_local) if self.streaming is None else bool(self.streaming)

    def describe(self) -> str:
        where = self.path + (f" ({self.config})" if self.config else "")
        extra = [f"split {self.split}"]
        if self.revision:
            extra.append(f"revision {self.revision}")
        if self.streams:
            extra.append(f"streamed through a {self.shuffle_buffer}-row shuffle buffer")
        if self.gated:
            extra.append("gated: accept the terms on the hub, then hf auth login or HF_TOKEN")
        return f"{where}, {', '.join(extra)}"

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["columns"] = dict(self.columns)
        return d


DEFAULT_SOURCES: Mapping[str, DataSource] = MappingProxyType({
    s.name: s
    for s in (
        DataSource("imagenet", "ILSVRC/imagenet-1k", "validation", columns={"image": "image", "label": "label"},
                   gated=True),
        DataSource("coco_captions", "lmms-lab/COCO-Caption2017", "val",
                   columns={"image": "image", "captions": "answer"}),
        DataSource("coco_instances", "detection-datasets/coco", "val",
                   columns={"image": "image", "labels": "objects.category", "areas": "objects.area"}),
        DataSource("cnn_dailymail", "abisee/cnn_dailymail", "test", config="3.0.0",
                   columns={"article": "article", "summary": "highlights"}),
        DataSource("sst2", "stanfordnlp/sst2", "validation", columns={"sentence": "sentence", "label": "label"}),
        DataSource("textvqa", "lmms-lab/textvqa", "validation",
                   columns={"image": "image", "question": "question", "answers": "answers"}),
        DataSource("squad", "rajpurkar/squad", "validation",
                   columns={"context": "context", "question": "question", "answers": "answers.text"}),
    )
})
_SOURCE_KEYS = {f.name for f in dataclasses.fields(DataSource)} - {"name"}


def resolve_sources(overrides: Mapping[str, Any] | None = None) -> dict[str, DataSource]:
    """The seven sources with ``overrides`` applied: ``{name: path}`` or ``{name: {key: value}}``.

    Column overrides merge into the defaults (``{"imagenet": {"columns": {"image": "img"}}}``).
    """
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(DEFAULT_SOURCES))
    if unknown:
        raise ValueError(f"unknown data source(s) {unknown}; expected some of: {', '.join(SOURCE_NAMES)}")
    out = {}
    for name, base in DEFAULT_SOURCES.items():
        o = overrides.get(name)
        if o is None:
            out[name] = base
            continue
        if isinstance(o, str):
            o = {"path": o}
        if not isinstance(o, Mapping):
            raise ValueError(f"data source {name!r}: override {o!r}; expected a path or a mapping of "
                             f"{', '.join(sorted(_SOURCE_KEYS))}")
        bad = sorted(set(o) - _SOURCE_KEYS)
        if bad:
            raise ValueError(f"data source {name!r}: unknown setting(s) {bad}; expected some of: "
                             f"{', '.join(sorted(_SOURCE_KEYS))}")
        o = dict(o)
        if "columns" in o:
            o["columns"] = {**base.columns, **dict(o["columns"] or {})}
        out[name] = dataclasses.replace(base, **o)
    return out


def needed_sources(kinds: Iterable[str]) -> list[str]:
    """Sources in canonical order, restricted to ``kinds``."""
    kinds = set(kinds)
    return [n for n in SOURCE_NAMES if n in kinds]


def source_seed(seed: int, name: str) -> np.random.SeedSequence:
    """The RNG stream that picks a source's rows: fixed by the run's data seed and the source."""
    return np.random.SeedSequence([seed, SOURCE_NAMES.index(name)])


# ----------------------------------------------------------------------------- opening a source


class DatasetAccessError(UserError, RuntimeError):
    """A source that cannot be read: gated, offline, missing, or a script-only repository."""


def _is_local_saved(path: Path) -> bool:
    return path.is_dir() and ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file())


def open_source(source: DataSource):
    """The source's split as a ``datasets.Dataset`` (or ``IterableDataset`` when streaming)."""
    import datasets  # heavy: datasets (~0.4 s), only when hub data is read

    local = Path(source.path).expanduser()
    if _is_local_saved(local):
        ds = datasets.load_from_disk(str(local))
        if isinstance(ds, datasets.DatasetDict):
            if source.split not in ds:
                raise ValueError(f"data source {source.name!r}: {str(local)!r} has splits {sorted(ds)}, "
                                 f"not {source.split!r}")
            ds = ds[source.split]
        return ds.to_iterable_dataset() if source.streams else ds
    try:
        return datasets.load_dataset(source.path, source.config, split=source.split, revision=source.revision,
                                     streaming=source.streams)
    except Exception as exc:  # noqa: BLE001 - translated below, original chained
        raise_hub_error(source, exc)


def raise_hub_error(source: DataSource, exc: BaseException):
    """Raise :func:`hub_error`'s translation of ``exc`` (``exc`` itself when it has none)."""
    err = hub_error(source, exc)
    if err is exc:
        raise exc
    raise err from exc


def hub_error(source: DataSource, exc: BaseException) -> BaseException:
    """A clear error for a failed hub load: how to authenticate, go online, or pick a revision."""
    text = " ".join(str(exc).split())
    chain, e = [], exc
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    names = {type(c).__name__ for c in chain}
    page = f"https://huggingface.co/datasets/{source.path}"
    where = f"data source {source.name!r} ({source.path!r}, split {source.split!r})"
    if "GatedRepoError" in names or "gated" in text.lower() or (
        source.gated and ({"DatasetNotFoundError", "RepositoryNotFoundError"} & names)
    ):
        return DatasetAccessError(
            f"{where} is a gated dataset: open {page} while logged in and accept its terms, then "
            "authenticate this machine with `hf auth login`, or set "
            f"HF_TOKEN to a read token of that account. ({type(exc).__name__}: {text})")
    offline_env = any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on")
                      for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    unreachable = {"OfflineModeIsEnabled", "ConnectionError", "ConnectError", "ConnectTimeout"} & names
    missing = {"FileNotFoundError", "DatasetNotFoundError", "LocalEntryNotFoundError"} & names
    if unreachable or (offline_env and missing):
        return DatasetAccessError(
            f"{where} could not be fetched from the hub and is not in the local datasets cache "
            "(offline: HF_HUB_OFFLINE / HF_DATASETS_OFFLINE set, or no network). Go online once to "
            f"build the suite, or point env.datasets.{source.name}.path at a local copy."
            + (f" It is also gated: accept its terms at {page}, then `hf auth login` or set HF_TOKEN."
               if source.gated else "")
            + f" ({type(exc).__name__}: {text})")
    if "Dataset scripts are no longer supported" in text:
        return DatasetAccessError(
            f"{where} ships a loading script, which datasets>=4 does not run: set "
            f"env.datasets.{source.name}.revision=refs/convert/parquet (the hub's Parquet export) or "
            f"point its path at a Parquet copy. ({text})")
    if "DatasetNotFoundError" in names or "RepositoryNotFoundError" in names:
        return DatasetAccessError(f"{where}: no such dataset on the hub, or it is private/gated for this "
                                  f"account (see {page}). ({text})")
    return exc
