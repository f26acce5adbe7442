"""Atomic training checkpoints: everything needed to continue a killed run bit for bit.

``checkpoints/<run>/checkpoint-<step>/`` holds the planner (``save_pretrained``: full model or
adapter; the MiniLM planner's frozen encoder by reference, :mod:`rltf.planners.minilm_weights`),
``trainer_state.pt`` (optimizer: the AdamW moments of the trainable weights, their all-zero rows
left out, :mod:`rltf.run.zero_rows`; scheduler, baseline, step, metric history) — written into a temporary folder and
renamed into place, so a run killed mid-write leaves the previous checkpoint intact. ``latest`` names the newest
complete checkpoint.
Rotation keeps the newest ``rltf.save_total_limit`` and the protected ones (the best on validation,
kept whenever validation runs, whatever ``rltf.select`` says); it renames a checkpoint out of the way
before deleting it, so a killed rotation never leaves a half-deleted ``checkpoint-<step>``; the temporaries
a kill leaves (``.checkpoint-*``,
``.engine-*``, ``.latest.*.tmp``) are removed when the run resumes (:func:`prepare_run_folder`)
and after each save. :func:`latest_intact_checkpoint` resumes from the newest checkpoint whose
files all read, warning about each damaged one it skips.
No RNG state is saved because none is needed: everything random in a step is a pure function of
``(seed, step, process)`` (see :mod:`rltf.rl.trainer`). The execution cache is not saved: it only
makes scoring faster, never different.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

import torch

from common.atomic import atomic_dir, write_atomic
from rltf.planners.hf_models import damaged_files, has_tokenizer
from rltf.planners.source import CHECKPOINT_PLANNER
from rltf.run.folders import RunFolderError, check_folder_chain, disk_errors, not_a_folder
from rltf.run.lock import lock_run_folder
from rltf.run.tracking import DamagedFileError
from rltf.run.zero_rows import pack_zero_rows, unpack_zero_rows

LATEST = "latest"
STATE_FILE = "trainer_state.pt"
MODEL_DIR = CHECKPOINT_PLANNER  # "planner": a run folder as a planner source reads it too
ENGINE_DIR = "deepspeed"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle")  # weights a checkpoint's planner/ never holds


def save_checkpoint(run_dir: Path, step: int, planner, state: dict[str, Any], keep: int = 2,
                    model_state: dict | None = None, extra_dirs: dict[str, Path] | None = None,
                    protect: Collection[int] = ()) -> Path:
    """Write ``checkpoint-<step>`` atomically, point ``latest`` at it, keep the newest ``keep``.

    ``model_state``: the full weights when the planner's parameters are sharded; ``extra_dirs``:
    folders written beforehand (a DeepSpeed engine's partitions) moved in under the given names.
    ``keep`` (``rltf.save_total_limit``) is at least 1: the checkpoint just written. ``protect``:
    steps of earlier checkpoints rotation never deletes (the best on validation, any ``rltf.select``),
    kept besides the newest ``keep``."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"save_checkpoint: keep={keep!r} (rltf.save_total_limit); expected an integer >= 1, "
                         "the number of newest checkpoints kept (the one just written counts)")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    final = run_dir / f"checkpoint-{step}"
    with disk_errors(final, "an RLTF checkpoint"), atomic_dir(final, replace=True) as tmp:
        planner.save_pretrained(tmp / MODEL_DIR, state_dict=model_state)
        buffer = io.BytesIO()  # (torch.save to a file reports a full disk without its errno)
        torch.save(pack_zero_rows({**state, "step": step}), buffer)  # (mostly-zero moments: their other rows)
        (tmp / STATE_FILE).write_bytes(buffer.getbuffer())
        for name, src in (extra_dirs or {}).items():
            os.replace(src, tmp / name)
    with disk_errors(run_dir / LATEST, "the newest checkpoint's name"):
        write_atomic(run_dir / LATEST, final.name + "\n")
    # rotation: the checkpoint just written always stays, with the newest keep-1 before it and the
    # protected ones; any checkpoint of a later step is left over from an abandoned run (resume
    # continues from latest)
    others = [(s, p) for s, p in checkpoints(run_dir) if s != step]
    older = [p for s, p in others if s < step and s not in set(protect)]
    doomed = [p for s, p in others if s > step] + older[: max(len(older) - (keep - 1), 0)]
    for p in doomed:
        _remove_checkpoint(p)
    remove_stale_temporaries(run_dir, engines=False)  # (an engine folder may be on its way in)
    return final


