"""benchmarks/gpu_fair_check.py on the CPU: both arms on the same weights and tasks, valid plans in
both, every phase of every step timed; its timer and weights hash; bad input and a failing start."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::RuntimeWarning")]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_fair_check.py"
TINY = ["--device", "cpu", "--tiny", "--steps", "2", "--tasks", "2", "--k", "2", "--sft-epochs", "1",
        "--override", "env.n_samples=2", "--override", "env.samples_per_step=2"]


@pytest.fixture(scope="module")
def fair():
    sys.path.insert(0, str(REPO))
    spec = importlib.util.spec_from_file_location("gpu_fair_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_both_arms_same_weights_same_tasks_valid_plans_every_phase(fair, tmp_path, capsys, fresh_accelerate_state):
    out = tmp_path / "fair.json"
    assert fair.main([*TINY, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["precision"] == "fp32" and report["failed"] == []
    assert report["weights"]["model"] == "tiny" and "same for both arms" in report["weights"]["what"]
    arms = report["arms"]
    assert set(arms) == {"rltf", "grpo"} and all(a["status"] == "ok" for a in arms.values())
    # the same start weights: the SFT's, loaded by each arm's fresh process
    assert report["weights"]["same_start_weights"] is True
    assert arms["rltf"]["start_weights_sha256"] == arms["grpo"]["start_weights_sha256"] \
        == report["sft"]["weights_sha256"] == report["weights"]["start_sha256"]
    assert report["prime"]["reference_plans"] > 0
    assert report["same_tasks_each_step"] is True
    phases = (*fair.PHASE_NAMES, "other")
    assert set(fair.PHASE_NAMES) == {"sampling", "reward", "scoring", "backward", "optimizer"}
    for name, arm in arms.items():
        assert arm["planner"]["device"] == "cpu" and arm["planner"]["dtype"] == "float32", name
        assert not arm["planner"]["peft"] and arm["planner"]["trained_m"] == arm["planner"]["parameters_m"]
        s = arm["steps"]
        assert s["n"] == 2 and len(s["each"]) == 2
        assert set(s["phases_median"]) == set(phases)
        for step in s["each"]:
            assert set(step["phases"]) == set(phases), (name, step)
            for p in fair.PHASE_NAMES:  # every phase ran, through the hooks, in every step
                assert step["phases"][p]["calls"] >= 1 and step["phases"][p]["wall_s"] >= 0, (name, p, step)
            assert step["phases"]["other"]["wall_s"] >= -2e-3  # the phases are inside the step
            assert step["plans"] == 4 and 0 < step["valid_plans"] <= 4, (name, step)
            assert len(step["task_ids"]) == 2 and 0 <= step["reward_mean"] <= 1
            assert "peak_gpu_mib" not in step  # no GPU: no GPU memory figure
        assert s["valid_plans_per_step"] > 0 and s["plans_per_s"] > 0
        assert s["wall_s_per_valid_plan"] > 0
    # constrained sampling in both arms: every plan is valid
    assert all(st["valid_plans"] == st["plans"] for a in arms.values() for st in a["steps"]["each"])
    assert set(report["grpo_over_rltf"]) >= {"step_wall", "sampling", "reward"}
    table = capsys.readouterr().out
    assert "\nrltf " in table and "\ngrpo " in table and "sampling" in table


def test_phase_timer_counts_a_nested_span_once_and_nothing_outside_a_step(fair):
    from benchmarks.gpu_check_phases import Clock
    from benchmarks.gpu_fair_arms import PhaseTimer, summary

    timer = PhaseTimer(Clock(False))
    with timer.phase("sampling"):  # outside a step: not recorded
        pass
    timer.begin_step()
    inner = timer.wrap("scoring", lambda x: x + 1)
    with timer.phase("sampling"):
        assert inner(1) == 2  # inside sampling: counted by sampling only
    assert inner(2) == 3
    timer.start("optimizer")
    timer.stop("backward")  # not the open span: ignored
    timer.stop("optimizer")
    timer.count(4, 3)
    step = timer.end_step(task_ids=[1])
    assert step["phases"]["sampling"]["calls"] == 1 and step["phases"]["scoring"]["calls"] == 1
    assert step["phases"]["optimizer"]["calls"] == 1 and step["phases"]["backward"]["calls"] == 0
    assert step["plans"] == 4 and step["valid_plans"] == 3 and step["task_ids"] == [1]
    s = summary([step])
    assert s["n"] == 1 and s["valid_plans_per_step"] == 3 and set(s["phases_median"]) == {*fair.PHASE_NAMES, "other"}


def test_weights_hash_sees_one_ulp(fair):
    from benchmarks.gpu_fair_arms import weights_hash

    torch.manual_seed(0)
    a = torch.nn.Linear(3, 2).to(torch.bfloat16)
    b = torch.nn.Linear(3, 2).to(torch.bfloat16)
    b.load_state_dict(a.state_dict())
    assert weights_hash(a) == weights_hash(b)
    with torch.no_grad():
        b.weight.view(torch.int16)[0, 0] += 1  # the next bf16 value
    assert weights_hash(a) != weights_hash(b)


@pytest.mark.parametrize("argv, word", [(["--steps", "0"], "--steps 0"), (["--sft-epochs", "-1"], "--sft-epochs -1"),
                                        (["--arm", "ppo"], "--arm ppo")])
def test_bad_arguments_exit_2_naming_the_value(fair, argv, word, capsys):
    with pytest.raises(SystemExit) as exit_:
        fair.main(argv)
    assert exit_.value.code == 2
    assert word in capsys.readouterr().err


def test_a_failing_start_is_one_line_and_exit_1(fair, tmp_path, capsys, fresh_accelerate_state):
    out = tmp_path / "bad.json"
    assert fair.main([*TINY, "--override", "rltf.baseline=bogus", "--out", str(out)]) == 1
    report = json.loads(out.read_text())
    assert "rltf.baseline" in report["error"] and "bogus" in report["error"] and report["arms"] == {}
    err = capsys.readouterr().err
    assert "start weights failed" in err and "bogus" in err


def test_an_arm_that_fails_in_its_process_is_recorded_with_its_error(fair, tmp_path):
    args = fair.parse_args(TINY)
    device, precision = fair.resolve(args)
    missing = tmp_path / "no-such-planner"
    entry = fair.spawn_arm("rltf", args, device, precision, tmp_path, str(missing))
    assert entry["status"] == "failed" and entry["at"], entry
    assert "no-such-planner" in entry["error"], entry
