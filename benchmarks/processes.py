"""Benchmark: the main job on one process against two (torchrun, CPU), measured in the same run.

Each launch is the README's CPU launch of the main job, ``ACCELERATE_USE_CPU=true torchrun
--standalone --nproc_per_node N train/rltf.py``, with ``OMP_NUM_THREADS=1`` (one thread per process),
on a short default job (``configs/default.yaml`` with ``rltf.steps=--steps`` and ``rltf.eval_every=0``;
every stage but fine-tuning, see below: zero/few-shot, RLTF, held-out evaluation). Every process runs this file's
``--worker`` mode, which is ``train/rltf.py``'s ``main`` with the RLTF stage timed (wall time between barriers, and each
process's own CPU time, ``time.process_time``) and each process's CPU time for the whole job.

Printed per launch and as 2-process / 1-process ratios:

* ``RLTF plans/s (wall)`` — plans sampled and executed by all processes per second of the RLTF
  stage's wall time (ideal ratio: 2 on 2 free cores);
* ``per step`` — the median of the steps' own rate (``train/plans_per_s`` of the run's history:
  the step's wall time on the main process, without the stage's validation and checkpoints);
* ``RLTF plans/s (CPU)`` — the same plans per CPU second of the busiest process (what the wall
  rate would be if every process had a core of its own and never waited): on a machine whose cores
  are shared with other jobs the wall rate depends on their load, this one much less;
* ``job CPU s`` — every process's CPU time for the whole job, summed (ideal ratio: 1, no work
  done twice); the RLTF stage's share of it;
* ``cache hit rate`` — the train env's execution cache on the main process after the last step.

Both launches start RLTF from the same fine-tuned planner: the benchmark first runs ``train/sft.py``
once (one process) and both launches load it (``planner.model=<its sft dir> sft.enabled=false``).
Without that each launch fine-tunes its own, and the planners differ (float summation order through
the all-reduce over 20 epochs): their RLTF stages then sample different plans and do different work.

Each process also times its steps' phases (wall and CPU per step, summed over the steps): sampling,
the reward, the update (backward, clipping and the optimizer step) and, inside the update, the
gradient all-reduce, whose wall time is mostly waiting for the slower process. Printed per process.

``--repeats R`` runs the pair R times (1, 2, 1, 2, ...) and prints each ratio's median.
``--per-process-tasks T`` fixes each process's batch instead of the global one (weak scaling, the way a
per-device batch scales with ``accelerate launch``): a launch of N processes gets ``rltf.tasks_per_batch=N*T``,
so every process samples and executes as many plans per step as the one-process launch. Without it the global
batch is the config's (strong scaling): each of N processes gets 1/N of it, and a decode step at a smaller
batch costs more than 1/N on a CPU (its weights are read from memory once per step, whatever the batch).
``--by-task`` runs the 2-process launches with each process executing its own tasks' plans itself
(the code before the execution was shared by sample: ``envs/openagi/split_rewards.py``).

The cores' own ceiling is measured in the same run: ``--processes`` independent one-process copies
of the same job started at once (no communication, no work shared), their plans/s summed, over
the one-process launches' median: what that many processes can give on these cores at best.

Both launches read the same on-disk oracle store (``envs/openagi/oracle/store.py``): the first fills
what is missing, so job CPU compares the jobs with a warm oracle (``RLTF_ORACLE_CACHE=0`` in the
environment: both search it, each process its share of the held-out tasks).

    python benchmarks/processes.py [--steps 30] [--processes 2] [--repeats 1] [--per-process-tasks T] [key=value ...]
    python benchmarks/processes.py --steps 10 config=configs/smollm2-lora.yaml 'eval.schemas=[rltf]'   # SmolLM2

The last line is ``2/1 processes: plans/s <wall ratio> (CPU <cpu ratio>), job CPU <ratio>; cores' ceiling <ratio>``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ the worker
PHASES = ("sample", "reward", "update", "all_reduce")


class PhaseClock:
    """Wall and CPU seconds per phase, summed over the RLTF steps of one process."""

    def __init__(self):
        self.wall = dict.fromkeys(PHASES, 0.0)
        self.cpu = dict.fromkeys(PHASES, 0.0)

    def wrap(self, phase: str, fn):
        def timed(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.wall[phase] += time.perf_counter() - wall
                self.cpu[phase] += time.process_time() - cpu
        return timed


def worker(out: Path, job_args: list[str]) -> None:
    """One process of the launch: ``train/rltf.py``'s main with the RLTF stage and its phases timed."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if os.environ.get(BY_TASK) == "1":
        from envs.openagi.env import OpenAGIEnv  # the launched worker's own: after its sys.path / env setup

        OpenAGIEnv.split_reward_plans = None  # rltf.rl.steps.execute: each process executes its own plans
    from rltf.rl import trainer  # the launched worker's own: after its sys.path / env setup
    from rltf.rl.update import Updater  # the launched worker's own: after its sys.path / env setup
    from rltf.run import distributed  # the launched worker's own: after its sys.path / env setup
    from rltf.stages import plan_job  # the launched worker's own: after its sys.path / env setup
    from train import rltf as recipe  # the launched worker's own: after its sys.path / env setup

    timing: dict = {}
    train_rltf = plan_job.train_rltf
    clock = PhaseClock()
    trainer.sample_plans = clock.wrap("sample", trainer.sample_plans)
    Updater.apply = clock.wrap("update", Updater.apply)  # backward, clipping and the optimizer step
    distributed.all_reduce_grads = clock.wrap("all_reduce", distributed.all_reduce_grads)

    def timed_train_rltf(run, planner, envs):
        envs.train.reward_plans = clock.wrap("reward", envs.train.reward_plans)
        run.acc.wait_for_everyone()
        wall, cpu = time.perf_counter(), time.process_time()
        history = train_rltf(run, planner, envs)
        timing.update(rltf_cpu_s=time.process_time() - cpu)
        run.acc.wait_for_everyone()
        timing.update(rltf_wall_s=time.perf_counter() - wall, rank=run.acc.process_index,
                      world=run.acc.num_processes, steps=len(history),
                      plans=len(history) * run.cfg.rltf.tasks_per_batch * run.cfg.rltf.k_samples,
                      step_plans_per_s=statistics.median(r["train/plans_per_s"] for r in history),
                      phase_wall_s=dict(clock.wall), phase_cpu_s=dict(clock.cpu))
        stats = envs.train.cache_stats()
        timing["own_cache_hit_rate"] = stats.hit_rate if stats else None
        return history

    plan_job.train_rltf = timed_train_rltf
    recipe.main(job_args)
    timing["job_cpu_s"] = time.process_time()
    (out / f"rank{timing.get('rank', 0)}.json").write_text(json.dumps(timing))


