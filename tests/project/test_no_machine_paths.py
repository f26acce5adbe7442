"""No committed result holds a machine's path (issue 52, "committed files under benchmarks/results/ hold
machine paths"; issue 51 item 6): the generators write paths relative to the project, the run or the
comparison folder, so a results file reads the same on every clone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MACHINE_PATH = re.compile(r"""(?<![\w.~$-])/(?:tmp|work|root|home|check|Users|var/folders)/""")


def test_committed_results_hold_no_absolute_machine_path():
    found = []
    for folder in (ROOT / "benchmarks" / "results", ROOT / "docs" / "results"):
        for path in sorted(folder.rglob("*")):
            if path.suffix in {".json", ".md", ".csv", ".txt"}:
                for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if MACHINE_PATH.search(line):
                        found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not found, "machine paths in committed results:\n" + "\n".join(found[:20])


def test_the_pattern_finds_what_it_is_for():
    assert MACHINE_PATH.search('"run_dir": "/tmp/vt/checkpoints/x"') and MACHINE_PATH.search("at /work/fs2/a")
    assert not MACHINE_PATH.search('"run_dir": "rltf/seed0"') and not MACHINE_PATH.search("envs/travel/splits/x.json")
