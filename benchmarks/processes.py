"""Benchmark: the main job on one process against two (torchrun, CPU), measured in the same run.

Each launch is the README's CPU launch of the main job, ``ACCELERATE_USE_CPU=true torchrun
--standalone --nproc_per_node N train/rltf.py``, with ``OMP_NUM_THREADS=1`` (one thread per process),
on a short default job (``configs/default.yaml`` with ``rltf.steps=--steps``; every stage: zero/few-shot,
SFT, RLTF, held-out evaluation). Every process runs this file's ``--worker`` mode, which is
``train/rltf.py``'s ``main`` with the RLTF stage timed (wall time between barriers, and each
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

Both launches read the same on-disk oracle store (``envs/openagi/oracle/store.py``): the first fills
what is missing, so job CPU compares the jobs with a warm oracle (``RLTF_ORACLE_CACHE=0`` in the
environment: both search it, each process its share of the held-out tasks).

    python benchmarks/processes.py [--steps 10] [--processes 2] [key=value ...]

The last line is ``2/1 processes: plans/s <wall ratio> (CPU <cpu ratio>), job CPU <ratio>``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ the worker
def worker(out: Path, job_args: list[str]) -> None:
    """One process of the launch: ``train/rltf.py``'s main with the RLTF stage timed."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from rltf.stages import plan_job
    from train import rltf as recipe

    timing: dict = {}
    train_rltf = plan_job.train_rltf

    def timed_train_rltf(run, planner, envs):
        run.acc.wait_for_everyone()
        wall, cpu = time.perf_counter(), time.process_time()
        history = train_rltf(run, planner, envs)
        timing.update(rltf_cpu_s=time.process_time() - cpu)
        run.acc.wait_for_everyone()
        timing.update(rltf_wall_s=time.perf_counter() - wall, rank=run.acc.process_index,
                      world=run.acc.num_processes, steps=len(history),
                      plans=len(history) * run.cfg.rltf.tasks_per_batch * run.cfg.rltf.k_samples,
                      step_plans_per_s=statistics.median(r["train/plans_per_s"] for r in history))
        stats = envs.train.cache_stats()
        timing["own_cache_hit_rate"] = stats.hit_rate if stats else None
        return history

    plan_job.train_rltf = timed_train_rltf
    recipe.main(job_args)
    timing["job_cpu_s"] = time.process_time()
    (out / f"rank{timing.get('rank', 0)}.json").write_text(json.dumps(timing))


# ------------------------------------------------------------------------------ the launches
def launch(processes: int, out: Path, job_args: list[str]) -> dict:
    """The main job on ``processes`` CPU processes; what its workers measured, and its last line."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
           "TOKENIZERS_PARALLELISM": "false"}
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
            "last_line": proc.stdout.strip().splitlines()[-1]}


def report(runs: list[dict]) -> dict:
    one, many = runs[0], runs[-1]
    print(f"main job (configs/default.yaml), {one['steps']} RLTF steps x {one['plans'] // max(one['steps'], 1)} plans; "
          "one thread per process; CPU s = process CPU time (time.process_time), summed over processes")
    print()
    print("| processes | RLTF plans/s (wall) | per step (wall, median) | RLTF plans/s (CPU) | RLTF CPU s | job CPU s | "
          "job wall s | cache hit rate |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        print(f"| {r['processes']} | {r['plans_per_s_wall']:.1f} | {r['step_plans_per_s']:.1f} | "
              f"{r['plans_per_s_cpu']:.1f} | {r['rltf_cpu_s']:.1f} | "
              f"{r['job_cpu_s']:.1f} | {r['job_wall_s']:.0f} | {r['cache_hit_rate']:.2f} |")
    print()
    for r in runs:
        print(f"{r['processes']} process(es): {r['last_line']}")
    ratios = {"plans_per_s_wall": many["plans_per_s_wall"] / one["plans_per_s_wall"],
              "plans_per_s_cpu": many["plans_per_s_cpu"] / one["plans_per_s_cpu"],
              "step_plans_per_s": many["step_plans_per_s"] / one["step_plans_per_s"],
              "rltf_cpu": many["rltf_cpu_s"] / one["rltf_cpu_s"],
              "job_cpu": many["job_cpu_s"] / one["job_cpu_s"]}
    n = many["processes"]
    print(f"{n}/1: RLTF CPU {ratios['rltf_cpu']:.2f}, plans/s per step (wall) {ratios['step_plans_per_s']:.2f}")
    print(f"{n}/1 processes: plans/s {ratios['plans_per_s_wall']:.2f} (CPU {ratios['plans_per_s_cpu']:.2f}), "
          f"job CPU {ratios['job_cpu']:.2f}")
    return {"runs": runs, "ratios": ratios}


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        worker(Path(argv[1]), argv[3:] if argv[2:3] == ["--"] else argv[2:])
        return {}
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10, help="rltf.steps of the short job")
    ap.add_argument("--processes", type=int, default=2, help="the launch compared with one process")
    ap.add_argument("overrides", nargs="*", help="more key=value overrides of the job (both launches)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for n in (1, args.processes):
            job = [f"output_dir={tmp}", f"run_name=p{n}", f"rltf.steps={args.steps}", "logging.progress_bar=false",
                   *args.overrides]
            runs.append(launch(n, Path(tmp) / f"p{n}-timing", job))
        return report(runs)


if __name__ == "__main__":
    main()
