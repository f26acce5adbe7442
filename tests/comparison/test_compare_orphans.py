"""Issue 38 item 7: a comparison killed without a chance to stop its run (SIGKILL, the OOM killer)
takes the run with it (``prctl(PR_SET_PDEATHSIG)``), so a restart does not find the run folder
"in use by another run". A real process tree: ``train/compare.py`` on a one-arm suite whose run
holds the run folder's lock (:mod:`rltf.run.lock`) and waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.comparison.test_compare_signals import _alive, _wait_for
from tests.two_processes import ROOT, child_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

ARM = """
import json, os, sys, time
from pathlib import Path
from rltf.run.lock import lock_run_folder
args = dict(a.split("=", 1) for a in sys.argv[1:])
marks = Path(args["marks"])
run_dir = Path(args["output_dir"]) / args["run_name"]
run_dir.mkdir(parents=True, exist_ok=True)
lock_run_folder(run_dir)  # 'in use by another run' while an orphan holds it
(marks / "pid").write_text(str(os.getpid()))
if (marks / "hang").exists():
    time.sleep(120)
(run_dir / "results.json").write_text(json.dumps({"table": {"rows": {}}, "scores": {}}))
"""


def _compare(suite: Path, out: Path, marks: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "train" / "compare.py"), f"suite={suite}",
                             f"output_dir={out}", "seeds=1", f"marks={marks}"],
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_sigkilled_comparison_leaves_no_orphan_and_restarts(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "arm.py").write_text(ARM)
    suite = tmp_path / "tiny.yaml"
    suite.write_text(yaml.safe_dump({"name": "tiny", "seeds": 1, "arms": [
        {"name": "a", "script": str(tmp_path / "arm.py"), "loader": "builtins:len", "history": None}]}))
    (marks / "hang").write_text("")
    parent, child = _compare(suite, tmp_path / "out", marks), None
    try:
        _wait_for(lambda: (marks / "pid").is_file() and (marks / "pid").read_text(), what="the run to start")
        child = int((marks / "pid").read_text())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)  # no handler runs: only the kernel can end the run
        parent.wait(timeout=120)
        end = time.monotonic() + 5
        while _alive(child) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _alive(child), "the run outlived its SIGKILLed comparison (an orphan holding the run folder)"
        (marks / "hang").unlink()
        (marks / "pid").unlink()
        again = _compare(suite, tmp_path / "out", marks)
        out, _ = again.communicate(timeout=120)
        assert again.returncode == 0, out[-3000:]
        assert "in use by another run" not in out
        assert (tmp_path / "out" / "tiny" / "a" / "seed0" / "results.json").is_file(), out[-3000:]
    finally:
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
            parent.wait()
