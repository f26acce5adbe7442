"""Which planner ``train/evaluate.py`` evaluates, what its rows are called and where its files go.

``planner.model`` is one of:

* a training run's folder (``checkpoints/default``: it holds ``config.yaml`` and no model): the
  planner that run reported as ``rltf``, i.e. ``rltf/checkpoint-<step>/planner`` of the step
  ``rltf.select`` picked (``rltf_selection`` in the run's ``results.json``). Rotation never deletes
  that checkpoint (the best on validation is protected, the last step's is the newest), so the
  folder stays valid for a finished run whatever ``rltf.save_total_limit`` is;
* a planner folder: ``<run>/sft`` (the fine-tuned planner), ``<run>/rltf/checkpoint-<step>/planner``,
  a LoRA adapter folder, any ``save_pretrained`` output;
* a named planner (``embedded``, ``smollm2``) or a hub id.

Its rows are named after the planner folder (or name, or id) that was evaluated:
``planner (<folder>)`` for its constrained beam search (the ``finetuned`` and ``rltf`` schemas:
they evaluate the same planner, so they make one row, ``planner`` in ``eval.json``),
``zero-shot (<folder>)`` / ``few-shot (<folder>)`` for the prompted ones; the bounds
(``reference``, the env's oracle) keep their names.

``eval.md`` / ``eval.json`` go beside a planner folder, into ``<planner folder>/eval/``; for a
named planner or a hub id into ``<output_dir>/<run_name>/``, which must not hold a training run's
outputs (:data:`rltf.run.checkpoint.RUN_ARTEFACTS`): an evaluation never writes into a training
run's folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rltf.planners.named import is_named
from rltf.run.checkpoint import MODEL_DIR, RUN_ARTEFACTS, checkpoints
from rltf.run.folders import RunFolderError
from rltf.run.tracking import read_json

PLANNER_ROW = "planner"  # the key of the evaluated planner's constrained beam search row
EVAL_DIR = "eval"  # the folder beside a planner that its evaluations are written to
RUN_RESULTS = "results.json"  # a finished training run's results (rltf_selection: the planner it reported)
_PROMPTED = {"zero": "zero-shot", "few": "few-shot"}


@dataclass(frozen=True)
class EvaluatedPlanner:
    """What ``planner.model`` named, resolved: the planner to load, where its evaluation goes and,
    for a training run's folder, the run and the selection it reported."""

    model: str  # what is loaded: planner.model itself, or the planner folder a run folder reported
    out_dir: Path  # where eval.md / eval.json go
    run: str | None = None  # the training run's folder planner.model named
    selection: dict | None = None  # that run's rltf_selection (rltf.select, step, validation score)

    def row_labels(self) -> dict[str, str]:
        """The table's names of the planner's rows (the bounds keep theirs)."""
        return {PLANNER_ROW: f"planner ({self.model})",
                **{schema: f"{label} ({self.model})" for schema, label in _PROMPTED.items()}}

    def as_dict(self) -> dict:
        return {"model": self.model, "run": self.run, "selection": self.selection}


def evaluated_planner(model: str, run_dir: Path) -> EvaluatedPlanner:
    """Resolve ``planner.model`` (see the module docstring); ``run_dir`` is ``<output_dir>/<run_name>``.
    Reads files only: a run folder that reports no planner, or a ``run_dir`` that holds a training
    run, is a :class:`~rltf.run.folders.RunFolderError` saying what to pass instead."""
    local = Path(model).expanduser()
    if model != "embedded" and not is_named(model) and local.is_dir():
        if is_training_run(local):
            planner, selection = reported_planner(local)
            return EvaluatedPlanner(str(planner), planner / EVAL_DIR, run=model, selection=selection)
        return EvaluatedPlanner(model, local / EVAL_DIR)
    held = [name for name in RUN_ARTEFACTS if (Path(run_dir) / name).exists()]
    if held:
        raise RunFolderError(f"{run_dir} holds a training run ({', '.join(held)}); an evaluation of "
                             f"planner.model={model!r} writes eval.md / eval.json into <output_dir>/<run_name>/ and "
                             "never into a training run's folder: pass another run_name=...")
    return EvaluatedPlanner(model, Path(run_dir))


def is_training_run(folder: Path) -> bool:
    """A run folder of ``train/rltf.py`` / ``train/sft.py`` (its ``config.yaml``), not a model folder."""
    folder = Path(folder)
    return (folder / "config.yaml").is_file() and not (
        (folder / "config.json").is_file() or (folder / "adapter_config.json").is_file())


def reported_planner(run: Path) -> tuple[Path, dict]:
    """The planner folder finished training run ``run`` reported as ``rltf`` and its
    ``rltf_selection``: ``<run>/rltf/checkpoint-<step>/planner``."""
    run = Path(run)
    results = run / RUN_RESULTS
    if not results.is_file():
        raise RunFolderError(f"planner.model={str(run)!r} is a training run's folder without {RUN_RESULTS} (not "
                             f"finished?), so it reports no planner; evaluate one of its planner folders: "
                             f"{_planner_folders(run)}")
    selection = read_json(results, "the run's results").get("rltf_selection")
    if not isinstance(selection, dict) or not isinstance(selection.get("step"), int):
        raise RunFolderError(f"{results} reports no RLTF planner (no rltf_selection: not a run of train/rltf.py?); "
                             f"evaluate one of its planner folders: {_planner_folders(run)}")
    planner = run / "rltf" / f"checkpoint-{selection['step']}" / MODEL_DIR
    if not planner.is_dir():
        raise RunFolderError(f"{results} reports the RLTF planner of step {selection['step']}, but {planner} is "
                             f"missing; evaluate one of the run's planner folders: {_planner_folders(run)}")
    return planner, {k: v for k, v in selection.items() if k != "validation"}


def _planner_folders(run: Path) -> str:
    found = ([str(run / "sft")] if (run / "sft").is_dir() else []) + [
        str(p / MODEL_DIR) for _, p in checkpoints(run / "rltf") if (p / MODEL_DIR).is_dir()]
    return ", ".join(found) or f"none found in {run}"