def _remove_checkpoint(p: Path) -> None:
    """Rename a checkpoint out of the way (atomic), then delete it: a kill in between leaves a
    ``.checkpoint-<step>-deleted`` temporary (removed at the next start), never a half-deleted
    ``checkpoint-<step>`` that could be taken for a whole one."""
    gone = p.with_name(f".{p.name}-deleted")
    try:
        if gone.exists():
            shutil.rmtree(gone, ignore_errors=True)
        os.replace(p, gone)
    except OSError:
        gone = p
    shutil.rmtree(gone, ignore_errors=True)


# temporaries a killed write leaves in <run>/rltf (atomic_dir, write_atomic, a DeepSpeed engine
# staged for the next checkpoint, a checkpoint being rotated out) and in <run> (write_atomic)
_STALE_IN_CHECKPOINTS = re.compile(r"\.checkpoint-\d+-.+|\.latest\..+\.tmp")
_STALE_ENGINE = re.compile(r"\.engine-\d+")


def remove_stale_temporaries(run_dir: Path, *, engines: bool = True) -> list[Path]:
    """Delete what a run killed mid-write left in checkpoint folder ``run_dir`` (``<run>/rltf``):
    ``.checkpoint-<step>-*`` folders, ``.latest.*.tmp`` files and (``engines``) staged
    ``.engine-<step>`` folders. Returns what it removed. Only while no other process of this run
    writes there (at start, and after a save)."""
    removed = []
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return removed
    for p in run_dir.iterdir():
        if _STALE_IN_CHECKPOINTS.fullmatch(p.name) or (engines and _STALE_ENGINE.fullmatch(p.name)):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)
            removed.append(p)
    return removed


_STALE_SFT = re.compile(r"\.sft-.+")  # the fine-tuned planner being written (atomic_dir), left by a kill


def remove_stale_sft_temporaries(run_dir: Path) -> list[Path]:
    """Delete the ``.sft-*`` folders a run killed while saving its fine-tuned planner left in ``run_dir``
    (only while this run holds the folder's lock: no other process writes there)."""
    removed = []
    if Path(run_dir).is_dir():
        for p in Path(run_dir).iterdir():
            if _STALE_SFT.fullmatch(p.name) and p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
    return removed


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """``(step, folder)`` of the ``checkpoint-<step>`` folders of ``run_dir``, oldest first."""
    found = []
    for p in Path(run_dir).glob("checkpoint-*"):
        tail = p.name.split("-", 1)[1]
        if p.is_dir() and tail.isdigit():
            found.append((int(tail), p))
    return sorted(found)


class DamagedCheckpointError(RunFolderError, DamagedFileError):
    """A checkpoint whose files do not read (truncated state, damaged planner folder)."""


# what a training run writes into its folder (a fresh run with overwrite=true removes them first): the
# plan job's, a flow job's, the GRPO recipe's, and the trackers' folders (logging.report_to)
RUN_ARTEFACTS = ("rltf", "sft", "eval_initial.json", "sft_history.json", "rltf_history.json", "results.md",
                 "results.json", "rewards.png", "flow_results.md", "flow_results.json", "role_rewards.png", "grpo",
                 "grpo_history.json", "train_history.json", "tensorboard", "wandb")


def run_artefacts(run_dir: Path) -> list[str]:
    """The names of :data:`RUN_ARTEFACTS` present in ``run_dir``."""
    return [name for name in RUN_ARTEFACTS if (run_dir / name).exists() or (run_dir / name).is_symlink()]


def occupied_run_folder(run_dir: Path, present: list[str]) -> RunFolderError:
    """The refusal of a fresh run into ``run_dir``, which holds ``present`` (also ``dry_run``'s finding)."""
    return RunFolderError(f"run folder {run_dir} already holds a run ({', '.join(present)}); continue it with "
                          f"resume=true, pick another run_name=..., or replace it with overwrite=true")


