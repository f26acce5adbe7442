"""No test writes into the working directory's ``checkpoints/`` (issue 52 item 1).

The README's order is install -> Quickstart (``accelerate launch train/rltf.py`` fills
``checkpoints/default``) -> tests, and ``.ci/run`` runs it that way; a test that reads the working
directory's run folders then sees the Quickstart's run (that is how a dry run of the default config
failed after the Quickstart). A test that *writes* there is caught here: the folder's files (path,
size, modification time) are compared before and after every test, and a change fails that test,
naming what it wrote. Tests give their runs ``output_dir=<tmp_path>`` instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for top, _dirs, names in os.walk(folder):
        for name in names:
            path = os.path.join(top, name)
            try:
                st = os.stat(path)
            except OSError:  # removed while walking: a change the next walk sees
                continue
            out[os.path.relpath(path, folder)] = (st.st_size, st.st_mtime_ns)
    return out


def changed_files(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """The paths added, removed or rewritten between two :func:`_files` listings, sorted."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


@pytest.fixture(autouse=True)
def checkpoints_left_alone():
    before = _files(CHECKPOINTS)
    yield
    changed = changed_files(before, _files(CHECKPOINTS))
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        pytest.fail(f"this test changed the working directory's checkpoints/ ({shown}); give its run "
                    "output_dir=<tmp_path>", pytrace=False)
