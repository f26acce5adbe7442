"""The examples run (issue 49): ``examples/minimal_env.py`` is a whole env on ``envs.base.RLTFEnvBase``
(under 100 lines) that passes rltf's env checker and Gymnasium's ``check_env`` and trains from the
command line by import path (``env.name=examples.minimal_env:spec``); ``examples/rltf_minimal.py``, the
one-page RL loop, runs as a script and learns its train tasks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs import registry
from envs.checker import check_rltf_env
from examples.minimal_env import BackwardsEnv, spec
from rltf.planners.tokenizer import train_plan_tokenizer

ROOT = Path(__file__).resolve().parents[2]
TINY = ["planner.embedded.d_model=32", "planner.embedded.d_ff=64", "planner.embedded.num_layers=1",
        "planner.embedded.num_heads=2", "planner.embedded.vocab_size=300", "sft.epochs=2", "sft.batch_size=8",
        "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=2", "rltf.checkpoint_every=2",
        "eval.num_beams=2", "eval.splits=[test]", "logging.progress_bar=false", "logging.report_to=none"]


def _run(args: list[str], timeout: int = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_the_minimal_env_is_small_and_built_on_the_base_class():
    source = (ROOT / "examples" / "minimal_env.py").read_text()
    assert len(source.splitlines()) < 100
    own = {k for k, v in vars(BackwardsEnv).items() if callable(v) and not k.startswith("_")}
    assert own == {"tasks", "grammar", "reward_plans", "format_plan", "plan_instructions"}  # the base does the rest


def test_the_minimal_env_passes_rltfs_checker_and_gymnasiums():
    try:
        train, held_out = envs.make_train_and_held_out({"name": "examples.minimal_env:spec", "seed": 1})
        tokenizer = train_plan_tokenizer(train.tokenizer_texts(), vocab_size=300)
        check_rltf_env(train, tokenizer)
        check_rltf_env(held_out, tokenizer)
        assert train.oracle_plans(train.tasks()) is None and train.table_columns(train.tasks(), {}) == {}
        with pytest.warns(UserWarning, match="alternative render modes"):  # (made without gym.make: no spec)
            check_env(BackwardsEnv(0, "train"))
    finally:
        registry.unregister(spec().name)


def test_the_minimal_env_trains_from_the_command_line(tmp_path):
    done = _run(["train/rltf.py", "env.name=examples.minimal_env:spec", f"output_dir={tmp_path}", "run_name=bw",
                 f"planner.embedded.dir={tmp_path / 'emb'}", *TINY])
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("held-out overall: ") and last.endswith(" oracle=n/a"), last
    assert "env:\n  name: examples.minimal_env:spec\n  seed: 0\n" in (tmp_path / "bw" / "config.yaml").read_text()
    assert (tmp_path / "bw" / "results.json").is_file()


def test_the_one_page_loop_runs_and_learns_its_train_tasks():
    done = _run(["examples/rltf_minimal.py"])
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    before, after = (float(line.split()[2]) for line in (lines[0], lines[-1]))  # "before: train x ...", "after: ..."
    assert lines[0].startswith("before: train") and lines[-1].startswith("after:  train")
    assert before < 0.5 < 0.9 <= after <= 1.0, lines
