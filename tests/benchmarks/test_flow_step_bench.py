"""benchmarks/flow_step.py runs end to end on a tiny MTP flow and prints absolute CPU per step and per query."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "flow_step.py"
TINY = ["env.travel.days=[3]", "env.travel.levels=[easy]", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "planner.embedded.vocab_size=2000",
        "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.lr_schedule=constant"]


def test_flow_step_benchmark_prints_cpu_per_step_and_per_query(capsys):
    """The last two lines give both paths' CPU seconds per RL step and per evaluated query and their
    ratio; the counts (passes, queries, backend calls, decisions) are the same whatever the load, and
    both paths draw the same trajectories and plans. No timing is compared with a threshold."""
    import rltf.flows.engine.batching as batching

    spec = importlib.util.spec_from_file_location("flow_step_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    methods = (batching.PassBatch._step, batching.PassBatch._serve)
    out = bench.main(["--steps", "1", "--warmup", "0", "--queries", "2", "--eval-repeats", "1", "--batch-size", "4",
                      *TINY])
    assert (batching.PassBatch._step, batching.PassBatch._serve) == methods  # the timers are removed again
    lines = capsys.readouterr().out.strip().splitlines()
    step, query = lines[-2], lines[-1]
    assert step == (f"MTP RL step CPU s per step (4 passes): batched {out['cpu_per_step']['batched']:.3f}, "
                    f"one-at-a-time {out['cpu_per_step']['one-at-a-time']:.3f}; one-at-a-time/batched "
                    f"{out['step_ratio']:.2f} (median of pairs {out['step_pairs'][0]:.2f})")
    assert query == (f"flow evaluation CPU s per query (2 queries): batched {out['cpu_per_query']['batched']:.3f}, "
                     f"one-at-a-time {out['cpu_per_query']['one-at-a-time']:.3f}; one-at-a-time/batched "
                     f"{out['eval_ratio']:.2f} (median of pairs {out['eval_pairs'][0]:.2f})")
    assert all(v > 0 for v in (*out["cpu_per_step"].values(), *out["cpu_per_query"].values()))
    assert out["passes_per_step"] == 4 and out["queries"] == 2
    assert out["same_trajectories"] and out["same_plans"] and out["decisions"] > 0
    # the same decisions decoded on both paths, in fewer backend calls when batched
    for counts in (out["step_counts"], out["eval_counts"]):
        assert counts["batched"]["items"] == counts["one-at-a-time"]["items"] > 0
        assert 0 < counts["batched"]["calls"] <= counts["one-at-a-time"]["calls"]
    assert out["step_counts"]["one-at-a-time"]["items"] == out["step_counts"]["one-at-a-time"]["calls"]
    assert any(line.startswith("RL step,       batched (batch  4): ") and line.endswith(" CPU per step")
               for line in lines)
    assert any(line.startswith("evaluation, one-at-a-time (batch  1): ") and "backend calls decoding" in line
               for line in lines)
