"""The run folder as a place to write: its error type, the check that its path is made of folders,
and disk errors (read-only, full, no permission) turned into one line naming the path.

Light on purpose (no torch): the entry points' error wrapper (:mod:`rltf.run.cli`) reads it. The
path check itself is :func:`rltf.config.loading.folder_chain_problem`, which a config's validation
uses too, so ``dry_run=true`` refuses what the run would refuse.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator
from pathlib import Path

from common.cache_dir import cache_error_message, cache_root, in_cache
from common.errors import UserError
from rltf.config.loading import folder_chain_problem, not_a_folder_message


class RunFolderError(UserError, ValueError):
    """A run folder that this run cannot use as asked (holds another run, damaged checkpoint...)."""


class DiskWriteError(RunFolderError):
    """A write the disk refused (no space, read-only, no permission): the message names the path."""


# what a disk, not the program, refuses: full (ENOSPC, EDQUOT), file too large, read-only, not allowed
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM})
_ADVICE = {errno.ENOSPC: "free some space or pick another output_dir",
           errno.EDQUOT: "free some space (disk quota) or pick another output_dir",
           errno.EFBIG: "pick another output_dir (the file system limits file sizes)",
           errno.EROFS: "the file system is read-only: pick another output_dir",
           errno.EACCES: "no permission to write there: pick another output_dir (or fix its permissions)",
           errno.EPERM: "no permission to write there: pick another output_dir (or fix its permissions)"}


def not_a_folder(p: Path, what: str) -> RunFolderError:
    return RunFolderError(not_a_folder_message(p, what))


def check_folder_chain(run_dir: Path) -> None:
    """``run_dir`` and its nearest existing parent (``output_dir`` or above) are folders."""
    problem = folder_chain_problem(run_dir)
    if problem is not None:
        raise not_a_folder(*problem)


def disk_error_number(error: BaseException) -> int | None:
    """The errno of a disk refusal (:data:`DISK_ERRNOS`): an ``OSError``'s, or the ``os error <n>``
    safetensors' Rust writer reports (``SafetensorError``, not an ``OSError``); None otherwise."""
    if isinstance(error, OSError):
        return error.errno if error.errno in DISK_ERRNOS else None
    if type(error).__name__ == "SafetensorError":
        found = re.search(r"os error (\d+)", str(error))
        if found and int(found.group(1)) in DISK_ERRNOS:
            return int(found.group(1))
    return None


def disk_error_message(error: BaseException, path: str | os.PathLike | None, what: str = "") -> str:
    """``cannot write <path> (<what>): <reason>; <advice>`` for a disk refusal."""
    number = disk_error_number(error)
    where = getattr(error, "filename", None) or path or "a file (the error names none)"
    if in_cache(where):  # the rltf cache, not the run folder: RLTF_CACHE_DIR moves it, not output_dir
        return cache_error_message(error, cache_root())
    reason = os.strerror(number) if number is not None else str(error)
    label = f" ({what})" if what else ""
    advice = _ADVICE.get(number, "")
    return f"cannot write {where}{label}: {reason}" + (f"; {advice}" if advice else "")


@contextlib.contextmanager
def disk_errors(path: str | os.PathLike, what: str = "") -> Iterator[None]:
    """Turn a disk refusal inside the block (:func:`disk_error_number`) into a :class:`DiskWriteError`
    naming the file (or ``path``) and ``what`` it is; other errors pass through unchanged."""
    try:
        yield
    except Exception as e:
        if disk_error_number(e) is None:
            raise
        raise DiskWriteError(disk_error_message(e, path, what)) from e
