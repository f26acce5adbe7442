"""Benchmark: teacher-forced scoring + backward of a default RL step's plans with the token matrix's
rows gathered once per call (``constrained_decoding/gathered_rows.py``) against reading the whole
matrix in every length bucket (the code before), measured in the same run.

The default planner (``configs/default.yaml``: the embedded MiniLM-T5 planner, built offline, its
30522 x 128 token matrix trained), 8 train tasks x 8 plans sampled from it, ``plan_logprobs`` and
the backward of a weighted loss; CPU seconds (one thread), median of ``--repeats`` alternating
runs. Also checks that the log-probabilities and every gradient are bit for bit the same.

    python benchmarks/gathered_rows.py [--repeats 5]

The last line is ``score+backward: <ms> ms (whole matrix <ms> ms), ratio <r>, bit-identical: <bool>``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import constrained_decoding.teacher_forcing as runner_module  # noqa: E402  (where the scorer gathers the rows)
from constrained_decoding.decode import sample_plans  # noqa: E402
from constrained_decoding.logprobs import plan_logprobs  # noqa: E402
from envs.openagi.factory import make_env  # noqa: E402
from rltf.config.loading import load_config  # noqa: E402
from rltf.planners.loading import load_planner  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load_config([])
    planner = load_planner(cfg.planner)
    model, tok = planner.model, planner.tokenizer
    env = make_env({"suite": cfg.env.suite, "backend": cfg.env.backend}, "train")
    tasks = env.tasks()[:8]
    model.eval()
    with torch.no_grad():
        decoded = sample_plans(model, tok, [t.description for t in tasks], [env.grammar(tok, t) for t in tasks], 8,
                               seed=0)
    plans = [d for ds in decoded for d in ds]
    prompts = [t.description for t in tasks for _ in range(8)]
    weights = torch.linspace(-1.0, 1.0, len(plans))
    gather = runner_module.gathered_rows

    def run(gathered: bool):
        runner_module.gathered_rows = gather if gathered else (lambda *a, **k: None)
        try:
            start = time.process_time()
            lp = plan_logprobs(model, tok, prompts, [d.grammar for d in plans], plans)
            (-(lp * weights).mean()).backward()
            cpu = time.process_time() - start
        finally:
            runner_module.gathered_rows = gather
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
        return cpu, lp.detach(), grads

    ours, whole, same = [], [], True
    for _ in range(args.repeats):
        w_cpu, w_lp, w_grads = run(False)
        o_cpu, o_lp, o_grads = run(True)
        whole.append(w_cpu)
        ours.append(o_cpu)
        same &= torch.equal(w_lp, o_lp) and w_grads.keys() == o_grads.keys() and all(
            torch.equal(w_grads[k], o_grads[k]) for k in w_grads)
    o, w = statistics.median(ours), statistics.median(whole)
    print(f"{len(plans)} plans of 8 train tasks, default planner, one thread, median of {args.repeats}")
    print(f"score+backward: {o * 1e3:.0f} ms (whole matrix {w * 1e3:.0f} ms), ratio {w / o:.2f}, bit-identical: {same}")
    return {"ms": o * 1e3, "reference_ms": w * 1e3, "ratio": w / o, "bit_identical": same}


if __name__ == "__main__":
    main()
