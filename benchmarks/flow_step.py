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
        [--eval-repeats 2] [--batch-size 72]

Last two lines: ``MTP RL step CPU one-at-a-time/batched: <ratio>`` and
``flow evaluation CPU one-at-a-time/batched: <ratio>``.
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
PATH = ["one-at-a-time"]  # the path being timed now


def _timed(name: str) -> None:
    fn = getattr(batching.PassBatch, name)

    def timed(self, *args):
        c0 = time.process_time()
        try:
            return fn(self, *args)
        finally:
            CPU[PATH[0]][name] += time.process_time() - c0
    setattr(batching.PassBatch, name, timed)


_timed("_step")   # a pass runs until it asks the backend or ends: its own code
_timed("_serve")  # the batched backend calls


def _split(path: str, total: float, n: int) -> str:
    code, backend = CPU[path]["_step"] / n, CPU[path]["_serve"] / n
    return f"{total / n:7.2f} s  (pass code {code:.2f}, backend {backend:.2f}, rest {total / n - code - backend:.2f})"


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=4, help="timed RL steps per path (the paths take turns, step by step)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed RL steps per path first")
    ap.add_argument("--queries", type=int, default=72, help="held-out queries evaluated per path (72: all)")
    ap.add_argument("--eval-repeats", type=int, default=2, help="evaluations per path (the paths take turns)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="passes run together on the batched path (default: the config's flow.backend.batch_size)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    tmp = Path(tempfile.mkdtemp(prefix="flow_step_"))
    base = ["config=configs/travel-mtp.yaml", f"output_dir={tmp}", "logging.progress_bar=false",
            "rltf.checkpoint_every=0", f"planner.embedded.dir={tmp / 'embedded'}"]
    cfg = load_config(base)
    train, held = envs.make_train_and_held_out(cfg.env)
    planner = load_planner(cfg.planner, tokenizer_texts_for(train))
    paths = {"one-at-a-time": 1, "batched": args.batch_size or cfg.flow.backend.batch_size}
    print(f"MTP flow, {cfg.rltf.tasks_per_batch} queries x {cfg.rltf.k_samples} passes per step; embedded planner "
          f"d_model {cfg.planner.embedded.d_model}; torch threads {torch.get_num_threads()}; the two paths take "
          "turns (step by step, evaluation by evaluation) so that a drift in the host's speed reaches both")

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
    CPU.clear()
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
    same = trajs["one-at-a-time"] == trajs["batched"]
    print(f"same trajectories on both paths: {same}")
    step_pairs = [a / b for a, b in zip(step_cpu["one-at-a-time"], step_cpu["batched"])]

    ids = select_queries([t.id for t in held.tasks()], args.queries)
    backends = {name: PlannerBackend(planner, batch_size=width) for name, width in paths.items()}
    for name in paths:  # warm-up
        evaluate_method("mtp", own_held[name], ids[:1], backends[name], cfg.flow)
    CPU.clear()
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
    for name, width in paths.items():
        print(f"evaluation, {name:>13} (batch {width:2d}): "
              f"{_split(name, sum(eval_cpu[name]), len(ids) * args.eval_repeats)} CPU per query")
    print(f"same evaluation plans on both paths: {plans['one-at-a-time'] == plans['batched']}")
    eval_pairs = [a / b for a, b in zip(eval_cpu["one-at-a-time"], eval_cpu["batched"])]
    print(f"per pair (one-at-a-time/batched): RL steps {', '.join(f'{r:.2f}' for r in step_pairs)}; "
          f"evaluations {', '.join(f'{r:.2f}' for r in eval_pairs)}")
    print(f"MTP RL step CPU one-at-a-time/batched: {sum(step_cpu['one-at-a-time']) / sum(step_cpu['batched']):.2f} "
          f"(median of pairs {_median(step_pairs):.2f})")
    print(f"flow evaluation CPU one-at-a-time/batched: "
          f"{sum(eval_cpu['one-at-a-time']) / sum(eval_cpu['batched']):.2f} "
          f"(median of pairs {_median(eval_pairs):.2f})")


if __name__ == "__main__":
    main()
