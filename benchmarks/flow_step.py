"""Benchmark: batched flow passes against one pass at a time, on the MTP flow job's settings.

The MTP RL step (:meth:`rltf.flows.training.trainer.FlowRLTFTrainer.train_step` with
``configs/travel-mtp.yaml``: 4 queries x 4 passes, every decision sampled from the embedded planner)
and the held-out flow evaluation (:func:`rltf.flows.evaluation.evaluate_method`, greedy, ``--queries``
test queries), each run with ``flow.backend.batch_size=1`` (every backend call decodes one
decision: the reference) and with the passes batched (``--batch-size``, default the config's 72: a
step's 16 passes, every held-out query at once),
timed in the same run, taking turns: RL step by RL step (each path its own trainer and envs), then
evaluation by evaluation, so that a drift in the host's speed (identical runs here have differed by
1.5x) reaches both paths alike; the ratio is printed for the sums and as the median of the pairs.
Both paths start from the same weights and seeds and draw the same
decisions (each pass samples from its own seeded streams; the benchmark checks it); times are
CPU seconds of the whole process (pass threads included), since the cores may be shared, split
into the pass code (agents, engine), backend calls and the rest (re-scoring, update, reward).
The timed steps and each evaluation start with no query's tables (:mod:`envs.travel.catalog_memo`):
the passes of a query share its searches and route options within a step, and a path never reads
the tables the other filled (the tables are kept per env, and each path has its own).

    OMP_NUM_THREADS=1 python benchmarks/flow_step.py [--steps 4] [--warmup 1] [--queries 72]
        [--eval-repeats 2] [--batch-size 72] [key=value ...]

Trailing ``key=value`` arguments override the run config (after ``configs/travel-mtp.yaml``).
Counts that do not depend on the load are printed beside the times: backend calls and the decisions
they decoded, per step and per query, the steps' decisions and the queries evaluated.
Last two lines, the absolute CPU seconds of both paths and their ratio:
``MTP RL step CPU s per step (<n> passes): batched <s>, one-at-a-time <s>; one-at-a-time/batched <ratio>
(median of pairs <ratio>)`` and ``flow evaluation CPU s per query (<n> queries): batched <s>,
one-at-a-time <s>; one-at-a-time/batched <ratio> (median of pairs <ratio>)``.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402

import envs  # noqa: E402
import rltf.flows.engine.batching as batching  # noqa: E402
from envs.travel import catalog_memo  # noqa: E402
from rltf.config.loading import load_config  # noqa: E402
from rltf.flows.backends.planner import PlannerBackend  # noqa: E402
from rltf.flows.evaluation import evaluate_method, select_queries  # noqa: E402
from rltf.flows.training.trainer import FlowRLTFTrainer  # noqa: E402
from rltf.planners.loading import load_planner  # noqa: E402
from rltf.planners.tokenizer import tokenizer_texts_for  # noqa: E402

CPU: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))  # path -> part -> CPU seconds
COUNTS: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))  # path -> backend calls / items decoded
PATH = ["one-at-a-time"]  # the path being timed now


def _timed(name: str):
    """Wrap ``PassBatch.<name>`` to add its CPU seconds (and, for ``_serve``, its backend calls and the
    decisions they decoded) to the path being timed; returns the original method."""
    fn = getattr(batching.PassBatch, name)

    def timed(self, *args):
        c0, calls, items = time.process_time(), self.calls, self.items
        try:
            return fn(self, *args)
        finally:
            CPU[PATH[0]][name] += time.process_time() - c0
            COUNTS[PATH[0]]["calls"] += self.calls - calls
            COUNTS[PATH[0]]["items"] += self.items - items
    setattr(batching.PassBatch, name, timed)
    return fn


def _clear() -> None:
    CPU.clear()
    COUNTS.clear()


def _split(path: str, total: float, n: int) -> str:
    code, backend = CPU[path]["_step"] / n, CPU[path]["_serve"] / n
    calls, items = COUNTS[path]["calls"] / n, COUNTS[path]["items"] / n
    return (f"{total / n:7.3f} s  (pass code {code:.3f}, backend {backend:.3f}, rest {total / n - code - backend:.3f}; "
            f"{calls:.1f} backend calls decoding {items:.1f} decisions)")


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=4, help="timed RL steps per path (the paths take turns, step by step)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed RL steps per path first")
    ap.add_argument("--queries", type=int, default=72, help="held-out queries evaluated per path (72: all)")
    ap.add_argument("--eval-repeats", type=int, default=2, help="evaluations per path (the paths take turns)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="passes run together on the batched path (default: the config's flow.backend.batch_size)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("overrides", nargs="*", metavar="key=value",
                    help="run config overrides after configs/travel-mtp.yaml (e.g. a smaller planner or step)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    originals = {name: _timed(name) for name in ("_step", "_serve")}  # pass code; the batched backend calls
    try:
        return _run(args)
    finally:
        for name, fn in originals.items():
            setattr(batching.PassBatch, name, fn)
        _clear()


def _run(args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="flow_step_"))
    base = ["config=configs/travel-mtp.yaml", f"output_dir={tmp}", "logging.progress_bar=false",
            "rltf.checkpoint_every=0", f"planner.embedded.dir={tmp / 'embedded'}", *args.overrides]
    cfg = load_config(base)
    train, held = envs.make_train_and_held_out(cfg.env)
    planner = load_planner(cfg.planner, tokenizer_texts_for(train))
    paths = {"one-at-a-time": 1, "batched": args.batch_size or cfg.flow.backend.batch_size}
    passes = cfg.rltf.tasks_per_batch * cfg.rltf.k_samples
    print(f"MTP flow, {cfg.rltf.tasks_per_batch} queries x {cfg.rltf.k_samples} passes = {passes} per step; embedded "
          f"planner d_model {cfg.planner.embedded.d_model}; torch threads {torch.get_num_threads()}; the two paths "
          "take turns (step by step, evaluation by evaluation) so that a drift in the host's speed reaches both")

    # each path has its own envs: the per-query tables (catalog_memo, kept per env) one path builds
    # are never read by the other, and each path's tables persist across its own steps
    trainers, own_held = {}, {}
    for name, width in paths.items():
        c = load_config([*base, f"run_name={name}", f"flow.backend.batch_size={width}"])
        path_train, own_held[name] = envs.make_train_and_held_out(c.env)
        trainers[name] = FlowRLTFTrainer(c, copy.deepcopy(planner), path_train, Accelerator(cpu=True))
    for _ in range(args.warmup):
        for name in paths:
            PATH[0] = name
            trainers[name].train_step()
    _clear()
    catalog_memo.clear()  # the timed steps start with no query's tables
    step_cpu: dict[str, list[float]] = {name: [] for name in paths}
    trajs: dict[str, list] = {name: [] for name in paths}
    for _ in range(args.steps):
        for name in paths:
            PATH[0] = name
            c0 = time.process_time()
            trainers[name].train_step()
            step_cpu[name].append(time.process_time() - c0)
            trajs[name].append([(t.task_id, [d.completion.text for d in t.decisions])
                                for t in trainers[name].last_trajectories])
    for name, width in paths.items():
        print(f"RL step, {name:>13} (batch {width:2d}): {_split(name, sum(step_cpu[name]), args.steps)} CPU per step")
    step_counts = {name: dict(COUNTS[name]) for name in paths}
    same = trajs["one-at-a-time"] == trajs["batched"]
    decisions = sum(len(d) for step in trajs["batched"] for _, d in step)
    print(f"same trajectories on both paths: {same} ({args.steps} steps, {decisions} decisions)")
    step_pairs = [a / b for a, b in zip(step_cpu["one-at-a-time"], step_cpu["batched"])]

    ids = select_queries([t.id for t in held.tasks()], args.queries)
    backends = {name: PlannerBackend(planner, batch_size=width) for name, width in paths.items()}
    for name in paths:  # warm-up
        evaluate_method("mtp", own_held[name], ids[:1], backends[name], cfg.flow)
    _clear()
    eval_cpu: dict[str, list[float]] = {name: [] for name in paths}
    plans: dict[str, list] = {}
    for _ in range(args.eval_repeats):
        for name in paths:
            PATH[0] = name
            catalog_memo.clear()  # each evaluation starts with no query's tables
            c0 = time.process_time()
            _, records = evaluate_method("mtp", own_held[name], ids, backends[name], cfg.flow)
            eval_cpu[name].append(time.process_time() - c0)
            plans.setdefault(name, [r["plan"] for r in records])
    n_eval = len(ids) * args.eval_repeats
    for name, width in paths.items():
        print(f"evaluation, {name:>13} (batch {width:2d}): {_split(name, sum(eval_cpu[name]), n_eval)} CPU per query")
    eval_counts = {name: dict(COUNTS[name]) for name in paths}
    same_plans = plans["one-at-a-time"] == plans["batched"]
    print(f"same evaluation plans on both paths: {same_plans} ({len(ids)} queries x {args.eval_repeats} evaluations)")
    eval_pairs = [a / b for a, b in zip(eval_cpu["one-at-a-time"], eval_cpu["batched"])]
    print(f"per pair (one-at-a-time/batched): RL steps {', '.join(f'{r:.2f}' for r in step_pairs)}; "
          f"evaluations {', '.join(f'{r:.2f}' for r in eval_pairs)}")
    per_step = {name: sum(v) / args.steps for name, v in step_cpu.items()}
    per_query = {name: sum(v) / n_eval for name, v in eval_cpu.items()}
    step_ratio = sum(step_cpu["one-at-a-time"]) / sum(step_cpu["batched"])
    eval_ratio = sum(eval_cpu["one-at-a-time"]) / sum(eval_cpu["batched"])
    print(f"MTP RL step CPU s per step ({passes} passes): batched {per_step['batched']:.3f}, one-at-a-time "
          f"{per_step['one-at-a-time']:.3f}; one-at-a-time/batched {step_ratio:.2f} "
          f"(median of pairs {_median(step_pairs):.2f})")
    print(f"flow evaluation CPU s per query ({len(ids)} queries): batched {per_query['batched']:.3f}, one-at-a-time "
          f"{per_query['one-at-a-time']:.3f}; one-at-a-time/batched {eval_ratio:.2f} "
          f"(median of pairs {_median(eval_pairs):.2f})")
    return {"passes_per_step": passes, "steps": args.steps, "queries": len(ids), "eval_repeats": args.eval_repeats,
            "cpu_per_step": per_step, "cpu_per_query": per_query, "step_ratio": step_ratio, "eval_ratio": eval_ratio,
            "step_pairs": step_pairs, "eval_pairs": eval_pairs, "step_counts": step_counts, "eval_counts": eval_counts,
            "decisions": decisions, "same_trajectories": same, "same_plans": same_plans}


if __name__ == "__main__":
    main()
