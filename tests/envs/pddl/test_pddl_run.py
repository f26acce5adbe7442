"""``python train/rltf.py env.name=pddl ...`` end to end at tiny sizes, and a folder of problems with a bad
file stopping a run in one line, exit status 2, with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TINY = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "planner.embedded.vocab_size=300",
        "sft.epochs=2", "sft.batch_size=8", "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2",
        "rltf.eval_every=2", "rltf.checkpoint_every=2", "eval.num_beams=2", "eval.splits=[test]",
        "logging.progress_bar=false", "logging.report_to=none"]
SMALL = ["env.name=pddl", "env.pddl.train_size=8", "env.pddl.validation_size=2", "env.pddl.test_size=3",
         "env.pddl.test_long_size=0", "env.pddl.max_plan_length=12"]


def _rltf(args: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "offline"}  # RLTF_CACHE_DIR: the tests' own (conftest.own_cache)
    return subprocess.run([sys.executable, str(ROOT / "train" / "rltf.py"), *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # a train/rltf.py subprocess: every stage on the tiny settings
def test_pddl_trains_end_to_end_through_train_rltf_py(tmp_path):
    done = _rltf([*SMALL, f"output_dir={tmp_path}", "run_name=bw", f"planner.embedded.dir={tmp_path / 'emb'}", *TINY])
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("held-out goal rate: zero=n/a few=n/a finetuned=") and last.endswith(" oracle=1.0000"), last
    results = json.loads((tmp_path / "bw" / "results.json").read_text())
    table = results["table"]
    assert results["data"]["grammar"] == "syntax"  # every result names its grammar
    assert table["rows"]["reference"]["goal rate"] == 1.0 and table["rows"]["oracle"]["goal rate"] == 1.0
    assert 0 <= table["rows"]["rltf"]["goal rate"] <= 1


def test_a_bad_problem_folder_stops_the_run_in_one_line_writing_nothing(tmp_path, folder):
    (folder / "instance-1.plan").write_text("(unstack b a)\n(teleport b c)\n")
    out = tmp_path / "out"
    done = _rltf(["env.name=pddl", f"env.pddl.problems={folder}", f"output_dir={out}", *TINY], timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"{folder / 'instance-1.plan'}:2: action 2 (teleport b c) is not an action of the problem" in lines[0]
    assert not out.exists()
