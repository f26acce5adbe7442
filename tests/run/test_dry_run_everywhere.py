"""Issue #38 item 5: ``dry_run=true`` in every recipe loads, fetches and writes nothing, and names a
run folder that already holds a run with the launch's own refusal (one line, exit 2: the launch
would fail). Real ``python train/<recipe>.py`` processes on real folders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.two_processes import child_env

REPO = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}
NO_INDEX = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}


def _recipe(script: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, f"train/{script}", *args], cwd=REPO, capture_output=True, text=True,
                          env={**child_env(), **OFFLINE, **env}, timeout=600)


@pytest.mark.parametrize("script", ["rltf.py", "sft.py", "evaluate.py", "grpo.py"])
def test_dry_run_of_smollm2_on_an_empty_cache_fetches_and_writes_nothing(tmp_path, script):
    cache, out = tmp_path / "cache", tmp_path / "out"
    done = _recipe(script, "config=configs/smollm2-lora.yaml", "dry_run=true", f"output_dir={out}",
                   RLTF_CACHE_DIR=str(cache), **NO_INDEX)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dry run of" in done.stdout and "nothing was loaded" in done.stdout
    assert "smollm2" in done.stdout
    if script in ("rltf.py", "evaluate.py"):  # these two describe the planner source in full
        assert "not converted yet" in done.stdout
    assert "fetching" not in done.stdout + done.stderr
    assert not cache.exists() and not out.exists()  # nothing fetched, converted or written


def test_compare_dry_run_runs_and_writes_nothing(tmp_path):
    done = _recipe("compare.py", "suite=smollm2", "dry_run=true", f"output_dir={tmp_path / 'out'}",
                   RLTF_CACHE_DIR=str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "train/rltf.py" in done.stdout and not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


@pytest.fixture
def occupied(tmp_path):
    """``<tmp>/out/held``: a run folder holding an earlier run's results."""
    run_dir = tmp_path / "out" / "held"
    run_dir.mkdir(parents=True)
    (run_dir / "results.json").write_text("{}\n")
    return run_dir


def _refusal(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    (line,) = [x for x in done.stderr.splitlines() if x.strip()]
    return line


@pytest.mark.parametrize("script,config", [("rltf.py", "configs/default.yaml"), ("sft.py", "configs/default.yaml"),
                                           ("grpo.py", "configs/smollm2-lora.yaml"),
                                           ("rltf.py", "configs/travel-mtp.yaml")],
                         ids=["rltf", "sft", "grpo", "rltf-flow"])
def test_dry_run_names_an_occupied_run_folder_like_the_launch(occupied, script, config):
    args = [f"config={config}", f"output_dir={occupied.parent}", "run_name=held"]
    line = _refusal(_recipe(script, *args, "dry_run=true"))
    assert line == (f"error: run folder {occupied} already holds a run (results.json); continue it with resume=true, "
                    "pick another run_name=..., or replace it with overwrite=true")
    assert sorted(p.name for p in occupied.iterdir()) == ["results.json"]  # touched nothing
    ok = _recipe(script, *args, "dry_run=true", "overwrite=true")
    assert ok.returncode == 0 and "dry run of" in ok.stdout, ok.stderr[-3000:]
    assert sorted(p.name for p in occupied.iterdir()) == ["results.json"]  # overwrite=true deletes only at launch
    if script == "sft.py":  # the real launch refuses with the very same line
        assert _refusal(_recipe(script, *args)) == line
