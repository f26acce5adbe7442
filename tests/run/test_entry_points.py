"""Issue 16, entry points (rltf.run.cli): a user error is one line and exit status 2; a bug keeps
its traceback."""

from pathlib import Path

import pytest

from rltf.config.loading import ConfigError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_an_entry_point_prints_a_user_error_as_one_line_and_exits_2(tmp_path):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(root / "train" / "rltf.py"), "rltf.lr=-1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: bad value for 'rltf.lr': -1.0; expected a number > 0 and <= 1"]


@pytest.mark.parametrize("script", ["sft", "evaluate"])
def test_the_other_entry_points_share_the_wrapper(tmp_path, capsys, script):
    import importlib

    module = importlib.import_module(f"train.{script}")
    with pytest.raises(SystemExit) as exit_:
        module.run_cli(module.main, [f"output_dir={tmp_path}", "planner.model=/nonexistent/planner-dir"]
                       if script == "evaluate" else ["sft.epochs=-1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    assert (("'/nonexistent/planner-dir': no such directory" in err[0]) if script == "evaluate"
            else ("'sft.epochs'" in err[0]))


def test_run_cli_keeps_the_traceback_of_bugs_and_joins_message_lines(capsys):
    from rltf.run.cli import run_cli

    def bug(argv):
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        run_cli(bug, [])

    def bad(argv):
        raise ConfigError("first line\n  second line\n")

    with pytest.raises(SystemExit):
        run_cli(bad, [])
    assert capsys.readouterr().err == "error: first line second line\n"
    assert run_cli(lambda argv: argv, ["a=1"]) == ["a=1"]
