"""Benchmark: one RL step of rltf (``RLTFTrainer.train_step``) against one step of TRL's GRPOTrainer.

The same planner — the embedded causal planner (:mod:`rltf.planners.embedded`, ``planner.arch=causal``: a
LLaMA, hidden 128, 2 layers, by default), two copies of the same weights — the same prompts (each
repeat, the tasks RLTF drew are GRPO's prompts) and the same number of completions
(``--tasks`` x ``--k``), timed in the same run, methods taking turns; each has its own train env
(the same config, its own execution cache), so neither reuses the other's executions.

Phases, where both expose them:

* ``generation`` — rltf: :func:`constrained_decoding.sample_plans` (constrained sampling, row by
  row); TRL: ``GRPOTrainer._generate`` (tokenise, ``model.generate`` with unconstrained sampling
  up to ``max_completion_length`` = ``planner.max_plan_tokens`` tokens or EOS, decode);
* ``reward`` — ``env.reward_plans`` of all completions (TRL: inside the reward function);
* ``update`` — the rest of the step. rltf: teacher-forced log π_c of the plans with gradients,
  loss, backward, clip, AdamW step. TRL: the rest of ``_generate_and_score_completions`` (padding,
  group advantages) plus ``training_step`` (forward with gradients, loss, backward) and the
  trainer loop's clip + AdamW step + scheduler step.

The TRL step is the trainer's own pieces called in its loop's order (``training_step`` on the
generation batch: ``_prepare_inputs`` -> ``_generate_and_score_completions``, then loss and backward;
clip; ``optimizer.step``; scheduler step), with GRPO's
settings from :func:`rltf.comparison.grpo.grpo_args` (the RLTF config's lr / temperature / batch).

Warm start (``--warm-start``): ``text`` (default) fine-tunes the planner for ``--sft-epochs`` with the
unconstrained NLL of the reference plans (:func:`rltf.comparison.grpo.text_finetune`), so both methods sample
plan-like text of similar length; ``constrained`` uses rltf's SFT (TRL then samples
``max_plan_tokens`` tokens of near-uniform text, see :mod:`rltf.comparison.grpo`); ``none``: random weights.

    python benchmarks/rl_step.py [--repeats 5] [--warmup 1] [--tasks 8] [--k 8] [--threads 1]

Per-step times are medians over ``--repeats`` (after ``--warmup`` untimed steps of each), wall seconds
per phase and CPU seconds (``time.process_time``: fairer on cores shared with other jobs) per step.

The two steps do not do the same work: rltf samples only valid plans and executes all of them,
while only the share of TRL's texts that parse as a plan is executed (~15% after the text warm
start; the others score 0 without running anything). So the per-step table and ratios (``context,
per step: rltf/grpo step time <ratio>, step CPU time <ratio>; ...``, with the reward's share of each
step) are context; the headline, the last two lines, is in the units of the work done, measured in
the same run:

* ``CPU s per valid plan executed: rltf <s>, grpo <s>; rltf/grpo <ratio>`` -- the CPU seconds of the
  timed steps divided by the valid plans they executed (counted: ``valid plans executed per step``);
* ``CPU s to train reward <target>: rltf <s>, grpo <s>; rltf/grpo <ratio>`` -- both methods keep
  training (``--reward-steps`` steps in all, the timed ones included); the first step whose train
  reward, averaged over the last ``--window`` steps, reaches the target, and the CPU seconds of the
  steps up to it. A method that does not reach it is reported ``not reached in N steps``; when only
  TRL misses it, its CPU so far bounds the ratio (``rltf/grpo < <bound>``). The target is ``--target``,
  or a first-step reward plus ``--gain``: by default (``--target-from lower``) the lower of the two
  (the same fine-tuned planner sampled each method's way; TRL's invalid texts score 0, so its start
  is the lower): a reward both can reach, which rltf's valid-only start may already meet;
  ``--target-from higher``: the higher start, which both must learn to pass.

``--reward-workers N`` (default 2; 0: not measured) adds, above the headline, the wall and CPU seconds of an
rltf step (median over ``--repeats`` after ``--warmup``) with the reward executed in the learner
(``rltf.reward_workers=0``) and by N worker processes while the learner scores the plans
(:mod:`rltf.rl.reward_workers`), each from a copy of the same warm-started planner and its own env: ``rltf step with
the reward in the learner: <s> wall, <s> CPU; with N reward workers: <s> wall, <s> CPU (learner <s> + workers <s>);
wall ratio <r>; <c> usable cores``. CPU is the learner's ``process_time`` plus the workers' own; on cores
shared with other jobs the wall is the noisier figure.

``--planner smollm2`` measures instead what reading each prompt once saves on a real LLM:
CPU seconds per sampled and scored plan on SmolLM2-135M-Instruct with LoRA, each prompt read
once per call (``share_prompt``) against once per row (:mod:`benchmarks.prompt_sharing`; the last
line is ``sampled+scored plan before/after: <ratio>``).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402

import envs  # noqa: E402
import rltf.rl.trainer as rltf_trainer  # noqa: E402
from benchmarks import prompt_sharing as sharing  # noqa: E402
from constrained_decoding.prompts import format_prompt  # noqa: E402
from rltf.comparison.grpo import make_grpo_trainer, text_finetune  # noqa: E402
from rltf.config.loading import load_config  # noqa: E402
from rltf.planners.embedded import build_embedded_planner  # noqa: E402
from rltf.rl import reward_workers  # noqa: E402
from rltf.rl.sft import supervised_finetune  # noqa: E402

PHASES = ("generation", "reward", "update")


class Clock:
    """Accumulates wall time per (method, phase) of the step being timed."""

    def __init__(self):
        self.method: str | None = None
        self.step: dict[str, float] = defaultdict(float)

    @contextmanager
    def phase(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.step[name] += time.perf_counter() - t0

    def wrap(self, fn, name: str):
        def timed(*args, **kwargs):
            with self.phase(name):
                return fn(*args, **kwargs)
        return timed

    def start(self) -> None:
        self.step = defaultdict(float)


def build(args, tmp: Path):
    """Config, the warm-started planner (two copies), the two train envs, the RLTF and TRL trainers."""
    cfg = load_config([f"output_dir={tmp}", "run_name=bench", "planner.arch=causal", f"seed={args.seed}",
                       f"rltf.tasks_per_batch={args.tasks}", f"rltf.k_samples={args.k}", f"rltf.steps={10**6}",
                       "rltf.entropy_coef=0", "rltf.eval_every=0", "logging.progress_bar=false",
                       f"planner.embedded.d_model={args.d_model}", f"planner.embedded.num_layers={args.layers}",
                       f"planner.embedded.d_ff={2 * args.d_model}", f"planner.max_plan_tokens={args.max_tokens}"])
    env_rltf, _ = envs.make_train_and_held_out(cfg.env)
    env_grpo, _ = envs.make_train_and_held_out(cfg.env)
    planner = build_embedded_planner(cfg.planner.embedded, arch="causal")
    if args.warm_start == "text" and args.sft_epochs:
        text_finetune(planner, env_rltf.tasks(), epochs=args.sft_epochs, lr=cfg.sft.lr,
                      batch_size=cfg.sft.batch_size, seed=cfg.seed)
    elif args.warm_start == "constrained" and args.sft_epochs:
        supervised_finetune(planner, env_rltf, env_rltf.tasks(), epochs=args.sft_epochs, lr=cfg.sft.lr,
                            batch_size=cfg.sft.batch_size, seed=cfg.seed, accelerator=Accelerator(cpu=True),
                            progress=False)
    planner.model.eval()
    twin = copy.deepcopy(planner)

    clock = Clock()
    grpo, reward = make_grpo_trainer(cfg, twin, env_grpo, env_grpo.tasks(), tmp / "grpo", cfg.grpo)
    grpo.create_optimizer_and_scheduler(num_training_steps=10**6)
    grpo.current_gradient_accumulation_steps = 1  # what the trainer loop sets for one batch per step
    rl = rltf_trainer.RLTFTrainer(cfg, planner, env_rltf, grpo.accelerator)

    # phase timers: rltf's sampler (module global of rltf.rl.trainer, restored by run()) and each env's
    # reward_plans; TRL's _generate
    rltf_trainer.sample_plans = clock.wrap(rltf_trainer.sample_plans, "generation")
    for env in (env_rltf, env_grpo):
        env.reward_plans = clock.wrap(env.reward_plans, "reward")
    grpo._generate = clock.wrap(grpo._generate, "generation")
    return cfg, rl, grpo, reward, clock


def grpo_step(grpo, task_ids: list[int], k: int, prompt_of) -> dict:
    """One optimiser step of TRL's GRPOTrainer on these prompts (its training loop's pieces)."""
    model = grpo.model
    model.train()
    rows = [{"prompt": prompt_of[t], "task_id": t} for t in task_ids for _ in range(k)]  # RepeatSampler order
    # training_step: _prepare_inputs -> _generate_and_score_completions (generate, reward, advantages),
    # then compute_loss (forward with gradients) and backward
    loss = grpo.training_step(model, rows, None)
    grpo.accelerator.clip_grad_norm_(model.parameters(), grpo.args.max_grad_norm)
    grpo.optimizer.step()
    grpo.lr_scheduler.step()
    model.zero_grad(set_to_none=True)
    grpo.state.global_step += 1
    return {"loss": float(loss.detach())}


def timed(clock: Clock, fn) -> tuple[dict[str, float], object]:
    """Wall seconds per phase and in total, and CPU seconds (``cpu``) of one call of ``fn``; its result."""
    clock.start()
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {p: clock.step.get(p, 0.0) for p in ("generation", "reward")}
    out["update"] = total - out["generation"] - out["reward"]
    out["total"] = total
    out["cpu"] = cpu
    return out, result


def run(args) -> dict:
    torch.set_num_threads(args.threads)

    sampler = rltf_trainer.sample_plans
    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = _measure(args, Path(tmp))
        finally:
            rltf_trainer.sample_plans = sampler
    return _report(args, *result)


def _measure(args, tmp: Path):
    cfg, rl, grpo, reward, clock = build(args, tmp)
    start = copy.deepcopy(rl.planner)  # (the reward-workers line trains copies of the same warm start)
    prompt_of = {t.id: format_prompt(t.description, False) for t in rl.env.tasks()}
    times: dict[str, list[dict]] = {"rltf": [], "grpo": []}
    plans: dict[str, list[float]] = {"rltf": [], "grpo": []}  # every step's mean train reward
    cpu: dict[str, list[float]] = {"rltf": [], "grpo": []}  # every step's CPU seconds
    executed: dict[str, list[int]] = {"rltf": [], "grpo": []}  # valid plans executed, per timed step
    for r in range(max(args.warmup + args.repeats, args.reward_steps)):
        rltf_t, row = timed(clock, rl.train_step)
        flat = rl.last_batch.task_ids
        drawn = flat[:: cfg.rltf.k_samples]  # the tasks RLTF drew, in order
        grpo_t, _ = timed(clock, lambda d=drawn: grpo_step(grpo, d, cfg.rltf.k_samples, prompt_of))
        if args.warmup <= r < args.warmup + args.repeats:
            times["rltf"].append(rltf_t)
            times["grpo"].append(grpo_t)
            executed["rltf"].append(round(row["train/valid"] * len(flat)))
            executed["grpo"].append(sum(reward.calls[-1].valid))
        cpu["rltf"].append(rltf_t["cpu"])
        cpu["grpo"].append(grpo_t["cpu"])
        plans["rltf"].append(float(rl.last_batch.rewards.mean()))
        plans["grpo"].append(float(sum(reward.calls[-1].rewards) / len(reward.calls[-1].rewards)))
    valid = sum(sum(c.valid) for c in reward.calls) / sum(len(c.valid) for c in reward.calls)
    lengths = grpo._metrics["train"].get("completions/mean_length", [])
    workers = workers_wall(args, cfg, start) if args.reward_workers else None
    return times, plans, valid, lengths, cpu, executed, workers


def workers_wall(args, cfg, start) -> dict[int, dict[str, float]]:
    """Per pool size (0 and ``--reward-workers``): the median wall, learner CPU and workers' CPU
    seconds of an rltf step, each size training its own copy of ``start`` on its own env."""
    out = {}
    for n in (0, args.reward_workers):
        c = copy.deepcopy(cfg)
        c.rltf.reward_workers = n
        env, _ = envs.make_train_and_held_out(c.env)
        trainer = rltf_trainer.RLTFTrainer(c, copy.deepcopy(start), env, Accelerator(cpu=True))
        steps = []
        try:
            for r in range(args.warmup + args.repeats):
                w0, c0 = time.perf_counter(), time.process_time()
                k0 = sum(trainer._pool.cpu_s) if trainer._pool is not None else 0.0
                trainer.train_step()
                k1 = sum(trainer._pool.cpu_s) if trainer._pool is not None else 0.0
                if r >= args.warmup:
                    steps.append({"wall": time.perf_counter() - w0, "learner": time.process_time() - c0,
                                  "workers": k1 - k0})
        finally:
            trainer.close()
        out[n] = {k: statistics.median(s[k] for s in steps) for k in ("wall", "learner", "workers")}
        out[n]["cpu"] = out[n]["learner"] + out[n]["workers"]
    return out


def time_to_reward(rewards: list[float], cpu: list[float], target: float, window: int) -> tuple[int, float] | None:
    """The first step (1-based) whose train reward, averaged over it and up to ``window - 1`` steps
    before it, reaches ``target``, with the CPU seconds of the steps up to it; None if none does."""
    for i in range(len(rewards)):
        recent = rewards[max(0, i + 1 - window): i + 1]
        if sum(recent) / len(recent) >= target:
            return i + 1, sum(cpu[: i + 1])
    return None


def _target(args, starts: dict[str, float]) -> tuple[float, str]:
    """The train reward to reach and how it was chosen: ``--target``, or a start (``--target-from``: the
    lower or the higher of the two methods' first-step rewards) plus ``--gain``."""
    if args.target is not None:
        return args.target, "--target"
    base = min(starts.values()) if args.target_from == "lower" else max(starts.values())
    return base + args.gain, f"the {args.target_from} start {base:.3f} + {args.gain:g}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _report(args, times, plans, valid, lengths, cpu, executed, workers) -> dict:
    med = {m: {p: statistics.median(x[p] for x in ts) for p in (*PHASES, "total", "cpu")} for m, ts in times.items()}
    n = args.tasks * args.k
    print(f"one RL step, {args.tasks} prompts x {args.k} completions = {n} plans; embedded causal planner "
          f"(hidden {args.d_model}, {args.layers} layers), warm start {args.warm_start} ({args.sft_epochs} epochs); "
          f"{args.threads} torch thread(s); median of {args.repeats} repeats after {args.warmup} warm-up")
    print(f"TRL completions: {valid:.2f} valid plans, mean length "
          f"{statistics.mean(lengths) if lengths else float('nan'):.1f} tokens; mean train reward "
          f"rltf {statistics.mean(plans['rltf']):.3f}, grpo {statistics.mean(plans['grpo']):.3f}")
    print()
    print("per step (context: the two steps do not do the same work): wall seconds per phase, CPU seconds in all")
    print("| phase | rltf (s) | TRL GRPO (s) | rltf/grpo |")
    print("|---|---|---|---|")
    for p in (*PHASES, "total", "cpu"):
        a, b = med["rltf"][p], med["grpo"][p]
        print(f"| {p} | {a:.3f} | {b:.3f} | {a / b if b > 0 else float('nan'):.2f} |")
    policy = {m: med[m]["total"] - med[m]["reward"] for m in med}
    share = {m: med[m]["reward"] / med[m]["total"] for m in med}
    ratio, cpu_ratio = med["rltf"]["total"] / med["grpo"]["total"], med["rltf"]["cpu"] / med["grpo"]["cpu"]
    print(f"context, per step: rltf/grpo step time {ratio:.2f}, step CPU time {cpu_ratio:.2f}; without the reward "
          f"(policy compute only) {policy['rltf'] / policy['grpo']:.2f}; the reward's share of the step: rltf "
          f"{share['rltf']:.2f}, grpo {share['grpo']:.2f}")
    # the same work? rltf executes every sampled plan (all valid), TRL only the texts that parse
    per_step = {m: statistics.mean(executed[m]) for m in executed}
    counts = {m: sum(executed[m]) for m in executed}
    print(f"valid plans executed per step: rltf {per_step['rltf']:.1f}, grpo {per_step['grpo']:.1f} (of {n}); "
          f"in the {args.repeats} timed steps: rltf {counts['rltf']}, grpo {counts['grpo']}")
    # how long to a fixed train reward (both start from the same planner; TRL's invalid texts score 0)
    starts = {m: plans[m][0] for m in plans}
    target, how = _target(args, starts)
    reached = {m: time_to_reward(plans[m], cpu[m], target, args.window) for m in plans}
    steps = len(plans["rltf"])
    spent = {m: sum(cpu[m]) for m in cpu}
    said = {m: f"step {r[0]}" if r else f"not reached in {steps} steps ({spent[m]:.1f} CPU s spent)"
            for m, r in reached.items()}
    print(f"train reward target {target:.3f} ({how}; mean of the last {args.window} steps; starts: rltf "
          f"{starts['rltf']:.3f}, grpo {starts['grpo']:.3f}; last: rltf {plans['rltf'][-1]:.3f}, grpo "
          f"{plans['grpo'][-1]:.3f}): rltf {said['rltf']}; grpo {said['grpo']}")
    if workers:
        one, many = workers[0], workers[args.reward_workers]
        print(f"rltf step with the reward in the learner: {one['wall']:.3f} s wall, {one['cpu']:.3f} s CPU; with "
              f"{args.reward_workers} reward workers: {many['wall']:.3f} s wall, {many['cpu']:.3f} s CPU (learner "
              f"{many['learner']:.3f} + workers {many['workers']:.3f}); wall ratio {many['wall'] / one['wall']:.2f}; "
              f"{reward_workers.usable_cores()} usable cores")
    # the headline, in the units of the work done: CPU per valid plan executed, CPU to the target
    per_valid = {m: sum(x["cpu"] for x in times[m]) / counts[m] if counts[m] else None for m in times}
    valid_ratio = _ratio(per_valid["rltf"], per_valid["grpo"])
    to_cpu = {m: r[1] if r else None for m, r in reached.items()}
    to_reward = _ratio(to_cpu["rltf"], to_cpu["grpo"])
    print()
    print("CPU s per valid plan executed: " + ", ".join(
        f"{m} {per_valid[m]:.4f}" if per_valid[m] is not None else f"{m} n/a (no valid plan executed)"
        for m in per_valid) + f"; rltf/grpo {_fmt(valid_ratio)}")
    if to_reward is not None:
        versus = f"rltf/grpo {to_reward:.2f}"
    elif to_cpu["rltf"] is not None:  # grpo did not get there: its CPU so far bounds the ratio from above
        versus = f"rltf/grpo < {to_cpu['rltf'] / spent['grpo']:.2f} (grpo not reached)"
    else:
        versus = "rltf/grpo n/a (" + " and ".join(m for m in to_cpu if to_cpu[m] is None) + " not reached)"
    print(f"CPU s to train reward {target:.3f}: " + ", ".join(
        f"{m} {to_cpu[m]:.2f}" if to_cpu[m] is not None else f"{m} not reached in {steps} steps" for m in to_cpu)
        + f"; {versus}")
    return {"median": med, "ratio": ratio, "valid": valid, "cpu_ratio": cpu_ratio, "per_valid_plan_ratio": valid_ratio,
            "cpu_per_valid_plan": per_valid, "valid_executed": counts, "valid_per_step": per_step,
            "reward_share": share, "target": target, "reached": reached, "cpu_to_reward": to_cpu,
            "to_reward_ratio": to_reward, "rewards": plans, "steps": steps, "reward_workers": workers}


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--tasks", type=int, default=8, help="prompts per step (rltf.tasks_per_batch)")
    ap.add_argument("--k", type=int, default=8, help="completions per prompt (rltf.k_samples = num_generations)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64, help="planner.max_plan_tokens (TRL max_completion_length)")
    ap.add_argument("--reward-steps", type=int, default=30,
                    help="steps each method trains for the time to a fixed train reward (at least the timed ones)")
    ap.add_argument("--gain", type=float, default=0.2,
                    help="the fixed train reward is a first-step reward (--target-from) plus this")
    ap.add_argument("--target-from", choices=("lower", "higher"), default="lower",
                    help="the start the target adds --gain to: the lower of the two methods' first-step rewards "
                         "(a reward both can reach) or the higher (one neither has at the start)")
    ap.add_argument("--target", type=float, default=None, help="the fixed train reward itself (overrides --gain)")
    ap.add_argument("--window", type=int, default=3, help="steps the train reward is averaged over")
    ap.add_argument("--reward-workers", type=int, default=2,
                    help="also time an rltf step with the reward in the learner and with this many reward workers "
                         "(rltf.reward_workers; 0: not measured)")
    ap.add_argument("--warm-start", choices=("text", "constrained", "none"), default="text")
    ap.add_argument("--sft-epochs", type=int, default=20)
    ap.add_argument("--planner", choices=("embedded", "smollm2"), default="embedded",
                    help="embedded: one rltf step against one TRL GRPO step; smollm2: CPU seconds per plan on "
                         "SmolLM2-135M-Instruct with each prompt read once vs once per row "
                         "(benchmarks/prompt_sharing.py)")
    sharing.add_arguments(ap)
    args = ap.parse_args(argv)
    if args.planner == "smollm2":
        torch.set_num_threads(args.threads)
        return sharing.run(args)
    return run(args)


if __name__ == "__main__":
    main()
