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
def dry_runs(tmp_path_factory) -> dict:
    """Every dry run of this module in ONE child process (tests/recipe_batch.py: one start-up instead
    of three): the smollm2 dry runs, the compare dry run and the occupied-folder launches, all on one
    empty cache folder (``RLTF_CACHE_DIR``, with no package index) that none of them may create.
    ``{"cache": ..., "smollm2": (root, {recipe: Done}), "compare": (out, Done), "occupied": {...}}``."""
    root = tmp_path_factory.mktemp("dry")
    cache = root / "cache"
    smollm2 = [(script, ["config=configs/smollm2-lora.yaml", "dry_run=true", f"output_dir={root / script / 'out'}"])
               for script in RECIPES]
    compare = [("compare.py", ["suite=smollm2", "dry_run=true", f"output_dir={root / 'compare' / 'out'}"])]
    folders = {name: _occupied(tmp_path_factory.mktemp(f"occupied-{name}")) for name in LAUNCHES}
    occupied = [(script, [*_occupied_args(config, folders[name]), "dry_run=true", *extra])
                for name, (script, config) in LAUNCHES.items() for extra in ([], ["overwrite=true"])]
    startup, done = run_recipes([*smollm2, *compare, *occupied],
                                {**child_env(), **OFFLINE, "RLTF_CACHE_DIR": str(cache), **NO_INDEX})
    assert startup.stdout == startup.stderr == "", startup
    n = len(RECIPES)
    return {"cache": cache, "smollm2": (root, dict(zip(RECIPES, done[:n]))), "compare": (root / "compare", done[n]),
            "occupied": {name: (folders[name], done[n + 1 + 2 * i], done[n + 2 + 2 * i])
                         for i, name in enumerate(LAUNCHES)}}


@pytest.fixture(scope="module")
def smollm2_dry_runs(dry_runs) -> tuple[Path, dict]:
    """``(the empty cache's folder, {recipe: its dry run of smollm2})``, each into its own output folder."""
    return dry_runs["smollm2"]


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


def test_compare_dry_run_runs_and_writes_nothing(dry_runs):
    folder, done = dry_runs["compare"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "train/rltf.py" in done.stdout and not (folder / "out").exists() and not dry_runs["cache"].exists()


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
def occupied_dry_runs(dry_runs) -> dict:
    """``{launch: (its occupied run folder, its dry run there, the same with overwrite=true)}``, each
    launch on a folder of its own, each refusal before its ``overwrite=true`` run."""
    return dry_runs["occupied"]


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
