"""Sharded training: two CPU processes (torchrun + gloo) train, checkpoint and resume with FSDP2
(parameters sharded) or DeepSpeed ZeRO-2 (optimiser and gradients partitioned; skipped where
deepspeed is not installed), and match the replicated (DDP-style) trainer."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from accelerate import Accelerator

from rltf.run.distributed import sharding_for
from tests.two_processes import torchrun2

ROOT = Path(__file__).resolve().parents[2]


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float(np.abs(np.asarray(a[k]) - np.asarray(b[k])).max()) for k in a)


def _run_worker(tmp_path, mode: str, lora: bool) -> tuple[dict, dict]:
    torchrun2("tests/sharded_worker.py", tmp_path, mode, *(["--lora"] if lora else []), cpu=mode == "fsdp")
    return tuple(json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))


def _check(r0: dict, r1: dict, lora: bool, tol: float) -> None:
    """``tol``: how close the sharded run's weights come to the replicated run's, as a fraction of
    how far training moved them (~3e-2: 3 Adam steps of lr 1e-2). Sharded and replicated gradients
    are sums in other orders, float32 agreement to ~1e-6 relative, which Adam can amplify for
    gradients near 0; seen: < 2e-6 for FSDP2 with any ATEN_CPU_CAPABILITY, i.e. < 1e-4 of the movement."""
    assert r0["world"] == r1["world"] == 2
    w = {k: v["weights"] for k, v in r0.items() if isinstance(v, dict) and "weights" in v}
    trained = [k for k in w["initial"] if "lora" in k] if lora else list(w["initial"])
    moved = _max_diff({k: w["sharded"][k] for k in trained}, {k: w["initial"][k] for k in trained})
    assert moved > 1e-3  # it learned something
    assert _max_diff(w["sharded"], w["replicated"]) < tol * moved  # same maths as explicit gradient averaging
    assert _max_diff(w["sharded"], w["resumed"]) == 0.0  # checkpoint-2 + step 3 == the uninterrupted run
    assert _max_diff(w["sharded"], w["reloaded"]) == 0.0  # save_pretrained wrote the full weights
    assert r0["sharded"]["rewards"] == r0["replicated"]["rewards"]


@pytest.fixture(scope="module")
def fsdp_runs(tmp_path_factory) -> dict:
    """``{lora: (rank 0's report, rank 1's)}``: the full-weights and the LoRA runs in ONE two-process
    launch (``--both``: one torchrun start-up instead of two), each into a folder of its own."""
    out = tmp_path_factory.mktemp("fsdp")
    torchrun2("tests/sharded_worker.py", out, "fsdp", "--both", cpu=True)
    return {lora: tuple(json.loads((out / sub / f"rank{r}.json").read_text()) for r in (0, 1))
            for lora, sub in ((False, "full"), (True, "lora-kl"))}


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora-kl"])
def test_fsdp_training_matches_replicated_and_resumes_exactly(fsdp_runs, lora):
    r0, r1 = fsdp_runs[lora]
    _check(r0, r1, lora, 1e-3)
    # each process held half of every sharded parameter (dim 0), the replicated run all of it
    name = "shared.weight" if not lora else next(k for k in r0["sharded"]["shards"] if "lora_A" in k)
    full_rows = r0["replicated"]["shards"][name][0]
    assert r0["sharded"]["shards"][name][0] + r1["sharded"]["shards"][name][0] == full_rows
    assert r0["sharded"]["shards"][name][0] < full_rows


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed")
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora-kl"])
def test_deepspeed_zero2_training_matches_replicated_and_resumes_exactly(tmp_path, lora):
    r0, r1 = _run_worker(tmp_path, "deepspeed", lora)
    _check(r0, r1, lora, 0.03)  # as loose as before (1e-3 absolute): not run where deepspeed is missing


def test_launch_settings_choose_the_sharding(monkeypatch):
    acc = Accelerator(cpu=True)
    assert sharding_for(acc).kind == "replicated"
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_VERSION", "2")
    assert sharding_for(acc).kind == "replicated"  # one process: nothing to shard
    monkeypatch.setenv("FSDP_VERSION", "1")
    with pytest.raises(ValueError, match="FSDP version 1.*fsdp_version: 2"):
        sharding_for(acc)
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")  # asked for, but accelerate runs without it
    with pytest.raises(ValueError, match="did not start DeepSpeed"):
        sharding_for(acc)


MAIN_JOB = {
    "fsdp": ({"ACCELERATE_USE_CPU": "true", "ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2"}, "train/rltf.py"),
    "deepspeed": ({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2"},
                  "tests/deepspeed_launch.py"),
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", [
    "fsdp",
    pytest.param("deepspeed", marks=pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                                       reason="deepspeed is not installed")),
])
def test_main_job_sharded_runs_and_resumes(tmp_path, mode):
    """``train/rltf.py`` itself, launched as accelerate's FSDP2 / ZeRO-2 config would launch it, on two
    CPU processes: every stage (zero/few-shot, SFT, RLTF, evaluation); then ``resume=true`` reloads
    the SFT planner and the last RLTF checkpoint and gives the same table."""
    from tests.stages.test_main_job import TINY

    launch_env, script = MAIN_JOB[mode]
    env = {**os.environ, **launch_env, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    args = [f"output_dir={tmp_path}", "run_name=tiny", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
           str(ROOT / script), *args]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert f"{mode})" in first.stdout  # the planner line names the sharding
    last = first.stdout.strip().splitlines()[-1]
    assert last.startswith("held-out overall: zero=") and " rltf=" in last
    assert (tmp_path / "tiny" / "sft" / "model.safetensors").exists()
    again = subprocess.run(cmd + ["resume=true"], env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed RLTF at step 2" in again.stdout
    assert again.stdout.strip().splitlines()[-1] == last


def test_kl_to_a_full_copy_is_refused_when_sharded(tmp_path):
    """A KL reference would be a second sharded copy of a full model: refused, naming the fix."""
    from rltf.config.loading import load_config
    from rltf.planners.planner import Planner
    from rltf.rl.trainer import RLTFTrainer
    from rltf.run.distributed import Sharding
    from tests.tiny_models import tiny_t5, unigram_tokenizer
    from tests.toy_env import toy_env

    acc = Accelerator(cpu=True)
    tok = unigram_tokenizer()
    cfg = load_config([f"output_dir={tmp_path}", "rltf.kl_coef=0.1", "logging.progress_bar=false"])
    with pytest.raises(ValueError, match="kl_coef=0.1.*LoRA"):
        RLTFTrainer(cfg, Planner(tiny_t5(tok), tok, True, "tiny"), toy_env(), acc, sharding=Sharding("fsdp", acc))
