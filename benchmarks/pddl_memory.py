"""The pddl env's memory and the legal grammar's expansion cost (issue #50 item 6).

    python benchmarks/pddl_memory.py [--arm legal-k64-rltf] [--suite pddl-verdict] [--run-args rltf.steps=4 ...]
    python benchmarks/pddl_memory.py --skip-run          # the expansion cost alone (seconds)

**Peak memory of one seed's run.** One arm of a verdict suite (``configs/compare/pddl-verdict.yaml``; the default
arm: RLTF under the legal grammar warm-started on 64 plans) runs once, seed 0, as the comparison runs it (its
entry point with the suite's ``common`` and the arm's ``overrides``), at the tiny sizes of ``--run-args``
(default: 4 steps, 50 test instances; every later key wins), into a temporary folder. Its peak resident set
(``getrusage(RUSAGE_CHILDREN).ru_maxrss``: the largest of the run's processes) and CPU seconds are printed.

**The legal grammar's expansion cost per row-step.** The decode of ``benchmarks/decoding_pddl.py`` (its setup:
generated Blocksworld test tasks of ``--pddl-sizes`` blocks, the embedded planner with random weights, a cap of
32 actions; ``--samples`` plans sampled per task): the same sampling from freshly built legal grammars (every
state it reaches expanded on the way) and again (nothing new), the difference over the decode's row-steps
(rows x decoder passes) -- that section reports the difference as a share of the decode; here it is per
row-step and per expanded state, beside the states expanded and the resident memory they added.
Last line: ``pddl memory: run peak <MiB> MiB (<arm>), legal expansion <us> us per row-step``.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout: benchmarks.* and rltf importable

from benchmarks.decoding_common import constrained_search, count_passes  # noqa: E402
from benchmarks.decoding_pddl import grammars_of, pddl_setup  # noqa: E402  (decoding_pddl's setup, reused)
from rltf.comparison.suites import load_suite  # noqa: E402

RUN_ARGS = ["rltf.steps=4", "env.pddl.test_size=50", "rltf.eval_every=0", "logging.progress_bar=false"]


def rss_mib() -> float:
    """This process's resident memory now (Linux ``/proc/self/statm``), MiB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def run_peak(suite_name: str, arm_name: str, run_args: list[str]) -> tuple[float, float, float, list[str]]:
    """``(peak RSS MiB, CPU s, wall s, command)`` of one seed-0 run of ``arm_name`` at ``run_args``'s sizes."""
    suite = load_suite(suite_name)
    arm = dataclasses.replace(suite.arm(arm_name), start_from=None)  # standalone: its own warm start, no other run
    with tempfile.TemporaryDirectory(prefix="pddl-memory-") as tmp:
        cmd = [sys.executable, *arm.command(suite.common, run_args, 0, Path(tmp))]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"error: the {arm_name} run failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return after.ru_maxrss / 1024, cpu, wall, cmd  # ru_maxrss: KiB on Linux


def expansion_cost(args) -> dict[str, float]:
    """The legal grammar's expansion per row-step (module docstring), from ``decoding_pddl``'s setup."""
    env, tasks, model, tok = pddl_setup(args)
    prompts = [t.description for t in tasks]
    with torch.inference_mode():
        constrained_search(model, tok, prompts, grammars_of(env, tasks, tok, "legal"), "sample", args.samples)()
        rss0 = rss_mib()  # the model and the decoder's own buffers warmed up; no legal state of these grammars yet
        grammars = grammars_of(env, tasks, tok, "legal")
        run = constrained_search(model, tok, prompts, grammars, "sample", args.samples)
        t = time.process_time()
        run()
        cold = time.process_time() - t
        grown = rss_mib() - rss0
        expanded = sum(g.expansions for g in grammars)
        warm = min(_timed(run) for _ in range(args.repeats))
        _, row_steps = count_passes(run, model.get_decoder())
    return {"cold_s": cold, "warm_s": warm, "row_steps": row_steps, "expanded": expanded, "rss_grown_mib": grown,
            "us_per_row_step": 1e6 * (cold - warm) / row_steps, "us_per_state": 1e6 * (cold - warm) / max(1, expanded)}


def _timed(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", default="pddl-verdict", help="the verdict suite whose arm runs (configs/compare/)")
    p.add_argument("--arm", default="legal-k64-rltf", help="the arm run once, seed 0")
    p.add_argument("--run-args", nargs="*", default=RUN_ARGS, help="key=value after the arm's own (tiny sizes)")
    p.add_argument("--skip-run", action="store_true", help="measure the expansion cost alone")
    p.add_argument("--pddl-sizes", type=int, nargs=2, default=[5, 8], help="Blocksworld blocks of the decoded tasks")
    p.add_argument("--prompts", type=int, default=8, help="test tasks decoded")
    p.add_argument("--samples", type=int, default=8, help="plans sampled per task")
    p.add_argument("--repeats", type=int, default=3, help="warm decodes timed (the fastest is kept)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    cost = expansion_cost(args)
    print(f"legal grammar, {args.prompts} Blocksworld tasks of {args.pddl_sizes[0]}-{args.pddl_sizes[1]} blocks, "
          f"{args.samples} samples each: cold {cost['cold_s']:.3f} CPU s, warm {cost['warm_s']:.3f} CPU s; "
          f"{cost['expanded']} states expanded over {cost['row_steps']} row-steps: {cost['us_per_row_step']:.1f} us "
          f"per row-step, {cost['us_per_state']:.1f} us per state; resident memory +{cost['rss_grown_mib']:.1f} MiB")
    peak = ""
    if not args.skip_run:
        mib, cpu, wall, cmd = run_peak(args.suite, args.arm, args.run_args)
        print(f"one seed of {args.suite}/{args.arm} ({' '.join(args.run_args)}): peak RSS {mib:.0f} MiB, "
              f"{cpu:.0f} CPU s, {wall:.0f} s wall\n  {' '.join(cmd[1:])}")
        peak = f"run peak {mib:.0f} MiB ({args.arm}), "
    print(f"pddl memory: {peak}legal expansion {cost['us_per_row_step']:.1f} us per row-step")


if __name__ == "__main__":
    main()
