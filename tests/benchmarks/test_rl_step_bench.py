"""benchmarks/rl_step.py runs end to end on a tiny planner and prints its ratio last."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "rl_step.py"


@pytest.fixture
def fresh_accelerate_state():
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    yield
    AcceleratorState._reset_state(True)


def test_rl_step_benchmark_prints_phases_and_ratio(capsys, fresh_accelerate_state):
    import rltf.rl.trainer

    spec = importlib.util.spec_from_file_location("rl_step_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    sampler = rltf.rl.trainer.sample_plans
    out = bench.main(["--repeats", "2", "--warmup", "0", "--tasks", "2", "--k", "2", "--d-model", "32",
                      "--layers", "1", "--sft-epochs", "2", "--max-tokens", "12", "--reward-steps", "3"])
    assert rltf.rl.trainer.sample_plans is sampler  # the phase timer is removed again
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("rltf/grpo step time: ") and float(lines[-1].split(": ")[1]) == \
        pytest.approx(out["ratio"], abs=0.01)
    for m in ("rltf", "grpo"):
        med = out["median"][m]
        assert med["generation"] > 0 and med["update"] > 0 and math.isfinite(med["total"])
        assert med["generation"] + med["reward"] + med["update"] == pytest.approx(med["total"])
    assert any(line.startswith("| generation |") for line in lines)
    # the same run's work per valid plan and its time to a fixed train reward
    assert out["valid_per_step"]["rltf"] == 4  # every sampled plan is valid and executed
    assert 0 <= out["valid_per_step"]["grpo"] <= 4
    assert len(out["rewards"]["rltf"]) == len(out["rewards"]["grpo"]) == 3  # --reward-steps in all
    assert any(line.startswith("rltf/grpo step CPU time: ") and "per valid plan executed: " in line for line in lines)
    reached = next(line for line in lines if line.startswith(f"train reward >= {out['target']:.3f} ("))
    for m in ("rltf", "grpo"):
        r = out["reached"][m]
        assert (f"{m} step {r[0]}, " if r else f"{m} not reached in 3 steps") in reached


def test_time_to_reward_averages_the_last_steps():
    spec = importlib.util.spec_from_file_location("rl_step_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rewards, cpu = [0.1, 0.5, 0.2, 0.8, 0.8], [1.0, 2.0, 3.0, 4.0, 5.0]
    assert bench.time_to_reward(rewards, cpu, 0.5, 1) == (2, 3.0)  # step 2 alone
    assert bench.time_to_reward(rewards, cpu, 0.55, 3) == (5, 15.0)  # step 4: 0.5, step 5: 0.6
    assert bench.time_to_reward(rewards, cpu, 0.9, 2) is None


def test_prompt_sharing_benchmark_reports_both_paths_and_the_ratio(capsys, monkeypatch):
    """``--planner smollm2`` times sampling, scoring and SFT with each prompt read once and once
    per row (here on a tiny LLaMA with LoRA instead of SmolLM2) and prints the before/after ratio last."""
    from tiny_models import bpe_tokenizer, tiny_llama, with_lora

    import envs
    from rltf.config.loading import load_config
    from rltf.planners.planner import Planner

    spec = importlib.util.spec_from_file_location("rl_step_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def tiny_build(args, tmp):
        cfg = load_config([f"output_dir={tmp}", "run_name=bench"])
        env, _ = envs.make_train_and_held_out(cfg.env)
        tok = bpe_tokenizer()
        planner = Planner(with_lora(tiny_llama(tok, seed=1), seed=2), tok, False, source="tiny")
        return cfg, planner, env, [t for t in env.tasks() if t.reference_plan is not None][: args.tasks]

    monkeypatch.setattr(bench.sharing, "build", tiny_build)
    out = bench.main(["--planner", "smollm2", "--tasks", "2", "--k", "3", "--repeats", "1", "--warmup", "0"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"sampled+scored plan before/after: {out['ratio']:.2f}"
    assert out["max_abs_logprob_diff"] < 1e-4  # the two paths score the same samples alike
    for share in (False, True):
        assert all(math.isfinite(v) and v > 0 for v in out["median"][share].values())
    assert [line.split(" |")[0] for line in lines if line.startswith("| s")] == ["| sampling", "| scoring", "| sft"]
