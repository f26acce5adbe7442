"""Atomic training checkpoints: everything needed to continue a killed run bit for bit.

``checkpoints/<run>/checkpoint-<step>/`` holds the planner (``save_pretrained``: full model or
adapter), ``trainer_state.pt`` (optimizer, scheduler, baseline, step, metric history) — written into a temporary folder and renamed into place, so a run killed mid-write
leaves the previous checkpoint intact. ``latest`` names the newest complete checkpoint.
No RNG state is saved because none is needed: everything random in a step is a pure function of
``(seed, step, process)`` (see :mod:`rltf.trainer`). The execution cache is not saved: it only
makes scoring faster, never different.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from envs.atomic import atomic_dir, write_atomic

LATEST = "latest"
STATE_FILE = "trainer_state.pt"
MODEL_DIR = "planner"
ENGINE_DIR = "deepspeed"


def save_checkpoint(run_dir: Path, step: int, planner, state: dict[str, Any], keep: int = 2,
                    model_state: dict | None = None, extra_dirs: dict[str, Path] | None = None) -> Path:
    """Write ``checkpoint-<step>`` atomically, point ``latest`` at it, keep the newest ``keep``.

    ``model_state``: the full weights when the planner's parameters are sharded; ``extra_dirs``:
    folders written beforehand (a DeepSpeed engine's partitions) moved in under the given names."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    final = run_dir / f"checkpoint-{step}"
    with atomic_dir(final, replace=True) as tmp:
        planner.save_pretrained(tmp / MODEL_DIR, state_dict=model_state)
        torch.save({**state, "step": step}, tmp / STATE_FILE)
        for name, src in (extra_dirs or {}).items():
            os.replace(src, tmp / name)
    write_atomic(run_dir / LATEST, final.name + "\n")
    # rotation: the checkpoint just written always stays, with the newest keep-1 before it; any
    # checkpoint of a later step is left over from an abandoned run (resume continues from latest)
    others = [(s, p) for s, p in checkpoints(run_dir) if s != step]
    older = [p for s, p in others if s < step]
    doomed = [p for s, p in others if s > step] + (older[: max(len(older) - (keep - 1), 0)] if keep > 0 else [])
    for p in doomed:
        shutil.rmtree(p, ignore_errors=True)
    return final


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """``(step, folder)`` of the ``checkpoint-<step>`` folders of ``run_dir``, oldest first."""
    found = []
    for p in Path(run_dir).glob("checkpoint-*"):
        tail = p.name.split("-", 1)[1]
        if p.is_dir() and tail.isdigit():
            found.append((int(tail), p))
    return sorted(found)


class RunFolderError(ValueError):
    """A run folder that this run cannot use as asked (holds another run, damaged checkpoint...)."""


# what a run writes into its folder (a fresh run with overwrite=true removes them first)
RUN_ARTEFACTS = ("rltf", "sft", "eval_initial.json", "sft_history.json", "rltf_history.json", "results.md",
                 "results.json", "rewards.png")


def prepare_run_folder(run_dir: Path, *, resume: bool, overwrite: bool) -> None:
    """A fresh run (``resume=false``) refuses a folder that holds an earlier run's outputs, unless
    ``overwrite``: then those outputs are removed first, so nothing of the old run is mixed in."""
    run_dir = Path(run_dir)
    if resume or not run_dir.is_dir():
        return
    present = [name for name in RUN_ARTEFACTS if (run_dir / name).exists()]
    if not present:
        return
    if not overwrite:
        raise RunFolderError(
            f"run folder {run_dir} already holds a run ({', '.join(present)}); continue it with resume=true, "
            f"pick another run_name=..., or replace it with overwrite=true")
    for name in present:
        p = run_dir / name
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = Path(run_dir) / LATEST
    if not pointer.exists():
        return None
    name = pointer.read_text().strip()
    if not re.fullmatch(r"checkpoint-\d+", name):  # never a path out of the run folder
        raise RunFolderError(f"{pointer} names {name!r}, not a checkpoint-<step> folder of {run_dir}; "
                             f"delete {pointer} (or fix it) to resume")
    path = Path(run_dir) / name
    if not (path / STATE_FILE).exists():
        raise FileNotFoundError(
            f"{pointer} names {path.name}, which has no {STATE_FILE}; the checkpoint is damaged — "
            f"delete {pointer} to resume from an older one or start over"
        )
    return path


def load_state(checkpoint: Path) -> dict[str, Any]:
    """The trainer state of a checkpoint: tensors and plain containers only (``weights_only``), so
    a pickle planted in a run folder is refused, never run."""
    return torch.load(Path(checkpoint) / STATE_FILE, weights_only=True)
