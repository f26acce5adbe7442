"""Issue 25: stopping a comparison (SIGTERM / SIGINT) stops its run first, with real child
processes: no orphan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.two_processes import child_env as _child_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(predicate, timeout: float = 240.0, what: str = "") -> None:  # a bound on a hang, not a timing
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


CHILD_RUN = """
import os, signal, sys, time
from pathlib import Path
marks = Path(sys.argv[1])
def stop(signum, frame):
    time.sleep(0.5)  # cleaning up takes a moment: the parent must wait for it
    (marks / "stopped").write_text(str(signum))
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
(marks / "pid").write_text(str(os.getpid()))
time.sleep(120)
"""


PARENT = """
import sys
from pathlib import Path
from rltf.comparison.runs import run_one
from rltf.comparison.suites import Arm, Suite
script, marks, root = sys.argv[1:]
arm = Arm("a", script, overrides=(marks,))
run_one(Suite("s", (arm,), ()), arm, 0, Path(root))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopping_compare_stops_its_run_first(tmp_path, sig):
    script = tmp_path / "child_run.py"
    script.write_text(CHILD_RUN)
    marks = tmp_path / "marks"
    marks.mkdir()
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(script), str(marks), str(tmp_path / "runs")],
                              env=_child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    child = None
    try:
        _wait_for(lambda: (marks / "pid").is_file() and (marks / "pid").read_text(), what="the run to start")
        child = int((marks / "pid").read_text())
        parent.send_signal(sig)
        parent.wait(timeout=60)
        assert (marks / "stopped").read_text() == str(int(sig))  # the run got the signal...
        assert not _alive(child)  # ...and ended before the comparison did: no orphan
        assert parent.returncode != 0
    finally:
        for pid in ([child] if child else []):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
            parent.wait()
