"""Child processes of the tests: a script under ``torchrun --standalone --nproc_per_node 2`` (a free
port, one thread each), and the environment of any child ``python``."""

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    """The environment of a child ``python`` process: this repository importable, one thread."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def default_sigint() -> None:
    """``preexec_fn`` of a child a test interrupts: SIGINT back to its default, so the child's Python turns it into
    KeyboardInterrupt even when the suite was started where SIGINT is ignored (a shell's background job, nohup)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def torchrun2(script: str | Path, *args: str, cpu: bool = True, extra_env: dict | None = None,
              timeout: int = 600) -> subprocess.CompletedProcess:
    """Two processes of ``script`` (a path relative to the repository root); asserts they exit 0."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **(extra_env or {})}
    if cpu:
        env["ACCELERATE_USE_CPU"] = "true"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
           str(ROOT / script), *map(str, args)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc
