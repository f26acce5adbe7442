"""A user's own env from the command line (issue 38): ``env.name=package.module:callable`` imports the
user's package (here from ``PYTHONPATH``), registers the ``EnvSpec`` the callable returns, and
``python train/rltf.py`` validates (``dry_run=true``) and trains it end to end. An unknown name or an
import path that does not import is one ``error:`` line naming the value, exit status 2.

The example package is ``tests/envs/test_third_env.py``'s "sort three words" env, written to a folder
of its own as a user would keep it (``mypkg/envs.py`` with a factory ``sorting()``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envs import registry
from rltf.config.loading import ConfigError, load_config
from tests.recipe_batch import run_recipes

ROOT = Path(__file__).resolve().parents[2]
THIRD_ENV = Path(__file__).with_name("test_third_env.py")
ENV_NAME = "mypkg.envs:sorting"
HEADER = '''"""A user's own env: sort three words (copied from rltf's tests/envs/test_third_env.py)."""

import itertools
from dataclasses import dataclass

import numpy as np

from common.config_fields import bound_errors, num
from constrained_decoding.rows import RowLanguageGrammar, RowText, build_row_languages
from envs.base import RLTFEnvBase
from envs.registry import EnvSpec

'''
FACTORY = '''

def sorting() -> EnvSpec:
    """What env.name=mypkg.envs:sorting names: the env's spec (rltf registers it)."""
    return SPEC
'''


@pytest.fixture(scope="module")
def user_pkg(tmp_path_factory) -> Path:
    """A folder holding ``mypkg`` (its ``envs`` module: the third env's code and a factory)."""
    source = THIRD_ENV.read_text()
    start, end = source.index('NAME = "sorting"'), source.index("@pytest.fixture(scope=\"module\", autouse=True)")
    root = tmp_path_factory.mktemp("userpkg")
    (root / "mypkg").mkdir()
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "envs.py").write_text(HEADER + source[start:end].rstrip() + "\n" + FACTORY)
    return root


def _env(pkg: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pkg is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pkg), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               WANDB_MODE="offline")
    return env


def _rltf(args: list[str], pkg: Path | None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "train" / "rltf.py"), *args], env=_env(pkg), cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


TINY = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "planner.embedded.vocab_size=300",
        "sft.epochs=2", "sft.batch_size=8", "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2",
        "rltf.eval_every=2", "rltf.checkpoint_every=2", "eval.num_beams=2", "eval.splits=[test]",
        "logging.progress_bar=false", "logging.report_to=none"]


IMPORT_FAILURES = [
    ("nopkg_rltf_test.envs:sorting", "cannot import module 'nopkg_rltf_test.envs' (ModuleNotFoundError: "),
    ("mypkg.envs:nothing", "module 'mypkg.envs' has no attribute 'nothing'"),
    ("mypkg.envs:WORDS", "mypkg.envs:WORDS is a tuple; expected an EnvSpec or a callable returning one"),
]


@pytest.fixture(scope="module")
def dry_runs(user_pkg, tmp_path_factory) -> dict:
    """The dry runs below in one child process (tests/recipe_batch.py: one start-up instead of five), the
    user's folder on ``PYTHONPATH``: the unknown name first (before any import path registers a
    "sorting"), the user's env last, into a folder of its own. What importing the recipe printed is empty."""
    out = tmp_path_factory.mktemp("dry-out")
    cases = [["env.name=sorting", "dry_run=true"], *([f"env.name={v}", "dry_run=true"] for v, _ in IMPORT_FAILURES),
             [f"env.name={ENV_NAME}", "env.seed=2", "dry_run=true", f"output_dir={out}"]]
    startup, done = run_recipes([("rltf.py", args) for args in cases], _env(user_pkg), timeout=300)
    assert startup.stdout == startup.stderr == "", startup
    return {"unknown": done[0], "failures": done[1:-1], "user": (done[-1], out)}


def test_an_unknown_env_name_is_one_line_naming_the_import_path_form(dry_runs):
    done = dry_runs["unknown"]
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: bad value for 'env.name': 'sorting'; expected one of 'openagi', 'travel', "
                               "'pddl', or an import path 'package.module:callable'"), lines[0]


@pytest.mark.parametrize("case", range(len(IMPORT_FAILURES)), ids=[v for v, _ in IMPORT_FAILURES])
def test_an_import_path_that_fails_is_one_line_naming_it(dry_runs, case):
    (value, reason), done = IMPORT_FAILURES[case], dry_runs["failures"][case]
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: bad value for 'env.name': {value!r}; {reason}"), lines[0]


def test_a_dry_run_of_the_users_env_describes_it(dry_runs):
    done, tmp_path = dry_runs["user"]
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sorting three words, seed 2, 10 train tasks" in done.stdout, done.stdout
    assert not (tmp_path / "default").exists()  # a dry run writes nothing


@pytest.mark.slow  # a train/rltf.py subprocess: every stage on the tiny settings
def test_the_users_env_trains_through_train_rltf_py(user_pkg, tmp_path):
    done = _rltf([f"env.name={ENV_NAME}", f"output_dir={tmp_path}", "run_name=mine",
                  f"planner.embedded.dir={tmp_path / 'emb'}", *TINY], user_pkg)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("held-out overall: zero=n/a few=n/a finetuned=") and last.endswith(" oracle=n/a"), last
    table = json.loads((tmp_path / "mine" / "results.json").read_text())["table"]
    assert table["rows"]["reference"]["overall"] == 1.0  # the sorted words score 1
    saved = yaml.safe_load((tmp_path / "mine" / "config.yaml").read_text())
    assert saved["env"] == {"name": ENV_NAME, "seed": 0}  # the saved config loads the env again in a fresh process


def test_load_config_registers_the_env_of_an_import_path(user_pkg, monkeypatch):
    monkeypatch.syspath_prepend(str(user_pkg))
    try:
        cfg = load_config([f"env.name={ENV_NAME}", "env.seed=3"])
        assert cfg.env.name == "sorting" and cfg.env.seed == 3 and registry.origin("sorting") == ENV_NAME
        assert load_config([f"env.name={ENV_NAME}"]).env.seed == 0  # loading it again reuses the registration
        with pytest.raises(ConfigError, match=r"'env.seed': -1; expected an integer >= 0"):
            load_config([f"env.name={ENV_NAME}", "env.seed=-1"])
    finally:
        registry.unregister("sorting")
        for name in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
            del sys.modules[name]
