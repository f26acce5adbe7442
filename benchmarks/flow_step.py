"""Benchmark: batched flow passes against one pass at a time, on the MTP flow job's settings.

The MTP RL step (:meth:`rltf.flows.training.trainer.FlowRLTFTrainer.train_step` with
``configs/travel-mtp.yaml``: 4 queries x 4 passes, every decision sampled from the embedded planner)
and the held-out flow evaluation (:func:`rltf.flows.evaluation.evaluate_method`, greedy, ``--queries``
test queries), each run with ``flow.backend.batch_size=1`` (every backend call decodes one
decision: the reference) and with the passes batched (``--batch-size``, default the config's 16),
timed in the same run. Both paths start from the same weights and seeds and draw the same
decisions (each pass samples from its own seeded streams; the benchmark checks it); times are
CPU seconds of the whole process (pass threads included), since the cores may be shared, split
into the pass code (agents, engine), backend calls and the rest (re-scoring, update, reward).
Each timed part starts with no query's tables (:mod:`envs.travel.catalog_memo`): the passes of a
query share its searches and route options within a step, and the batched path does not read
the tables the one-at-a-time path filled.

    OMP_NUM_THREADS=1 python benchmarks/flow_step.py [--steps 3] [--warmup 1] [--queries 16] [--batch-size 16]

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

import rltf.flows.engine.batching as batching  # noqa: E402
from envs.travel import catalog_memo  # noqa: E402

CPU: dict[str, float] = defaultdict(float)  # CPU seconds of the pass code and of the backend calls


def _timed(name: str) -> None:
    fn = getattr(batching.PassBatch, name)

    def timed(self, *args):
        c0 = time.process_time()
        try:
            return fn(self, *args)
        finally:
            CPU[name] += time.process_time() - c0
    setattr(batching.PassBatch, name, timed)


_timed("_step")   # a pass runs until it asks the backend or ends: its own code
_timed("_serve")  # the batched backend calls


def _split(total: float, n: int) -> str:
    code, backend = CPU["_step"] / n, CPU["_serve"] / n
    return f"{total / n:7.2f} s  (pass code {code:.2f}, backend {backend:.2f}, rest {total / n - code - backend:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3, help="timed RL steps per path")
    ap.add_argument("--warmup", type=int, default=1, help="untimed RL steps per path first")
    ap.add_argument("--queries", type=int, default=16, help="held-out queries evaluated per path")
    ap.add_argument("--batch-size", type=int, default=16, help="passes run together on the batched path")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from accelerate import Accelerator

    import envs
    from rltf.config.loading import load_config
    from rltf.flows.backends.planner import PlannerBackend
    from rltf.flows.evaluation import evaluate_method, select_queries
    from rltf.flows.training.trainer import FlowRLTFTrainer
    from rltf.planners.loading import load_planner
    from rltf.planners.tokenizer import tokenizer_texts_for

    tmp = Path(tempfile.mkdtemp(prefix="flow_step_"))
    base = ["config=configs/travel-mtp.yaml", f"output_dir={tmp}", "logging.progress_bar=false",
            "rltf.checkpoint_every=0", f"planner.embedded.dir={tmp / 'embedded'}"]
    cfg = load_config(base)
    train, held = envs.make_train_and_held_out(cfg.env)
    planner = load_planner(cfg.planner, tokenizer_texts_for(train))
    paths = {"one-at-a-time": 1, "batched": args.batch_size}
    print(f"MTP flow, {cfg.rltf.tasks_per_batch} queries x {cfg.rltf.k_samples} passes per step; embedded planner "
          f"d_model {cfg.planner.embedded.d_model}; torch threads {torch.get_num_threads()}")

    step_cpu, trajs = {}, {}
    for name, width in paths.items():
        c = load_config([*base, f"run_name={name}", f"flow.backend.batch_size={width}"])
        trainer = FlowRLTFTrainer(c, copy.deepcopy(planner), train, Accelerator(cpu=True))
        for _ in range(args.warmup):
            trainer.train_step()
        CPU.clear()
        catalog_memo.clear()
        c0 = time.process_time()
        seen = []
        for _ in range(args.steps):
            trainer.train_step()
            seen.append([(t.task_id, [d.completion.text for d in t.decisions]) for t in trainer.last_trajectories])
        step_cpu[name] = time.process_time() - c0
        trajs[name] = seen
        print(f"RL step, {name:>13} (batch {width:2d}): {_split(step_cpu[name], args.steps)} CPU per step")
    same = trajs["one-at-a-time"] == trajs["batched"]
    print(f"same trajectories on both paths: {same}")

    ids = select_queries([t.id for t in held.tasks()], args.queries)
    eval_cpu, plans = {}, {}
    for name, width in paths.items():
        backend = PlannerBackend(planner, batch_size=width)
        evaluate_method("mtp", held, ids[:1], backend, cfg.flow)  # warm-up
        CPU.clear()
        catalog_memo.clear()
        c0 = time.process_time()
        _, records = evaluate_method("mtp", held, ids, backend, cfg.flow)
        eval_cpu[name] = time.process_time() - c0
        plans[name] = [r["plan"] for r in records]
        print(f"evaluation, {name:>13} (batch {width:2d}): {_split(eval_cpu[name], len(ids))} CPU per query")
    print(f"same evaluation plans on both paths: {plans['one-at-a-time'] == plans['batched']}")
    print(f"MTP RL step CPU one-at-a-time/batched: {step_cpu['one-at-a-time'] / step_cpu['batched']:.2f}")
    print(f"flow evaluation CPU one-at-a-time/batched: {eval_cpu['one-at-a-time'] / eval_cpu['batched']:.2f}")


if __name__ == "__main__":
    main()
