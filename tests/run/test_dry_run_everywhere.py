"""Issue #38 item 5: ``dry_run=true`` in every recipe loads, fetches and writes nothing, and names a
run folder that already holds a run with the launch's own refusal (one line, exit 2: the launch
would fail). Real ``python train/<recipe>.py`` processes on real folders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.recipe_batch import run_recipes
from tests.two_processes import child_env

REPO = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}
NO_INDEX = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}


def _recipe(script: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, f"train/{script}", *args], cwd=REPO, capture_output=True, text=True,
                          env={**child_env(), **OFFLINE, **env}, timeout=600)


RECIPES = ["rltf.py", "sft.py", "evaluate.py", "grpo.py"]


@pytest.fixture(scope="module")
def smollm2_dry_runs(tmp_path_factory) -> tuple[Path, dict]:
    """``(the empty cache, {recipe: its dry run of smollm2})``, every recipe in one child process
    (tests/recipe_batch.py: one start-up instead of four), each into its own output folder."""
    root = tmp_path_factory.mktemp("smollm2-dry")
    startup, done = run_recipes([(script, ["config=configs/smollm2-lora.yaml", "dry_run=true",
                                           f"output_dir={root / script / 'out'}"]) for script in RECIPES],
                                {**child_env(), **OFFLINE, "RLTF_CACHE_DIR": str(root / "cache"), **NO_INDEX})
    assert startup.stdout == startup.stderr == "", startup
    return root, dict(zip(RECIPES, done))


@pytest.mark.parametrize("script", RECIPES)
def test_dry_run_of_smollm2_on_an_empty_cache_fetches_and_writes_nothing(smollm2_dry_runs, script):
    root, runs = smollm2_dry_runs
    cache, out, done = root / "cache", root / script / "out", runs[script]
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


LAUNCHES = {"rltf": ("rltf.py", "configs/default.yaml"), "sft": ("sft.py", "configs/default.yaml"),
            "grpo": ("grpo.py", "configs/smollm2-lora.yaml"), "rltf-flow": ("rltf.py", "configs/travel-mtp.yaml")}


def _occupied(root: Path) -> Path:
    """``<root>/out/held``: a run folder holding an earlier run's results."""
    run_dir = root / "out" / "held"
    run_dir.mkdir(parents=True)
    (run_dir / "results.json").write_text("{}\n")
    return run_dir


def _occupied_args(config: str, run_dir: Path) -> list[str]:
    return [f"config={config}", f"output_dir={run_dir.parent}", "run_name=held"]


@pytest.fixture(scope="module")
def occupied_dry_runs(tmp_path_factory) -> dict:
    """``{launch: (its occupied run folder, its dry run there, the same with overwrite=true)}``, each
    launch on a folder of its own, the eight dry runs in one child process (tests/recipe_batch.py:
    one start-up instead of eight), each refusal before its ``overwrite=true`` run."""
    folders = {name: _occupied(tmp_path_factory.mktemp(f"occupied-{name}")) for name in LAUNCHES}
    cases = [(script, [*_occupied_args(config, folders[name]), "dry_run=true", *extra])
             for name, (script, config) in LAUNCHES.items() for extra in ([], ["overwrite=true"])]
    startup, done = run_recipes(cases, {**child_env(), **OFFLINE})
    assert startup.stdout == startup.stderr == "", startup
    return {name: (folders[name], done[2 * i], done[2 * i + 1]) for i, name in enumerate(LAUNCHES)}


def _refusal(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    (line,) = [x for x in done.stderr.splitlines() if x.strip()]
    return line


@pytest.mark.parametrize("name", list(LAUNCHES))
def test_dry_run_names_an_occupied_run_folder_like_the_launch(occupied_dry_runs, name):
    occupied, refused, ok = occupied_dry_runs[name]
    line = _refusal(refused)
    assert line == (f"error: run folder {occupied} already holds a run (results.json); continue it with resume=true, "
                    "pick another run_name=..., or replace it with overwrite=true")
    assert ok.returncode == 0 and "dry run of" in ok.stdout, ok.stderr[-3000:]
    # touched nothing (the refusal), and overwrite=true deletes only at launch
    assert sorted(p.name for p in occupied.iterdir()) == ["results.json"]
    script, config = LAUNCHES[name]
    if script == "sft.py":  # the real launch (a process of its own) refuses with the very same line
        assert _refusal(_recipe(script, *_occupied_args(config, occupied))) == line
