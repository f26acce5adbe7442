"""Two CPU processes (torchrun + gloo): tasks are sharded, gradients averaged, only rank 0 writes."""

import json
from pathlib import Path

import pytest

from tests.two_processes import torchrun2

ROOT = Path(__file__).resolve().parents[2]


RUNS = {"plain": [], "set": ["rltf.baseline=unordered_set", "rltf.k_samples=6"]}


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory) -> Path:
    """Both tests' runs in ONE two-process launch (``--runs``: one torchrun start-up instead of two),
    each into ``<folder>/<name>``."""
    out = tmp_path_factory.mktemp("ddp")
    torchrun2("tests/ddp_worker.py", out, "--runs", json.dumps(RUNS))
    return out


@pytest.mark.slow
def test_two_process_cpu_training(ddp_runs):
    tmp_path = ddp_runs / "plain"
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["world"] == r1["world"] == 2
    assert r0["params"] == r1["params"] and r0["sum"] == r1["sum"]  # gradients were synchronised
    assert all(a != b for a, b in zip(r0["tasks"], r1["tasks"]))  # each rank had its own shard
    ckpts = sorted(p.name for p in (tmp_path / "ddp" / "rltf").iterdir())
    assert ckpts == ["checkpoint-3", "latest"]  # written once, by rank 0, atomically (no temp dirs left)


@pytest.mark.slow
def test_two_processes_with_the_unordered_set_estimator(ddp_runs):
    """Distinct plans per task: each process weights its own tasks' sets after gathering every
    process's batch as objects (a set may hold fewer plans than k_samples: ragged shards); the
    processes end with the same weights."""
    r0, r1 = (json.loads((ddp_runs / "set" / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["params"] == r1["params"] and r0["sum"] == r1["sum"]
    assert all(a != b for a, b in zip(r0["tasks"], r1["tasks"]))
