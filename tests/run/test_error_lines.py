"""Issue #52 item 4 at the command line: each refusal is ONE ``error:`` line and exit status 2 (no
traceback, no silent exit 0), the error line is the last line (an open progress bar is closed before
it), and Ctrl-C of ``train/rltf.py`` is one line saying to resume, exit status 130.

The refusals run as ``train/rltf.py`` command lines in one child process (tests/recipe_batch.py); the
messages themselves: tests/config/test_user_code_and_inputs.py."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.recipe_batch import run_recipes
from tests.two_processes import child_env, default_sigint

REPO = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}

pytestmark = pytest.mark.usefixtures("one_torch_thread")

USER_MODULES = {
    "exits_on_import": "import sys\nsys.exit(0)\n",
    "interrupts_on_import": "raise KeyboardInterrupt\n",
    "raises_on_import": "raise RuntimeError('tool module boom')\n",
}

CASES = {  # name: (arguments, what the one line holds)
    "env.name=sys:exit": (["env.name=sys:exit"], "'env.name': 'sys:exit'; calling sys:exit() raised SystemExit"),
    "env module exits": (["env.name=exits_on_import:SPEC"], "cannot import module 'exits_on_import' (SystemExit"),
    "env module interrupts": (["env.name=interrupts_on_import:SPEC"],
                              "cannot import module 'interrupts_on_import' (KeyboardInterrupt)"),
    "objective module exits": (["rltf.objective=exits_on_import:f"],
                               "'rltf.objective': 'exits_on_import:f'; cannot import module 'exits_on_import'"),
    "tool module raises": (["env.tools=[raises_on_import:register]"], "RuntimeError: tool module boom"),
    "tool module missing": (["env.tools=[nosuchmodule_rltf_test:register]"],
                            "cannot import module 'nosuchmodule_rltf_test'"),
    "run_name too long": (["run_name=" + "a" * 300], "at most 255 bytes"),
    "path too long": (["output_dir=/tmp/" + "/".join(["b" * 200] * 25)], "expected at most 3840"),
    "5000-deep list": (["run_name=" + "[" * 5000 + "]" * 5000], "nested more than"),
    "a million beams": (["eval.num_beams=1000000"], "<= 1024"),
    "a billion tasks": (["rltf.tasks_per_batch=1000000000"], "expected at most 1048576"),
    "lr 1e300": (["rltf.lr=1e300"], "'rltf.lr': 1e+300"),
    "a newline": (["run_name=a\nb"], "control characters"),
    "a secret": (["run_name=${oc.env:HOME}"], "env_interpolation=true"),
}


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("usercode")
    for name, code in USER_MODULES.items():
        (folder / f"{name}.py").write_text(code)
    out = tmp_path_factory.mktemp("out")
    env = {**child_env(), **OFFLINE}
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(folder)])
    cases = [("rltf.py", [*args, "dry_run=true", *([] if "output_dir" in args[0] else [f"output_dir={out}"])])
             for args, _ in CASES.values()]
    startup, done = run_recipes(cases, env, timeout=300)
    assert startup.returncode == 0 and startup.stdout == startup.stderr == "", startup
    return dict(zip(CASES, done))


@pytest.mark.parametrize("case", list(CASES))
def test_each_refusal_is_one_error_line_exit_2(refusals, case):
    done, expected = refusals[case], CASES[case][1]
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr and done.stdout == "", done.stderr[-3000:]
    (line,) = [x for x in done.stderr.splitlines() if x.strip()]
    assert line.startswith("error: ") and expected in line, line


# ------------------------------------------------------------------ the error line is the last line
def test_an_open_progress_bar_is_closed_before_the_error_line(capsys):
    from rltf.config.loading import ConfigError
    from rltf.run.cli import run_cli
    from rltf.run.tracking import progress_bar

    def main(args):
        bar = progress_bar(total=3, desc="steps", enabled=True, main=True)  # plain lines: stderr is no terminal
        bar.update(1)  # (its status is written when it closes: within 30 s of the first)
        raise ConfigError("the step failed")

    with pytest.raises(SystemExit) as stop:
        run_cli(main, [])
    assert stop.value.code == 2
    del stop
    gc.collect()  # (a bar left open would close here, and print, after the error line)
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert lines[-1] == "error: the step failed", lines
    assert any(x.startswith("steps:  33%") for x in lines[:-1]), lines


def test_ctrl_c_in_a_run_is_one_line_exit_130(capsys):
    from rltf.run.cli import EXIT_INTERRUPTED, RESUME_ADVICE, run_cli
    from rltf.run.tracking import progress_bar

    def main(args):
        bar = progress_bar(total=3, desc="rltf", enabled=True, main=True)
        bar.update(1)
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as stop:
        run_cli(main, [], interrupted=RESUME_ADVICE)
    assert stop.value.code == EXIT_INTERRUPTED == 130
    del stop
    gc.collect()
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert lines[-1] == f"error: interrupted (SIGINT); {RESUME_ADVICE}" and "resume with resume=true" in lines[-1]


TINY = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "planner.embedded.vocab_size=300",
        "sft.enabled=false", "rltf.steps=100000", "rltf.tasks_per_batch=2", "rltf.k_samples=2",
        "rltf.eval_every=0", "rltf.checkpoint_every=1", "eval.schemas=[rltf]", "logging.report_to=none"]


@pytest.mark.slow  # a train/rltf.py subprocess up to its first RLTF step
def test_sigint_of_train_rltf_py_is_one_line_saying_to_resume_exit_130(tmp_path):
    """A real ``python train/rltf.py`` training (tiny settings, endless steps), sent SIGINT once its RLTF
    bar has printed: one line, no traceback, exit status 130."""
    proc = subprocess.Popen([sys.executable, "train/rltf.py", f"output_dir={tmp_path}", "run_name=stop",
                             f"planner.embedded.dir={tmp_path / 'emb'}", *TINY], cwd=REPO,
                            env={**child_env(), **OFFLINE}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, preexec_fn=default_sigint)
    seen = []
    try:
        for line in proc.stderr:  # the RLTF bar's first status: training has started
            seen.append(line)
            if line.startswith("rltf:"):
                break
        assert proc.poll() is None, "".join(seen)[-3000:]
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=120)  # bounded: a child that ignored SIGINT fails here, not hangs
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = "".join(seen) + rest
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    last = [x for x in rest.splitlines() if x.strip()][-1]
    assert last.startswith("error: interrupted (SIGINT); ") and last.endswith("resume with resume=true"), rest
