"""What drawing K distinct plans costs: stochastic beam search (``sample_distinct_plans``) against
sampling K plans with replacement (``sample_plans``), same planner, prompts and grammars (issue #37).

    OMP_NUM_THREADS=1 python benchmarks/distinct_sampling.py [--quick]

Per grammar: CPU seconds of one call (the median of ``--repeats``; ``time.process_time``, so shared
cores count what this process used), the ratio to the with-replacement sampler measured in the same
run, and counts that do not depend on load: decoder passes (``PlannerRunner.step`` calls: decoding
steps) and rows joined by prefill (``PlannerRunner.add_rows`` calls), plus the distinct plans each
drew; then stochastic beam search again with every join re-stacking the running cache
(``DevicePolicy(slots=False)``, the path before the slot cache; ``(other plans)`` marks a grammar
whose draws differ, none expected) and the slot path's CPU over it. The embedded default planner
(untrained: the numbers are the decoder's, not a policy's) on OpenAGI's lite tasks (a linear and a
two-input task) and on travel queries of 3, 5 and 7 days (a branching grammar with 17-39 rows,
searched row after row by stochastic beam search).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.decoding_growth import runner_path  # noqa: E402
from benchmarks.decoding_travel import build_embedded, travel_queries, travel_tokenizer_texts  # noqa: E402
from constrained_decoding.decode import sample_plans  # noqa: E402
from constrained_decoding.runner import PlannerRunner  # noqa: E402
from constrained_decoding.without_replacement import sample_distinct_plans  # noqa: E402
from envs.openagi.env import OpenAGIEnv  # noqa: E402
from envs.travel.env import TravelPlannerEnv  # noqa: E402


class Counts:
    """Counts PlannerRunner.step / add_rows calls while active."""

    def __init__(self):
        self.steps = self.joins = 0

    def __enter__(self):
        self._step, self._add = PlannerRunner.step, PlannerRunner.add_rows
        counts = self

        def step(runner, *a, **k):
            counts.steps += 1
            return counts._step(runner, *a, **k)

        def add_rows(runner, *a, **k):
            counts.joins += 1
            return counts._add(runner, *a, **k)

        PlannerRunner.step, PlannerRunner.add_rows = step, add_rows
        return self

    def __exit__(self, *exc):
        PlannerRunner.step, PlannerRunner.add_rows = self._step, self._add


def measure(fn, repeats: int) -> tuple[float, Counts, object]:
    times, out, counts = [], None, None
    for _ in range(repeats):
        with Counts() as c:
            t = time.process_time()
            out = fn()
            times.append(time.process_time() - t)
        counts = c
    return statistics.median(times), counts, out


def row(name: str, k: int, model, tok, prompts, grammars, repeats: int) -> None:
    base_t, base_c, base = measure(lambda: sample_plans(model, tok, prompts, grammars, k, seed=0), repeats)
    swor_t, swor_c, swor = measure(lambda: sample_distinct_plans(model, tok, prompts, grammars, k, seed=0), repeats)
    with runner_path(False):
        restack_t, _, restacked = measure(lambda: sample_distinct_plans(model, tok, prompts, grammars, k, seed=0),
                                          repeats)
    same = [[p.rows for p in d.plans] for d in restacked] == [[p.rows for p in d.plans] for d in swor]
    distinct_base = statistics.mean(len({d.text for d in ds}) for ds in base)
    distinct_swor = statistics.mean(len(d.plans) for d in swor)
    print(f"| {name} | {len(prompts)} x {k} | {base_t:.3f} | {swor_t:.3f} | {swor_t / base_t:.1f}x | "
          f"{base_c.steps} / {swor_c.steps} | {base_c.joins} / {swor_c.joins} | "
          f"{distinct_base:.1f} / {distinct_swor:.1f} | {restack_t:.3f} | {swor_t / restack_t:.2f}"
          f"{'' if same else ' (other plans)'} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer prompts and repeats (a smoke run)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("-k", type=int, default=8, help="plans per prompt")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    repeats, n = (1, 2) if args.quick else (args.repeats, 8)
    travel = TravelPlannerEnv("all")
    model, tok = build_embedded(travel_tokenizer_texts(travel))
    model.eval()
    print(f"K = {args.k} plans per prompt; CPU seconds per call (median of {repeats}); torch threads "
          f"{torch.get_num_threads()}\n")
    print("| grammar | prompts x K | with replacement (s) | distinct (s) | ratio | decoder passes | row joins | "
          "distinct plans per prompt | distinct, re-stacking joins (s) | slot / re-stacking |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    openagi = OpenAGIEnv(split="all")
    for label, linear in (("OpenAGI linear", True), ("OpenAGI two inputs", False)):
        tasks = [t for t in openagi.tasks() if t.is_linear == linear][:n]
        row(label, args.k, model, tok, [t.description for t in tasks], [openagi.grammar(tok, t) for t in tasks],
            repeats)
    for days in (3, 5, 7):
        qs = travel_queries(travel, days, n)
        row(f"travel {days} days", args.k, model, tok, [q.query for q in qs], [travel.grammar(tok, q) for q in qs],
            repeats)


if __name__ == "__main__":
    main()
