"""Issue #38 item 4: hostile inputs are one line naming the value or file, never a traceback.

A pickled ``pytorch_model.bin`` in a planner folder, a control character in any override, a trace
file nested too deeply or holding a 5,000-digit number, Ctrl-C of ``train/compare.py`` (one line,
exit 130, its run ended first). Real files and real ``python train/<recipe>.py`` processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.recipe_batch import run_recipes
from tests.two_processes import child_env, default_sigint

REPO = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = [x for x in done.stderr.splitlines() if x.strip()]
    assert line.startswith("error: ")
    return line


# ------------------------------------------------------------------ a pickled planner file
class _RunsCode:
    def __reduce__(self):
        return (print, ("this pickle runs code",))


def _pickled_planner(folder: Path) -> Path:
    """A saved tiny planner whose weights are a ``pytorch_model.bin`` pickle that runs code when loaded
    without ``weights_only=True``."""
    import torch

    from tests.toy_run import make_planner

    folder = make_planner().save_pretrained(folder)
    (folder / "model.safetensors").unlink()
    torch.save({"shared.weight": _RunsCode()}, folder / "pytorch_model.bin")
    return folder


# ------------------------------------------------------------------ a control character in an override
RECIPES = ["rltf.py", "sft.py", "evaluate.py", "grpo.py"]


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict:
    """The refusals of this module's recipe command lines, all in one child process (tests/recipe_batch.py:
    one start-up instead of three): each recipe given ``run_name=a\\x01b``, ``compare.py`` given
    ``seeds=\\x01``, and ``evaluate.py`` given the pickled planner; what importing the recipes printed
    is empty. ``{"control": {recipe: Done}, "compare": Done, "pickled": (folder, Done)}``."""
    out = tmp_path_factory.mktemp("control")
    pickled = _pickled_planner(tmp_path_factory.mktemp("pickled") / "planner")
    cases = [(script, ["run_name=a\x01b", "dry_run=true", f"output_dir={out / script}"]) for script in RECIPES]
    cases += [("compare.py", ["suite=smollm2", "seeds=\x01", "dry_run=true"]),
              ("evaluate.py", [f"planner.model={pickled}", "eval.schemas=[finetuned]",
                               f"output_dir={out / 'pickled'}"])]
    startup, done = run_recipes(cases, {**child_env(), **OFFLINE})
    assert startup.returncode == 0 and startup.stdout == startup.stderr == "", startup
    return {"control": dict(zip(RECIPES, done)), "compare": done[len(RECIPES)], "pickled": (pickled, done[-1])}


def test_a_pickled_pytorch_model_bin_is_one_line_naming_it(refusals):
    folder, done = refusals["pickled"]
    line = _one_error_line(done)
    assert str(folder / "pytorch_model.bin") in line and "weights_only=True" in line
    assert "weights_only=False" not in line and "this pickle runs code" not in line + done.stdout


@pytest.mark.parametrize("script", RECIPES)
def test_a_control_character_in_an_override_is_one_line(refusals, script):
    line = _one_error_line(refusals["control"][script])
    assert "run_name=a\\x01b" in line and "control characters" in line


def test_a_control_character_in_a_compare_argument_is_one_line(refusals):
    line = _one_error_line(refusals["compare"])
    assert "seeds=\\x01" in line


# ------------------------------------------------------------------ hostile trace files
@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000, '{"score": ' + "7" * 5000 + "}"],
                         ids=["nested too deeply", "a 5000-digit number"])
def test_a_hostile_trace_file_names_itself(tmp_path, content):
    from rltf.flows.engine.trace import load_trace
    from rltf.run.tracking import DamagedFileError

    path = tmp_path / "trace.json"
    path.write_text(content)
    with pytest.raises(DamagedFileError) as info:
        load_trace(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message and len(message) < 600


# ------------------------------------------------------------------ Ctrl-C of a comparison
CHILD_RUN = """
import os, signal, sys, time
from pathlib import Path
marks = Path(os.environ["MARKS"])
def stop(signum, frame):
    (marks / "stopped").write_text(str(signum))
    sys.exit(128 + signum)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
(marks / "pid").write_text(str(os.getpid()))
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, OSError):
        return False


def test_sigint_of_compare_is_one_line_exit_130_and_ends_its_run(tmp_path):
    script = tmp_path / "child_run.py"
    script.write_text(CHILD_RUN)
    marks = tmp_path / "marks"
    marks.mkdir()
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"name: s\nseeds: 1\ncommon: []\narms:\n  - name: a\n    script: {script}\n")
    compare = subprocess.Popen([sys.executable, "train/compare.py", f"suite={suite}", f"output_dir={tmp_path}"],
                               cwd=REPO, env={**child_env(), **OFFLINE, "MARKS": str(marks)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    try:
        end = time.monotonic() + 120
        while not ((marks / "pid").is_file() and (marks / "pid").read_text()):
            assert time.monotonic() < end and compare.poll() is None, "the run did not start"
            time.sleep(0.05)
        child = int((marks / "pid").read_text())
        compare.send_signal(signal.SIGINT)
        _, stderr = compare.communicate(timeout=60)
    finally:
        if compare.poll() is None:
            compare.kill()
    assert compare.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    (line,) = [x for x in stderr.splitlines() if x.strip()]
    assert line.startswith("error: interrupted (SIGINT)")
    assert (marks / "stopped").read_text() == str(int(signal.SIGINT)) and not _alive(child)
