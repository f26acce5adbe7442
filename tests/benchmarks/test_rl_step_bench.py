"""benchmarks/rl_step.py runs end to end on a tiny planner and prints its headline (CPU per valid plan, CPU to a
reward target) last."""

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


def _bench():
    spec = importlib.util.spec_from_file_location("rl_step_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_rl_step_benchmark_headlines_cpu_per_valid_plan_and_to_reward(capsys, fresh_accelerate_state):
    """The last two lines: CPU per valid plan executed and CPU to a train reward target, each with the
    rltf/grpo ratio; the per-step table and ratios above them as context; the counts the figures divide
    by (valid plans executed, steps) in the output. Timings are only checked to be consistent, never
    against a threshold."""
    import rltf.rl.trainer

    bench = _bench()
    sampler = rltf.rl.trainer.sample_plans
    out = bench.main(["--repeats", "2", "--warmup", "0", "--tasks", "2", "--k", "2", "--d-model", "32",
                      "--layers", "1", "--sft-epochs", "2", "--max-tokens", "12", "--reward-steps", "3"])
    assert rltf.rl.trainer.sample_plans is sampler  # the phase timer is removed again
    lines = capsys.readouterr().out.strip().splitlines()
    for m in ("rltf", "grpo"):
        med = out["median"][m]
        assert med["generation"] > 0 and med["update"] > 0 and math.isfinite(med["total"])
        assert med["generation"] + med["reward"] + med["update"] == pytest.approx(med["total"])
    assert [line.split(" |")[0] for line in lines if line.startswith("| ") and not line.startswith("| phase")] == \
        ["| generation", "| reward", "| update", "| total", "| cpu"]
    context = next(line for line in lines if line.startswith("context, per step: "))
    assert f"rltf/grpo step time {out['ratio']:.2f}, step CPU time {out['cpu_ratio']:.2f}" in context
    # the counts: every sampled plan of rltf is valid and executed (2 x 2 per step, 2 timed steps)
    assert out["valid_per_step"]["rltf"] == 4 and out["valid_executed"]["rltf"] == 8
    assert 0 <= out["valid_executed"]["grpo"] <= 8
    assert f"in the 2 timed steps: rltf 8, grpo {out['valid_executed']['grpo']}" in \
        next(line for line in lines if line.startswith("valid plans executed per step: "))
    assert len(out["rewards"]["rltf"]) == len(out["rewards"]["grpo"]) == out["steps"] == 3  # --reward-steps in all
    # the headline: per valid plan, then to the reward target
    per_valid, to_reward = lines[-2], lines[-1]
    assert per_valid.startswith("CPU s per valid plan executed: rltf ")
    assert per_valid.endswith("; rltf/grpo " + ("n/a" if out["per_valid_plan_ratio"] is None
                                                else f"{out['per_valid_plan_ratio']:.2f}"))
    assert f"rltf {out['cpu_per_valid_plan']['rltf']:.4f}, " in per_valid and out["cpu_per_valid_plan"]["rltf"] > 0
    assert to_reward.startswith(f"CPU s to train reward {out['target']:.3f}: ")
    for m in ("rltf", "grpo"):
        r = out["reached"][m]
        assert (f"{m} {r[1]:.2f}" if r else f"{m} not reached in 3 steps") in to_reward
        assert out["cpu_to_reward"][m] == (r[1] if r else None)
    if out["to_reward_ratio"] is not None:
        assert to_reward.endswith(f"; rltf/grpo {out['to_reward_ratio']:.2f}")
    else:
        assert "not reached)" in to_reward
    target = next(line for line in lines if line.startswith(f"train reward target {out['target']:.3f} ("))
    assert "the lower start " in target


def test_reward_target_options():
    """``--target`` is the target itself; otherwise the lower (default) or higher start plus ``--gain``."""
    bench = _bench()
    ap = bench.argparse.Namespace
    starts = {"rltf": 0.5, "grpo": 0.1}
    assert bench._target(ap(target=0.7, target_from="lower", gain=0.2), starts) == (0.7, "--target")
    assert bench._target(ap(target=None, target_from="lower", gain=0.2), starts)[0] == pytest.approx(0.3)
    assert bench._target(ap(target=None, target_from="higher", gain=0.2), starts)[0] == pytest.approx(0.7)


def test_time_to_reward_averages_the_last_steps():
    bench = _bench()
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

    bench = _bench()

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