# ------------------------------------------------------------------------------ the launches
ENV = {"ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
BY_TASK = "RLTF_BENCH_BY_TASK"


def fine_tune(out: Path, job_args: list[str]) -> Path:
    """``train/sft.py`` on one process: the fine-tuned planner both launches start RLTF from."""
    env = {**os.environ, **ENV, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "train" / "sft.py"), f"output_dir={out}", "run_name=start",
                           "logging.progress_bar=false", *job_args], env=env, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"train/sft.py failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return out / "start" / "sft"


def launch(processes: int, out: Path, job_args: list[str], by_task: bool = False) -> dict:
    """The main job on ``processes`` CPU processes; what its workers measured, and its last line."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **ENV, "PYTHONPATH": str(ROOT), BY_TASK: "1" if by_task else "0"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
           str(Path(__file__).resolve()), "--worker", str(out), "--", *job_args]
    wall = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - wall
    if proc.returncode != 0:
        raise RuntimeError(f"{processes}-process job failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(processes)]
    main = ranks[0]
    plans = main["plans"]
    return {"processes": processes, "plans": plans, "steps": main["steps"], "job_wall_s": wall,
            "rltf_wall_s": main["rltf_wall_s"],
            "plans_per_s_wall": plans / main["rltf_wall_s"],
            "plans_per_s_cpu": plans / max(r["rltf_cpu_s"] for r in ranks),
            "step_plans_per_s": main["step_plans_per_s"],
            "rltf_cpu_s": sum(r["rltf_cpu_s"] for r in ranks),
            "job_cpu_s": sum(r["job_cpu_s"] for r in ranks),
            "cache_hit_rate": main["own_cache_hit_rate"],
            "phases": [{"wall": r["phase_wall_s"], "cpu": r["phase_cpu_s"]} for r in ranks],
            "last_line": proc.stdout.strip().splitlines()[-1]}


# ------------------------------------------------------------------------------ the cores' ceiling
def ceiling(processes: int, job: list[str], out: Path, alone: float) -> float:
    """Plans/s of ``processes`` independent one-process copies of the job run at once (no
    communication, no shared work), summed, over ``alone`` (one copy's plans/s run by itself)."""
    def copy(i: int) -> dict:
        return launch(1, out / f"copy{i}-timing", [*job, f"run_name=copy{i}"])

    with ThreadPoolExecutor(processes) as pool:
        runs = list(pool.map(copy, range(processes)))
    return sum(r["plans_per_s_wall"] for r in runs) / alone


# ------------------------------------------------------------------------------ the report
def report(pairs: list[list[dict]], ceiling_ratio: float, job: str = "configs/default.yaml",
           per_process_tasks: int | None = None) -> dict:
    one, many = pairs[-1]
    scaling = (f"weak scaling: {per_process_tasks} tasks per process and step" if per_process_tasks else
               "strong scaling: the same global batch split over the processes")
    print(f"main job ({job}) from one fine-tuned planner, {one['steps']} RLTF steps x "
          f"{one['plans'] // max(one['steps'], 1)} plans (1 process), {many['plans'] // max(many['steps'], 1)} "
          f"({many['processes']}); {scaling}; one thread per process; CPU s = process CPU time "
          "(time.process_time), summed over processes")
    print()
    print("| processes | RLTF plans/s (wall) | per step (wall, median) | RLTF plans/s (CPU) | RLTF CPU s | job CPU s | "
          "job wall s | cache hit rate |")
    print("|---|---|---|---|---|---|---|---|")
    for pair in pairs:
        for r in pair:
            print(f"| {r['processes']} | {r['plans_per_s_wall']:.1f} | {r['step_plans_per_s']:.1f} | "
                  f"{r['plans_per_s_cpu']:.1f} | {r['rltf_cpu_s']:.1f} | "
                  f"{r['job_cpu_s']:.1f} | {r['job_wall_s']:.0f} | {r['cache_hit_rate']:.2f} |")
    print()
    print("phases of the RLTF steps (last pair), seconds summed over the steps, wall / CPU:")
    print("| processes | process | " + " | ".join(PHASES) + " |")
    print("|---|---|" + "---|" * len(PHASES))
    for r in (one, many):
        for rank, ph in enumerate(r["phases"]):
            print(f"| {r['processes']} | {rank} | " +
                  " | ".join(f"{ph['wall'][k]:.2f} / {ph['cpu'][k]:.2f}" for k in PHASES) + " |")
    print()
    for r in (one, many):
        print(f"{r['processes']} process(es): {r['last_line']}")
    keys = {"plans_per_s_wall": "plans_per_s_wall", "plans_per_s_cpu": "plans_per_s_cpu",
            "step_plans_per_s": "step_plans_per_s", "rltf_cpu": "rltf_cpu_s", "job_cpu": "job_cpu_s"}
    each = [{k: b[v] / a[v] for k, v in keys.items()} for a, b in pairs]
    ratios = {k: statistics.median(e[k] for e in each) for k in keys}
    ratios["ceiling"] = ceiling_ratio
    n = many["processes"]
    if len(pairs) > 1:
        print(f"{n}/1 plans/s per pair: " + ", ".join(f"{e['plans_per_s_wall']:.2f}" for e in each) +
              f" (medians below, {len(pairs)} pairs)")
    print(f"{n}/1: RLTF CPU {ratios['rltf_cpu']:.2f}, plans/s per step (wall) {ratios['step_plans_per_s']:.2f}")
    print(f"{n}/1 processes: plans/s {ratios['plans_per_s_wall']:.2f} (CPU {ratios['plans_per_s_cpu']:.2f}), "
          f"job CPU {ratios['job_cpu']:.2f}; cores' ceiling {ceiling_ratio:.2f}")
    return {"pairs": pairs, "ratios": ratios}


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        worker(Path(argv[1]), argv[3:] if argv[2:3] == ["--"] else argv[2:])
        return {}
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30, help="rltf.steps of the short job")
    ap.add_argument("--processes", type=int, default=2, help="the launch compared with one process")
    ap.add_argument("--repeats", type=int, default=1, help="pairs of launches (1, then --processes)")
    ap.add_argument("--per-process-tasks", type=int, default=None,
                    help="weak scaling: rltf.tasks_per_batch = processes x this (default: the config's, split)")
    ap.add_argument("--by-task", action="store_true", help="processes execute their own tasks' plans themselves")
    ap.add_argument("overrides", nargs="*", help="more key=value overrides of the job (every launch)")
    args = ap.parse_args(argv)

    def batch(n: int) -> list[str]:  # weak scaling: each of n processes keeps --per-process-tasks
        return [f"rltf.tasks_per_batch={n * args.per_process_tasks}"] if args.per_process_tasks else []

    config = next((o.split("=", 1)[1] for o in args.overrides if o.startswith("config=")), "configs/default.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        start = fine_tune(Path(tmp), args.overrides)
        pairs = []
        for rep in range(args.repeats):
            pair = []
            for n in (1, args.processes):
                job = [f"output_dir={tmp}", f"run_name=p{n}-{rep}", f"rltf.steps={args.steps}", "rltf.eval_every=0",
                       "logging.progress_bar=false", f"planner.model={start}", "sft.enabled=false", *args.overrides,
                       *batch(n)]
                pair.append(launch(n, Path(tmp) / f"p{n}-{rep}-timing", job, args.by_task))
            pairs.append(pair)
        job = [f"output_dir={tmp}", f"rltf.steps={args.steps}", "rltf.eval_every=0", "logging.progress_bar=false",
               f"planner.model={start}", "sft.enabled=false", *args.overrides, *batch(1)]
        alone = statistics.median(pair[0]["plans_per_s_wall"] for pair in pairs)
        return report(pairs, ceiling(args.processes, job, Path(tmp), alone), config, args.per_process_tasks)


if __name__ == "__main__":
    main()
