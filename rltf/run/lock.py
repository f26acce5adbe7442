"""One run per run folder: an exclusive lock on ``<run folder>/.run.lock``, held while the process lives.

Two runs started together into the same ``output_dir/run_name`` would both pass the "already holds
a run" check and write the same files; the second to lock is refused instead, naming the process
that holds the folder. The lock is ``fcntl.flock`` on an open file: the operating system releases
it when the process ends in any way (a crash, ``kill -9``), so a killed run never leaves a stale
lock behind (the file stays, unlocked; it records the holder's pid for the message).

Only the main process of a run takes it (:func:`rltf.stages.plan_job.start`), once: a process
that holds a folder's lock may take it again (the same run's stages, a test running several
stages in one process). It is released, and the file removed, when the process ends (normally or by
an error; a killed process leaves the file, unlocked) or by :func:`release_run_folder`. The file is
removed while still locked; a process that opened it before then and locks it after finds it gone
from the folder and locks the new file instead, so two runs never hold the same folder.
Where ``fcntl`` does not exist (Windows) runs are not locked.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path
from typing import IO

from rltf.run.folders import RunFolderError, disk_errors

try:
    import fcntl  # POSIX only
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".run.lock"

_held: dict[Path, IO[str]] = {}  # run folder -> the open lock file (the lock lives as long as it is open)


class RunFolderInUseError(RunFolderError):
    """Another process holds the run folder's lock: a run into the same folder is going on."""


def lock_run_folder(run_dir: str | os.PathLike) -> None:
    """Take the run folder's lock for this process (creating the folder), or raise
    :class:`RunFolderInUseError` naming the process that holds it."""
    run_dir = Path(run_dir)
    key = run_dir.resolve()
    if key in _held or fcntl is None:
        return
    while True:
        with disk_errors(run_dir, "the run folder"):
            run_dir.mkdir(parents=True, exist_ok=True)
            handle = open(run_dir / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - kept open: it is the lock
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise RunFolderInUseError(
                f"run folder {run_dir} is in use by another run (process {holder}); wait for it to end, or pick "
                "another run_name=... (a run that was killed releases the folder at once)") from None
        if _same_file(handle, run_dir / LOCK_FILE):
            break
        handle.close()  # (a run that ended removed the file between our open and our lock: lock the new one)
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    _held[key] = handle


@atexit.register
def _release_all() -> None:
    """At exit, close every lock this process still holds (the lock ends with the process anyway;
    closing it here keeps interpreter shutdown from reporting an unclosed file)."""
    for run_dir in list(_held):
        release_run_folder(run_dir)


def release_run_folder(run_dir: str | os.PathLike) -> None:
    """Give up this process's lock on ``run_dir`` and remove its lock file (nothing when it holds none)."""
    key = Path(run_dir).resolve()
    handle = _held.pop(key, None)
    if handle is not None:
        try:
            if _same_file(handle, key / LOCK_FILE):  # removed while still locked (see the module docstring)
                (key / LOCK_FILE).unlink()
        except OSError:  # (a folder gone or made read-only meanwhile: the file stays, unlocked)
            pass
        handle.close()  # closing the file releases the flock


def _same_file(handle: IO[str], path: Path) -> bool:
    """Whether ``path`` is the file ``handle`` has open (not removed or replaced since)."""
    try:
        mine, there = os.fstat(handle.fileno()), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)
