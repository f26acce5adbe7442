"""The travel commands' data options (--database, --queries, --split) in real subprocesses: loading
errors are one line on stderr with exit status 2; the hub-format files run sole-planning alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs.travel.test_hub_formats import hub_queries, record, write_hub_dir

REPO = Path(__file__).resolve().parents[3]


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def flows_here(capsys, *args: str) -> subprocess.CompletedProcess:
    """``python -m rltf.flows.evaluate *args`` without the process: its ``__main__`` block
    (``run_cli(main, args)``) called here, for a refusal's exit status and stderr (issue #52 item 2: ~8
    CPU s of imports fewer); the hub-files test below runs the command as a subprocess."""
    from rltf.flows.evaluate import main
    from rltf.run.cli import run_cli

    capsys.readouterr()
    code = 0
    try:
        run_cli(main, list(args))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out.out, out.err)


def one_line_error(p: subprocess.CompletedProcess, *needles: str) -> str:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (p.returncode, p.stderr[-800:])
    assert all(n in lines[0] for n in needles), lines[0]
    return lines[0]


@pytest.mark.parametrize("command", ["envs.travel.solver", "envs.travel.sandbox"])
def test_loading_errors_are_one_line_exit_2(tmp_path, command):
    one_line_error(run(command, "--database", str(tmp_path / "nowhere")), "nowhere", "does not exist")
    one_line_error(run(command, "--queries", str(tmp_path / "missing.csv")), "missing.csv", "does not exist")
    rows = [record(q) for q in hub_queries()["validation"][:2]]
    rows[1]["date"] = "2022-03-16"
    (tmp_path / "validation.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    one_line_error(run(command, "--queries", str(tmp_path / "validation.jsonl")), "row 1", "'date'", "expected")
    one_line_error(run(command, "--queries", str(tmp_path / "validation.jsonl"), "--split", "dev"), "dev")


def test_database_folder_errors_name_the_file(tmp_path):
    (tmp_path / "db" / "restaurants").mkdir(parents=True)
    one_line_error(run("envs.travel.solver", "--database", str(tmp_path / "db")), "clean_accommodations_2022.csv")


def test_solver_runs_sole_planning_from_the_hub_files_alone(tmp_path):
    hub = write_hub_dir(tmp_path / "hub")
    p = run("envs.travel.solver", "--queries", str(hub), "--split", "validation:re-split:test")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "sole-planning" in p.stdout and p.stdout.strip().splitlines()[-1].startswith("solver final pass rate: 1.000")
    p = run("envs.travel.sandbox", "--queries", str(hub), "--split", "test", "--database", "reference_information",
            "--export", str(tmp_path / "out"), "--no-plans")
    assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "out" / "queries" / "test.csv").is_file()
    assert f"({len(hub_queries()['test'])})" in p.stdout or f": {len(hub_queries()['test'])}" in p.stdout


def test_the_flows_command_reports_a_bad_database_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    p = flows_here(capsys, "config=configs/travel-mtp.yaml", f"env.travel.database_dir={tmp_path / 'nowhere'}")
    one_line_error(p, "env.travel.database_dir", "nowhere", "does not exist")


def test_the_flows_command_runs_from_the_hub_files_alone(tmp_path, capsys, monkeypatch):
    hub = write_hub_dir(tmp_path / "hub")
    common = ("rltf.flows.evaluate", "config=configs/travel-mtp.yaml", "env.travel.database_dir=reference_information",
              f"env.travel.queries_source={hub}", "flow.limit=2", f"output_dir={tmp_path / 'runs'}",
              f"planner.embedded.dir={tmp_path / 'embedded'}")  # not the working directory's checkpoints/
    p = run(*common, "flow.splits=[validation:re-split:test]", "run_name=sole")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "validation:re-split:test" in p.stdout and p.stdout.strip().splitlines()[-1].startswith(
        "held-out final pass:") and "solver=1.0000" in p.stdout
    # "test" is the hub's test split, which this config (a re-split of validation) does not hold
    monkeypatch.chdir(REPO)
    one_line_error(flows_here(capsys, *common[1:], "flow.splits=[test]", "run_name=test"), "flow.splits",
                   "validation:re-split:test")
