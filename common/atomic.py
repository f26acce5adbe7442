"""Atomic writes: a file or folder appears whole or not at all, so a killed run never leaves a
half-written config, checkpoint, cache or dataset behind.

Both are written next to their destination and renamed into place (a rename within one file
system is atomic). This module sits at the bottom of the layering (``common``) so that ``envs``
(caches, built datasets) and ``rltf`` (configs, checkpoints, results) share one implementation.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` through a temporary sibling."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
