"""The limits of a run config's values that the field bounds do not say: sizes that cannot run, a run
folder that is a file, GRPO's own keys.

Each check returns the one-line problem (naming the key and the limit) or None;
:func:`rltf.config.loading.validate_config` raises it as a ``ConfigError``. Nesting deeper than
:data:`MAX_DEPTH`, a name or path longer than the file system holds, more plans per step than
:data:`MAX_PLANS_PER_STEP`, an integer past int64 or a seed past numpy's range would otherwise run
until a traceback (``RecursionError``, ``OSError: File name too long``, an allocation, an overflow).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from common.config_fields import bounded_fields

MAX_DEPTH = 32
"""The deepest nesting of mappings and lists a config value may have (the deepest real one: about 5)."""
TOO_DEEP = f"a value is nested more than {MAX_DEPTH} levels deep (mappings and lists); expected a flatter value"
MAX_PLANS_PER_STEP = 2**20
"""The most plans one RLTF step may sample (rltf.tasks_per_batch * rltf.k_samples): a step holds them all at
once (their tokens, log-probabilities, rewards); far more than any machine's step can sample."""
MAX_INT = 2**63 - 1
"""The largest integer setting (torch's int64): a larger one overflows where it becomes a tensor."""
MAX_SEED = 2**32 - 1
"""The largest seed (numpy's legacy generator, which accelerate's set_seed seeds, takes 0 to 2**32 - 1)."""
NAME_MAX = 255
"""The longest file or folder name, in bytes (ext4, xfs, btrfs, APFS, NTFS...)."""
PATH_MAX = 4096
"""The longest path, in bytes (Linux's PATH_MAX)."""
RUN_FILES_ROOM = 256
"""Bytes of a path kept for what a run writes inside its folder (rltf/checkpoint-<step>/optimizer.pt...)."""


def depth(tree: Any) -> int:
    """How deeply ``tree`` (plain dicts and lists) nests, counted without recursion."""
    deepest, stack = 0, [(tree, 0)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def shortened(text: str, limit: int = 80) -> str:
    """``text``, cut to ``limit`` characters (saying how long it was) for a one-line message."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def plans_problem(cfg) -> str | None:
    """More plans per RLTF step than :data:`MAX_PLANS_PER_STEP`."""
    plans = cfg.rltf.tasks_per_batch * cfg.rltf.k_samples
    if plans <= MAX_PLANS_PER_STEP:
        return None
    return (f"'rltf.tasks_per_batch' ({cfg.rltf.tasks_per_batch}) x 'rltf.k_samples' ({cfg.rltf.k_samples}) is "
            f"{plans} plans per step; expected at most {MAX_PLANS_PER_STEP} (each step holds every plan's tokens, "
            "log-probabilities and reward at once)")


def integer_problem(cfg) -> str | None:
    """An integer setting past torch's int64, or a seed past numpy's range (a number past them runs until
    it overflows, with a traceback)."""
    for key, value, _ in bounded_fields(cfg):
        if isinstance(value, bool) or not isinstance(value, int):
            continue
        if key.rpartition(".")[2].endswith("seed") and value > MAX_SEED:
            return f"bad value for {key!r}: {value!r}; expected an integer from 0 to {MAX_SEED} (numpy's seed range)"
        if abs(value) > MAX_INT:
            return f"bad value for {key!r}: {value!r}; expected an integer of at most {MAX_INT} (int64)"
    return None


def path_length_problem(cfg) -> str | None:
    """``run_name`` or a folder of ``output_dir`` longer than a file name (:data:`NAME_MAX` bytes), or a run
    folder path that leaves no room for its files within :data:`PATH_MAX`."""
    name = len(os.fsencode(cfg.run_name))
    if name > NAME_MAX:
        return (f"bad value for 'run_name': {shortened(cfg.run_name)!r}; expected a folder name of at most "
                f"{NAME_MAX} bytes (the file system's limit), got {name}")
    for part in Path(cfg.output_dir).parts:
        if len(os.fsencode(part)) > NAME_MAX:
            return (f"bad value for 'output_dir': {shortened(cfg.output_dir)!r}; its folder name "
                    f"{shortened(part, 40)!r} is {len(os.fsencode(part))} bytes, expected at most {NAME_MAX} "
                    "(the file system's limit)")
    full = len(os.fsencode(os.path.abspath(cfg.run_dir)))
    if full > PATH_MAX - RUN_FILES_ROOM:
        return (f"the run folder output_dir/run_name ({shortened(str(cfg.run_dir))!r}) is a path of {full} bytes; "
                f"expected at most {PATH_MAX - RUN_FILES_ROOM} (the system's {PATH_MAX}, less {RUN_FILES_ROOM} for "
                "the files the run writes inside)")
    return None


def folder_chain_problem(run_dir: str | os.PathLike) -> tuple[Path, str] | None:
    """``(path, what it is)`` of the first of ``run_dir`` and its nearest existing parent
    (``output_dir`` or above) that is a file where the run needs a folder; None when both are fine.
    (``rltf.run.folders.check_folder_chain`` raises on it when a run starts.)"""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        return run_dir, "the run folder, output_dir/run_name"
    for i, parent in enumerate(run_dir.parents):
        if parent.exists() or parent.is_symlink():
            return None if parent.is_dir() else (parent, "output_dir" if i == 0 else "a parent folder of output_dir")
    return None


def not_a_folder_message(path: Path, what: str) -> str:
    return (f"{path} ({what}) is a file, not a folder; move or delete it (or pick another output_dir / run_name) "
            "before starting the run")


def run_folder_problem(cfg) -> str | None:
    """The run folder and its nearest existing parent are folders, not files (checked when the config is
    read so that ``dry_run=true`` refuses what the run would refuse; the run checks it again when it starts)."""
    problem = folder_chain_problem(cfg.run_dir)
    return None if problem is None else not_a_folder_message(*problem)


# GRPO's updates per generated batch: a few in practice (TRL's default is 1); far more is a typo
MAX_GRPO_ITERATIONS = 1000


def grpo_problem(cfg) -> str | None:
    """A ``grpo.beta`` that is no finite weight >= 0, or more ``grpo.num_iterations`` than
    :data:`MAX_GRPO_ITERATIONS`."""
    g = cfg.grpo
    beta = g.beta
    if beta is not None and (isinstance(beta, bool) or not isinstance(beta, (int, float)) or not math.isfinite(beta)
                             or beta < 0):
        return (f"bad value for 'grpo.beta': {beta!r}; expected a finite number >= 0 (the KL weight) or null "
                "(rltf.kl_coef)")
    if g.num_iterations > MAX_GRPO_ITERATIONS:
        return (f"bad value for 'grpo.num_iterations': {g.num_iterations!r}; expected an integer from 1 to "
                f"{MAX_GRPO_ITERATIONS} (policy updates per generated batch)")
    return None