def check_fresh_run_folder(run_dir: Path, *, resume: bool, overwrite: bool) -> None:
    """Raise what :func:`prepare_run_folder` would for a folder holding a run, touching nothing (``dry_run``)."""
    run_dir = Path(run_dir)
    if not resume and not overwrite and run_dir.is_dir() and (present := run_artefacts(run_dir)):
        raise occupied_run_folder(run_dir, present)


def prepare_run_folder(run_dir: Path, *, resume: bool, overwrite: bool) -> None:
    """Check the run folder before anything trains (called at the start of every training run).

    Every folder the run uses (``output_dir``, the run folder, ``rltf``, its
    ``checkpoint-<step>`` folders, ``sft``) must be a folder, not a file: a clear error names the
    path. A fresh run (``resume=false``) refuses a folder that holds an earlier run's outputs,
    unless ``overwrite``: then those outputs are removed first, so nothing of the old run is
    mixed in. A resumed run first removes the temporaries a killed write left behind.

    First the run takes the folder's lock (:func:`rltf.run.lock.lock_run_folder`): a second run into
    the same folder while this one lives is refused (:class:`~rltf.run.lock.RunFolderInUseError`).
    A folder that cannot be written (read-only, full, no permission) is a
    :class:`~rltf.run.folders.DiskWriteError` naming it."""
    run_dir = Path(run_dir)
    check_folder_chain(run_dir)
    lock_run_folder(run_dir)
    remove_stale_sft_temporaries(run_dir)
    if not resume and run_dir.is_dir():
        present = run_artefacts(run_dir)
        if present and not overwrite:
            raise occupied_run_folder(run_dir, present)
        for name in present:
            p = run_dir / name
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    check_run_layout(run_dir)
    if resume:
        remove_stale_temporaries(run_dir / "rltf")


def check_run_layout(run_dir: Path) -> None:
    """Raise :class:`RunFolderError` naming the first path of the run's layout that exists but is
    not what the run needs there (a file where a folder goes, a folder where ``latest`` goes)."""
    run_dir = Path(run_dir)
    check_folder_chain(run_dir)
    folders = [(run_dir / "rltf", "RLTF checkpoints"), (run_dir / "sft", "the fine-tuned planner")]
    for p, what in folders:
        if (p.exists() or p.is_symlink()) and not p.is_dir():
            raise not_a_folder(p, what)
    rdir = run_dir / "rltf"
    if not rdir.is_dir():
        return
    for p in sorted(rdir.glob("checkpoint-*")):
        if re.fullmatch(r"checkpoint-\d+", p.name):
            if not p.is_dir():
                raise not_a_folder(p, "an RLTF checkpoint")
            if (p / MODEL_DIR).exists() and not (p / MODEL_DIR).is_dir():
                raise not_a_folder(p / MODEL_DIR, "a checkpoint's planner")
    if (rdir / LATEST).is_dir():
        raise RunFolderError(f"{rdir / LATEST} is a folder; it should be the file naming the newest checkpoint: "
                             "move or delete it")


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
    a pickle planted in a run folder is refused, never run. A state file that does not load is
    a :class:`DamagedCheckpointError` naming it."""
    state, why = _read_state(Path(checkpoint))
    if state is None:
        raise DamagedCheckpointError(f"{Path(checkpoint) / STATE_FILE} is damaged ({why}): the checkpoint "
                                     f"{Path(checkpoint).name} cannot be resumed; resume from an older checkpoint "
                                     "(delete this one) or start over")
    return state


def _read_state(checkpoint: Path) -> tuple[dict[str, Any] | None, str | None]:
    f = checkpoint / STATE_FILE
    if not f.is_file():
        return None, "missing"
    try:
        state = torch.load(f, weights_only=True)
    except Exception as e:  # truncated zip, bad pickle, a planted object weights_only refuses...
        return None, f"{type(e).__name__}: {_first_line(e)}"
    if not isinstance(state, dict):
        return None, f"holds a {type(state).__name__}, not a trainer state"
    try:
        return unpack_zero_rows(state), None
    except (ValueError, RuntimeError, IndexError, TypeError) as e:  # a packed tensor that does not fit its shape
        return None, f"{type(e).__name__}: {_first_line(e)}"


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def checkpoint_problem(checkpoint: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``(state, None)`` for an intact checkpoint, ``(None, why)`` for a damaged one: its state
    loads and records its step, its planner folder holds safetensors weights and no pickle
    (``pytorch_model.bin``...: never loaded from a run folder), its files read
    (:func:`rltf.planners.hf_models.damaged_files`, JSON and safetensors headers, tokenizer present), a DeepSpeed
    run's engine folder is there."""
    checkpoint = Path(checkpoint)
    state, why = _read_state(checkpoint)
    if state is None:
        return None, f"{STATE_FILE}: {why}"
    step = int(checkpoint.name.split("-", 1)[1])
    if state.get("step") != step:
        return None, f"{STATE_FILE} records step {state.get('step')!r}"
    planner = checkpoint / MODEL_DIR
    if not planner.is_dir():
        return None, f"no {MODEL_DIR}/ folder"
    if not ((planner / "config.json").is_file() or (planner / "adapter_config.json").is_file()):
        return None, f"{MODEL_DIR}/ has neither config.json nor adapter_config.json"
    pickled = sorted(f for f in planner.rglob("*") if f.suffix in PICKLE_SUFFIXES and f.is_file())
    if pickled:  # rltf writes safetensors; a pickle here was put there, and loading it would fail or run it
        return None, (f"{pickled[0].relative_to(checkpoint)}: a pickle weights file (rltf checkpoints hold "
                      "safetensors only; a pickle is never loaded from a run folder)")
    if not any(planner.glob("*.safetensors")):
        return None, f"{MODEL_DIR}/ holds no weights"
    if not has_tokenizer(planner):
        return None, f"{MODEL_DIR}/ has no tokenizer files"
    bad = damaged_files(planner)
    if bad:
        f, why = bad[0]
        return None, f"{f.relative_to(checkpoint)}: {why}"
    if state.get("sharding") == "deepspeed" and not (checkpoint / ENGINE_DIR).is_dir():
        return None, f"no {ENGINE_DIR}/ folder (a DeepSpeed run's optimizer partitions)"
    return state, None


