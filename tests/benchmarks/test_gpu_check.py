"""benchmarks/gpu_check.py's CPU fallback: every phase runs or says why not, one JSON, exit status."""

from __future__ import annotations

import importlib.util
import json
import runpy
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::RuntimeWarning")]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"
TINY = ["--device", "cpu", "--tiny", "--steps", "2", "--tasks", "2", "--k", "2", "--sft-epochs", "1",
        "--eval-tasks", "1", "--grpo-steps", "1", "--override", "env.n_samples=2",
        "--override", "env.samples_per_step=2"]
RLTF_PHASES = ("embedded_rltf", "smollm2_lora_rltf")


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _timed(record: dict) -> None:
    assert record["wall_s"] > 0 and record["cpu_s"] >= 0, record
    assert "peak_gpu_mib" not in record  # no GPU: no GPU memory figure


def test_cpu_fallback_runs_every_phase_or_says_why(gpu_check, tmp_path, capsys, fresh_accelerate_state):
    out = tmp_path / "check.json"
    assert gpu_check.main([*TINY, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["precision"] == "fp32" and report["failed"] == []
    assert list(report["phases"]) == list(gpu_check.PHASES)  # every phase, in order
    for name, phase in report["phases"].items():
        assert phase["status"] in ("ok", "skipped"), (name, phase)
        if phase["status"] == "skipped":
            assert phase["reason"], name
        else:
            _timed(phase)
    skipped = {n: p["reason"] for n, p in report["phases"].items() if p["status"] == "skipped"}
    assert set(skipped) == {"bf16_autocast", "qlora_rltf"}  # the GPU-only phases
    assert "bf16" in skipped["bf16_autocast"] and "CUDA" in skipped["qlora_rltf"]

    for name in RLTF_PHASES:
        d = report["phases"][name]["details"]
        for stage in ("build", "sft", "evaluation"):
            _timed(d[stage])
        steps = d["rltf_steps"]
        assert steps["n"] == 2 and len(steps["each"]) == 2 and steps["plans_per_step"] == 4
        for s in steps["each"]:
            _timed(s)
        assert 0 <= d["train"]["reward_last"] <= 1 and 0 <= d["evaluation"]["overall"] <= 1
        assert d["planner"]["device"] == "cpu" and d["planner"]["dtype"] == "float32"
    _timed(report["phases"]["smollm2_lora_rltf"]["details"]["random_model"])  # built by the first phase using it
    assert "random_model" not in report["phases"]["grpo"]["details"]
    lora = report["phases"]["smollm2_lora_rltf"]["details"]["planner"]
    assert lora["peft"] and lora["arch"] == "causal" and 0 < lora["trained_m"] < lora["parameters_m"]
    gens = report["phases"]["device_generators"]["details"]
    assert gens["same_plans"] and gens["same_plans_explicit_generator"] and gens["generator_device"] == "cpu"
    assert gens["logprob_repeat_max_abs"] == 0 and gens["sampler_vs_scorer_max_abs"] < 1e-4
    flow = report["phases"]["flow_rltf"]["details"]  # the agent-flow job: its env is travel (no env.* overrides)
    _timed(flow["job"])
    assert flow["rltf_steps"]["n"] == 2 and flow["rltf_steps"]["trajectories_per_step"] == 4
    assert flow["rltf_steps"]["median_wall_s"] > 0 and flow["train"]["logprob_mismatch_max"] < 1e-4
    assert flow["evaluation"]["queries"] == 1
    assert 0 <= flow["evaluation"]["finetuned_final_pass"] <= 1 and 0 <= flow["evaluation"]["rltf_final_pass"] <= 1
    grpo = report["phases"]["grpo"]["details"]
    assert grpo["grpo_steps"]["n"] == 1 and grpo["train"]["model_device"] == "cpu"
    _timed(grpo["grpo_steps"]["each"][0])

    table = capsys.readouterr().out
    assert all(f"\n{name} " in table for name in gpu_check.PHASES)


def test_a_failing_phase_is_recorded_the_check_goes_on_and_exits_non_zero(tmp_path, monkeypatch, capsys,
                                                                         fresh_accelerate_state):
    out = tmp_path / "fail.json"
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *TINY, "--only", "device_generators,grpo",
                                      "--override", "rltf.baseline=bogus", "--out", str(out)])
    with pytest.raises(SystemExit) as exit_:  # the script as run from the command line (its __main__ block)
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert exit_.value.code == 1
    report = json.loads(out.read_text())
    assert report["failed"] == ["device_generators", "grpo"]  # the first failure did not stop the second phase
    for name in report["failed"]:
        phase = report["phases"][name]
        assert "rltf.baseline" in phase["error"] and "bogus" in phase["error"], phase
        assert phase["at"]  # where the last frame of the traceback was
    others = [p for n, p in report["phases"].items() if n not in report["failed"]]
    assert all(p["status"] == "skipped" and p["reason"].startswith("not selected") for p in others)
    stdout = capsys.readouterr().out
    table = stdout[stdout.index("GPU check on cpu"):]
    assert "device_generators   failed" in table and "grpo                failed" in table
