"""rltf's cache folder: where learned lite experts keep what they trained (so a second run does not
retrain), the oracle store, the converted SmolLM2 planner.

The folder is ``$RLTF_CACHE_DIR`` or ``~/.cache/rltf``. A cache folder the disk refuses (full,
read-only, no permission) is a :class:`CacheDirError` naming the folder and ``RLTF_CACHE_DIR`` (the
setting that moves it), not the run's ``output_dir``: :func:`rltf_cache_dir` when it cannot be
created, :func:`cache_writes` around a write into it.

A process filling a temporary folder in the cache holds a lock file in it
(:func:`held_while_filled`); :func:`clean_leftovers` removes the temporaries whose lock no live
process holds (a killed conversion's), so they do not pile up.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from common.errors import UserError

# what a disk, not the program, refuses: full (ENOSPC, EDQUOT), file too large, read-only, not allowed
CACHE_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM})


LOCK_NAME = ".rltf-filling.lock"  # held (flock) by the process filling a temporary folder
STALE_S = 3600  # a temporary without a lock file, untouched this long, is a killed process's


class CacheDirError(UserError, RuntimeError):
    """The rltf cache folder cannot be written (full, read-only, no permission): move it with RLTF_CACHE_DIR."""


def cache_root() -> Path:
    """``$RLTF_CACHE_DIR`` or ``~/.cache/rltf`` (not created)."""
    return Path(os.environ.get("RLTF_CACHE_DIR") or Path.home() / ".cache" / "rltf")


def in_cache(path: str | os.PathLike) -> bool:
    """``path`` lies in the rltf cache folder."""
    try:
        return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(cache_root()))
    except (TypeError, ValueError):
        return False


def rltf_cache_dir(*parts: str) -> Path:
    """``$RLTF_CACHE_DIR`` or ``~/.cache/rltf``, joined with ``parts`` and created."""
    path = cache_root().joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # read-only, full, no permission, a file in the way: RLTF_CACHE_DIR moves it
        raise CacheDirError(cache_error_message(error, path)) from None
    return path


def disk_refusal_errno(error: BaseException) -> int | None:
    """The errno of a disk refusal (full, read-only, no permission), else None."""
    if isinstance(error, CacheDirError):
        return None
    if isinstance(error, OSError):
        return error.errno if error.errno in CACHE_DISK_ERRNOS else None
    if type(error).__name__ == "SafetensorError":  # safetensors' Rust writer: "... os error 28"
        found = re.search(r"os error (\d+)", str(error))
        if found and int(found.group(1)) in CACHE_DISK_ERRNOS:
            return int(found.group(1))
    return None


def cache_error_message(error: BaseException, path: str | os.PathLike) -> str:
    """``cannot write the rltf cache folder <path>: <reason>; ...RLTF_CACHE_DIR...``."""
    number = disk_refusal_errno(error)
    reason = os.strerror(number) if number is not None else getattr(error, "strerror", None) or str(error)
    where = getattr(error, "filename", None) or path
    now = os.environ.get("RLTF_CACHE_DIR")
    setting = f"RLTF_CACHE_DIR={now}" if now else "RLTF_CACHE_DIR is unset, so ~/.cache/rltf is used"
    fix = "free some space there or" if number in (errno.ENOSPC, errno.EDQUOT) else ""
    return (f"cannot write the rltf cache folder {path} ({where}): {reason}; {fix} point RLTF_CACHE_DIR "
            f"at a writable folder with space ({setting})").replace(";  point", "; point")


@contextlib.contextmanager
def cache_writes(path: str | os.PathLike) -> Iterator[None]:
    """A disk refusal inside the block (full, read-only, no permission) becomes a :class:`CacheDirError`
    naming ``path`` (a folder of the cache) and ``RLTF_CACHE_DIR``; other errors pass through."""
    try:
        yield
    except Exception as e:
        if disk_refusal_errno(e) is None:
            raise
        raise CacheDirError(cache_error_message(e, path)) from None


# ---------------------------------------------------------------------------------------------
# the temporaries of a killed process


def clean_leftovers(root: Path, prefix: str) -> list[Path]:
    """Remove the temporaries under ``root`` named ``prefix*`` that a killed process left behind: a
    folder (or file) whose lock (:data:`LOCK_NAME` inside it, or the file itself) nobody holds, a
    damaged folder being deleted, a lock-less one untouched for :data:`STALE_S`. Returns them."""
    removed = []
    for p in sorted(root.glob(f"{prefix}*")) if root.is_dir() else ():
        if p.is_dir() and not p.is_symlink():
            dead = "-damaged-" in p.name or _abandoned(p / LOCK_NAME, p)
            if dead:
                shutil.rmtree(p, ignore_errors=True)
        else:
            dead = p.name.endswith((".tmp", ".new")) and _abandoned(p if p.name.endswith(".tmp") else None, p)
            if dead:
                p.unlink(missing_ok=True)
        if dead:
            removed.append(p)
    return removed


def _abandoned(lock: Path | None, p: Path) -> bool:
    """No live process holds ``lock`` (or, with no lock file, ``p`` is older than :data:`STALE_S`)."""
    try:
        fd = os.open(lock, os.O_RDWR) if lock is not None else None
    except FileNotFoundError:
        fd = None
    except OSError:
        return False
    if fd is None:
        try:
            return time.time() - p.lstat().st_mtime > STALE_S
        except OSError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:  # held by a live process
        return False
    finally:
        os.close(fd)


@contextlib.contextmanager
def held_while_filled(folder: Path) -> Iterator[None]:
    """Hold :data:`LOCK_NAME` in ``folder`` while it is filled (created under another name and renamed
    once locked, so the lock file never exists unlocked); removed before the folder is renamed."""
    part = folder / (LOCK_NAME + ".part")
    fd = os.open(part, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(part, folder / LOCK_NAME)
        yield
        (folder / LOCK_NAME).unlink(missing_ok=True)
    finally:
        os.close(fd)
