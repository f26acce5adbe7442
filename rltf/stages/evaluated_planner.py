"""Which planner ``train/evaluate.py`` evaluates, what its rows are called and where its files go.

``planner.model`` is resolved once (:func:`rltf.planners.source.resolve_planner_source`) and is one of:

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

from rltf.planners.source import PlannerSource, resolve_planner_source
from rltf.run.checkpoint import RUN_ARTEFACTS
from rltf.run.folders import RunFolderError

__all__ = ["EVAL_DIR", "PLANNER_ROW", "EvaluatedPlanner", "evaluated_planner"]

PLANNER_ROW = "planner"  # the key of the evaluated planner's constrained beam search row
EVAL_DIR = "eval"  # the folder beside a planner that its evaluations are written to
_PROMPTED = {"zero": "zero-shot", "few": "few-shot"}


@dataclass(frozen=True)
class EvaluatedPlanner:
    """The planner ``planner.model`` names (its :class:`~rltf.planners.source.PlannerSource`) and
    where its evaluation goes."""

    source: PlannerSource
    out_dir: Path  # where eval.md / eval.json go

    @property
    def model(self) -> str:
        """What is evaluated: planner.model itself, or the planner folder a run folder reported."""
        return self.source.name

    @property
    def run(self) -> str | None:
        """The training run's folder planner.model named."""
        return self.source.run

    @property
    def selection(self) -> dict | None:
        """That run's rltf_selection (rltf.select, step)."""
        return self.source.selection

    @property
    def short_name(self) -> str:
        """What is evaluated, in a few words (its progress bar reads ``eval <this>``): ``rltf planner of
        default (step 150)`` for a run folder, ``planner default/sft`` for a planner folder (its last two
        parts), ``planner <name or hub id>`` otherwise."""
        if self.run is not None:
            step = f" (step {self.selection['step']})" if self.selection and "step" in self.selection else ""
            return f"rltf planner of {Path(self.run).name}{step}"
        if self.source.folder is not None:
            return f"planner {'/'.join(Path(self.model).parts[-2:])}"
        return f"planner {self.model}"

    def row_labels(self) -> dict[str, str]:
        """The table's names of the planner's rows (the bounds keep theirs)."""
        return {PLANNER_ROW: f"planner ({self.model})",
                **{schema: f"{label} ({self.model})" for schema, label in _PROMPTED.items()}}

    def as_dict(self) -> dict:
        return {"model": self.model, "run": self.run, "selection": self.selection}


def evaluated_planner(model: str | PlannerSource, run_dir: Path) -> EvaluatedPlanner:
    """The planner ``model`` (``planner.model``, or its source already resolved) names and where its
    evaluation goes (see the module docstring); ``run_dir`` is ``<output_dir>/<run_name>``. Reads
    files only: a ``run_dir`` that holds a training run is a :class:`~rltf.run.folders.RunFolderError`
    saying what to pass instead."""
    source = resolve_planner_source(model) if isinstance(model, str) else model
    if source.folder is not None:
        return EvaluatedPlanner(source, source.folder / EVAL_DIR)
    held = [name for name in RUN_ARTEFACTS if (Path(run_dir) / name).exists()]
    if held:
        raise RunFolderError(f"{run_dir} holds a training run ({', '.join(held)}); an evaluation of "
                             f"planner.model={source.value!r} writes eval.md / eval.json into <output_dir>/<run_name>/ "
                             "and never into a training run's folder: pass another run_name=...")
    return EvaluatedPlanner(source, Path(run_dir))
