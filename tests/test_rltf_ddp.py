"""Two CPU processes (torchrun + gloo): tasks are sharded, gradients averaged, only rank 0 writes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_two_process_cpu_training(tmp_path):
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
           str(ROOT / "tests" / "ddp_worker.py"), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["world"] == r1["world"] == 2
    assert r0["params"] == r1["params"] and r0["sum"] == r1["sum"]  # gradients were synchronised
    assert all(a != b for a, b in zip(r0["tasks"], r1["tasks"]))  # each rank had its own shard
    ckpts = sorted(p.name for p in (tmp_path / "ddp" / "rltf").iterdir())
    assert ckpts == ["checkpoint-3", "latest"]  # written once, by rank 0, atomically (no temp dirs left)
