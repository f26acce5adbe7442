"""benchmarks/rl_step.py runs end to end on a tiny planner and prints its ratio last."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "rl_step.py"


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
                      "--layers", "1", "--sft-epochs", "2", "--max-tokens", "12"])
    assert rltf.rl.trainer.sample_plans is sampler  # the phase timer is removed again
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("rltf/grpo step time: ") and float(lines[-1].split(": ")[1]) == \
        pytest.approx(out["ratio"], abs=0.01)
    for m in ("rltf", "grpo"):
        med = out["median"][m]
        assert med["generation"] > 0 and med["update"] > 0 and math.isfinite(med["total"])
        assert med["generation"] + med["reward"] + med["update"] == pytest.approx(med["total"])
    assert any(line.startswith("| generation |") for line in lines)
