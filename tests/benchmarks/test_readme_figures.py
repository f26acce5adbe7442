"""benchmarks/readme_figures.py: the main-job figures table (docs/results/main-job.md, generated from
benchmarks/results/main-job/figures.json; the README's until issue 35) parses, and fresh runs are
checked against its stated spread (runs here: results.json files as the main job writes them)."""

import json
from pathlib import Path

import pytest

from benchmarks import readme_figures as rf

REPO = Path(__file__).resolve().parents[2]

TABLE = f"""text before
{rf.MARKER}
| seeds 0, 1, 2 | finetuned | rltf |
|---|---|---|
| mean ± std | 0.6700 ± 0.0100 | 0.7300 ± 0.0200 |
"""


def write_run(runs_dir: Path, seed: int, finetuned: float, rltf: float) -> None:
    folder = runs_dir / f"readme-seed{seed}"
    folder.mkdir(parents=True)
    rows = {"finetuned": {"overall": finetuned}, "rltf (best validation, step 50)": {"overall": rltf}}
    (folder / "results.json").write_text(json.dumps({"table": {"rows": rows}}))


def test_the_docs_state_the_main_job_figures_as_mean_and_std_over_seeds():
    assert rf.PAGE == REPO / "docs" / "results" / "main-job.md"
    stated = rf.read_stated(rf.PAGE.read_text())
    assert len(stated.seeds) >= 3
    assert {"finetuned", "rltf"} <= set(stated.figures)
    for mean, std in stated.figures.values():
        assert 0 <= mean <= 1 and 0 <= std < 0.5


def test_within_and_outside_the_stated_spread(tmp_path):
    stated = rf.read_stated(TABLE)
    assert stated.seeds == (0, 1, 2) and stated.figures["rltf"] == (0.73, 0.02)
    for seed, (ft, rl) in enumerate([(0.66, 0.70), (0.68, 0.74), (0.67, 0.75)]):
        write_run(tmp_path, seed, ft, rl)
    runs = {s: rf.held_out(rf.run_seed(s, tmp_path, "python")) for s in stated.seeds}  # reused, not run
    verdicts = {name: ok for name, ok, _ in rf.compare(stated, runs)}
    assert verdicts == {"finetuned": True, "rltf": True}
    runs[2]["finetuned"] = 0.75  # mean 0.6967: 0.0267 above the stated 0.67 ± 0.01
    verdicts = {name: ok for name, ok, _ in rf.compare(stated, runs)}
    assert verdicts == {"finetuned": False, "rltf": True}


def test_main_exit_status_and_lines(tmp_path, capsys):
    (tmp_path / "main-job.md").write_text(TABLE)
    for seed in range(3):
        write_run(tmp_path / "runs", seed, 0.67, 0.80)
    code = rf.main(["--page", str(tmp_path / "main-job.md"), "--runs-dir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert code == 1 and "OUT " in out and "outside the stated spread: rltf" in out


@pytest.mark.parametrize("text, match", [
    ("no table here", "no '<!-- readme_figures: main job -->' marker"),
    (f"{rf.MARKER}\n| seeds 0, 1 | rltf |\n|---|---|\n| mean ± std | 0.73 |\n", "expected 'mean ± std'"),
    (f"{rf.MARKER}\n| schema | rltf |\n|---|---|\n| mean ± std | 0.7 ± 0.1 |\n", "should name the seeds"),
])
def test_a_malformed_table_is_one_clear_error(text, match):
    with pytest.raises(rf.FiguresError, match=match):
        rf.read_stated(text)


def test_unreadable_results_name_the_file(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text("{not json")
    with pytest.raises(rf.FiguresError, match=r"results\.json: JSONDecodeError"):
        rf.held_out(bad)
