"""Atomic writes: a file or folder appears whole or not at all, so a killed run never leaves a
half-written config, checkpoint, cache or dataset behind.

Both are written next to their destination and renamed into place (a rename within one file
system is atomic). They get the permissions a plain ``open(path, "w")`` / ``mkdir`` would give
(0666 / 0777 less the user's umask), not the owner-only 0600 / 0700 of the temporaries
:mod:`tempfile` creates. :func:`atomic_path` is for writers that want a file name
(``savefig(tmp, format="png")``). This module sits at the bottom of the layering (``common``) so
that ``envs`` (caches, built datasets) and ``rltf`` (configs, checkpoints, results) share one implementation.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def current_umask() -> int:
    """This process's umask (read from ``/proc`` where it can be, else set and restored)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` through a temporary sibling."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling file name of ``path`` (``.<name>.<random>.tmp``: a writer that picks
    its format by the suffix, as matplotlib's ``savefig`` does, is given the format) to write; when
    the block succeeds it becomes ``path``, with the user's umask. On any error the temporary is
    removed and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike, *, replace: bool = False,
               complete_marker: str | None = None) -> Iterator[Path]:
    """Yield a temporary sibling folder to fill; when the block succeeds it becomes ``target``.

    ``replace``: an existing ``target`` is removed first (a checkpoint rewritten at the same step).
    Otherwise an existing, complete ``target`` (``complete_marker`` names a file that proves it)
    means a concurrent builder of the same content won the race: ours is discarded. On any error
    the temporary folder is removed and ``target`` is left as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~current_umask())
        if replace and target.exists():
            shutil.rmtree(target)
        try:
            os.replace(tmp, target)
        except OSError:
            won = complete_marker is not None and (target / complete_marker).is_file()
            if replace or not won:
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
