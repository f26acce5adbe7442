"""Issue 52 item 6: ``resume=true`` on a finished run, or after a kill that came after the last
validation, writes the same results: every block of ``results.json`` (the policy's per-task
diversity of the last validation included, which that run never measures again) and ``results.md``."""

from __future__ import annotations

import json

import pytest

from rltf.config.loading import load_config
from rltf.evaluation.diversity import LAST_FILE
from rltf.run.lock import release_run_folder
from tests.stages.test_main_job import TINY, _run_printing

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _results(run_dir) -> tuple[dict, str]:
    found = json.loads((run_dir / "results.json").read_text())
    return {k: v for k, v in found.items() if k not in ("seconds", "environment")}, (run_dir / "results.md").read_text()


def test_resume_keeps_every_block_of_the_results(tmp_path):
    from train.rltf import run

    args = [f"output_dir={tmp_path}", "run_name=r", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY,
            "eval.schemas=[finetuned,rltf]", "eval.diversity_samples=4", "eval.diversity_max_plans=50"]
    run_dir = tmp_path / "r"
    try:
        _run_printing(run, load_config(args))
        first, first_md = _results(run_dir)
        assert first["policy_diversity"]["last"]["tasks"] and (run_dir / "rltf" / LAST_FILE).is_file()
        _run_printing(run, load_config([*args, "resume=true"]))  # a finished run: no step, no validation
        assert _results(run_dir) == (first, first_md)
        for name in ("results.json", "results.md", "rewards.png"):  # a run killed before its report
            (run_dir / name).unlink()
        _run_printing(run, load_config([*args, "resume=true"]))
        assert _results(run_dir) == (first, first_md) and (run_dir / "rewards.png").is_file()
    finally:
        release_run_folder(run_dir)