def latest_intact_checkpoint(run_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest intact checkpoint of checkpoint folder ``run_dir`` (``<run>/rltf``) and its
    loaded state (:func:`load_state`), or None when there is no checkpoint to resume from.

    Candidates, newest first: the one ``latest`` names, then the older ones (a checkpoint of a
    later step than ``latest`` is an abandoned run's leftover, never a candidate; without a
    ``latest`` every checkpoint is). Each damaged one skipped gets a ``RuntimeWarning``
    ("checkpoint-8 is damaged (...): resuming from checkpoint-4"); when checkpoints exist but none
    is intact, :class:`DamagedCheckpointError` lists them (starting over silently would hide it).
    A ``latest`` naming anything but a ``checkpoint-<step>`` folder is a :class:`RunFolderError`."""
    run_dir = Path(run_dir)
    pointer = run_dir / LATEST
    found = checkpoints(run_dir)
    if pointer.is_file():
        name = pointer.read_text().strip()
        if not re.fullmatch(r"checkpoint-\d+", name):  # never a path out of the run folder
            raise RunFolderError(f"{pointer} names {name!r}, not a checkpoint-<step> folder of {run_dir}; "
                                 f"delete {pointer} (or fix it) to resume")
        newest = int(name.split("-", 1)[1])
        candidates = [(s, p) for s, p in found if s <= newest]
        if not any(s == newest for s, _ in candidates):
            candidates.append((newest, run_dir / name))  # missing: reported as damaged
    else:
        candidates = found
    skipped: list[tuple[str, str]] = []
    for _, path in sorted(candidates, key=lambda sp: -sp[0]):
        if not path.is_dir():
            skipped.append((path.name, "its folder is missing"))
            continue
        state, why = checkpoint_problem(path)
        if state is None:
            skipped.append((path.name, why or "unreadable"))
            continue
        for name, reason in skipped:
            warnings.warn(f"{run_dir / name} is damaged ({reason}): resuming from {path.name}", RuntimeWarning,
                          stacklevel=2)
        return path, state
    if not skipped:
        return None
    listed = "; ".join(f"{name}: {reason}" for name, reason in skipped)
    raise DamagedCheckpointError(f"no intact checkpoint in {run_dir} to resume from ({listed}); delete the damaged "
                                 f"checkpoints (or {run_dir}) to start the RLTF stage over, or start a fresh run "
                                 "with overwrite=true")
