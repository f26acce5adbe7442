"""Issue 52 item 9: what a newcomer sees on the README's first commands is explained where they meet it
(accelerate's "defaults used" block under the Quickstart's command, the docs theme's end-of-life banner
under the docs commands), and ``benchmarks/readme_figures.py`` records each run's CPU seconds (cores are
shared: a run's wall time says more about the other jobs than about the run)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks import readme_figures as rf
from tests.benchmarks.test_readme_figures import COLUMNS, scores, write_run

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_quickstart_explains_the_accelerate_defaults_block_where_it_appears():
    quick = _section("Quickstart")
    first = quick.index("accelerate launch train/rltf.py\n```")
    block = quick.index("had defaults used instead")
    assert first < block < quick.index("A planner that reads")  # right under the first command
    assert "cp -n configs/accelerate/default.yaml ~/.cache/huggingface/accelerate/default_config.yaml" in quick
    assert "--config_file configs/accelerate/default.yaml" in quick
    assert README.count("had defaults used instead") == 1  # explained once


def test_the_docs_commands_explain_the_theme_banner():
    docs = _section("Documentation")
    assert "NO_MKDOCS_2_WARNING=1" in docs and re.search(r"end of life", docs)


def test_readme_figures_records_cpu_seconds_beside_the_wall_seconds(tmp_path):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        results = write_run(runs, seed, scores(0.66, 0.7))
        if seed == 0:  # a run this script made (run_seed writes it); seed 1 was made another way
            (results.parent / rf.CPU_FILE).write_text(json.dumps({"cpu_s": 57.4}))
    data = {"columns": COLUMNS, "spread": "mean ± sample std", "machines": []}
    pins = {}
    (m,) = rf.record(data, {0: runs / "readme-seed0" / "results.json", 1: runs / "readme-seed1" / "results.json"},
                     pins, source="test")["machines"]
    assert m["cpu_seconds"] == {"0": 57} and m["seconds"] == {"0": 150, "1": 151}
    assert "~100 CPU s each" in rf.__doc__ and "~3 CPU min" not in rf.__doc__


def test_the_main_job_page_says_its_seconds_are_wall_time_and_what_a_run_costs_in_cpu():
    page = (ROOT / "docs" / "results" / "main-job.md").read_text()
    assert "| rltf step | wall s | CPU s |" in page and "| rltf step | seconds |" not in page
    assert re.search(r"about \d+ CPU s: seeds 0 and 1 rerun", page)
