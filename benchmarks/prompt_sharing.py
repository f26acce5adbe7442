"""Benchmark: CPU seconds per plan with each prompt read once (``share_prompt``) or once per row.

The K samples of a task share one prompt, and so do their teacher-forced re-scorings and the rows
of one plan. With ``share_prompt=True`` (the default of :func:`constrained_decoding.sample_plans`
and :func:`constrained_decoding.plan_logprobs`) each distinct prompt goes through the model once
per call: a causal planner reads it as one prefix (with gradients when scoring) whose cache every
row continues; ``share_prompt=False`` reads it in every row (the reference: the same numbers).
Both run in the same process on the same planner, taking turns, on the same tasks and seeds:

* ``sampling`` — :func:`sample_plans`, ``--k`` plans for each of ``--tasks`` train tasks;
* ``scoring`` — the RL update's half: :func:`plan_logprobs` of those plans with gradients, an
  RL-style weighted loss and its backward;
* ``sft`` — one SFT step: :func:`plan_logprobs` of the tasks' reference plans, NLL, backward.

Seconds are ``time.process_time`` (CPU time of this process) with ``--threads`` torch threads
(default 1), per plan (sampling and scoring: per sampled plan; SFT: per reference plan), median
over ``--repeats``. What changed for the trainer: before this switch existed, sampling already read
a prompt once per task (its K samples share a prompt index), and scoring and SFT read it in every
row; so "before" is sampling shared + scoring unshared, "after" both shared.

The planner is SmolLM2-135M-Instruct (``planner.model=smollm2``, :mod:`rltf.planners.smollm2`;
float32 on the CPU) with a fresh LoRA adapter (r 8) on every attention and MLP projection, so the
prompt positions carry trainable weights; the tasks are the default config's train env's first
``--tasks`` (OpenAGI, prompts = task descriptions as the trainer passes them). Run through
``python benchmarks/rl_step.py --planner smollm2 [--tasks 8] [--k 8] [--repeats 3]``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch

import envs
from constrained_decoding.decode import sample_plans
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.prompts import Conversation, encode_prompts
from rltf.config.loading import load_config
from rltf.planners.loading import load_planner

PHASES = ("sampling", "scoring", "sft")
LORA_TARGETS = "[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]"


def build(args, tmp: Path):
    """The config, the planner (SmolLM2 + LoRA) and the train env's first ``args.tasks`` tasks with a reference plan."""
    cfg = load_config([f"output_dir={tmp}", "run_name=bench", "planner.model=smollm2", "planner.arch=causal",
                       "planner.dtype=float32", "planner.lora.enabled=true", "planner.lora.r=8",
                       "planner.lora.alpha=16", f"planner.lora.target_modules={LORA_TARGETS}",
                       f"seed={args.seed}", "logging.progress_bar=false"])
    planner = load_planner(cfg.planner)
    env, _ = envs.make_train_and_held_out(cfg.env)
    tasks = [t for t in env.tasks() if t.reference_plan is not None][: args.tasks]
    return cfg, planner, env, tasks


def task_prompts(env, tasks, kind: str) -> list:
    """``task``: the task descriptions, as the trainer passes them (SmolLM2 reads them in its chat
    template, with the template's default system message); ``instructed``: the env's plan
    instructions (OpenAGI: every tool with a one-line description) as the system message first."""
    if kind == "task":
        return [t.description for t in tasks]
    return [Conversation(t.description, env.plan_instructions()) for t in tasks]


def one_round(planner, env, tasks, prompts, k: int, temperature: float, seed: int, share_prompt: bool):
    """CPU seconds of each phase (one call each) and the scored log-probabilities."""
    model, tok = planner.model, planner.tokenizer
    grammars = [env.grammar(tok, t) for t in tasks]
    model.eval()
    seconds = {}
    t0 = time.process_time()
    decoded = sample_plans(model, tok, prompts, grammars, k, temperature, seed=seed, share_prompt=share_prompt)
    seconds["sampling"] = time.process_time() - t0
    plans = [d for ds in decoded for d in ds]
    plan_prompts = [p for p, ds in zip(prompts, decoded) for _ in ds]
    weights = torch.linspace(-1.0, 1.0, len(plans))  # advantages of both signs
    t0 = time.process_time()
    logp = plan_logprobs(model, tok, plan_prompts, [d.grammar for d in plans], plans, temperature,
                         share_prompt=share_prompt)
    (-(weights * logp).mean()).backward()
    seconds["scoring"] = time.process_time() - t0
    model.zero_grad(set_to_none=True)
    t0 = time.process_time()
    ref = plan_logprobs(model, tok, prompts, grammars, [t.reference_plan for t in tasks], share_prompt=share_prompt)
    (-ref.mean()).backward()
    seconds["sft"] = time.process_time() - t0
    model.zero_grad(set_to_none=True)
    return seconds, decoded, logp.detach(), ref.detach()


def measure(args) -> dict:
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        _, planner, env, tasks = build(args, Path(tmp))
        prompts = task_prompts(env, tasks, args.prompt)
        prompt_tokens = [len(x) for x in encode_prompts(planner.tokenizer, prompts, planner.is_encoder_decoder)]
        per_plan: dict[bool, dict[str, list[float]]] = {s: {p: [] for p in PHASES} for s in (False, True)}
        worst = 0.0
        rows = distinct = 0
        for r in range(args.warmup + args.repeats):
            got = {}
            for share in (False, True) if r % 2 == 0 else (True, False):  # taking turns
                seconds, decoded, logp, ref = one_round(planner, env, tasks, prompts, args.k, args.temperature,
                                                        args.seed + r, share)
                got[share] = (decoded, logp, ref)
                if r >= args.warmup:
                    n = {"sampling": len(logp), "scoring": len(logp), "sft": len(ref)}
                    for p in PHASES:
                        per_plan[share][p].append(seconds[p] / n[p])
            (d0, l0, f0), (d1, l1, f1) = got[False], got[True]
            assert [[d.rows for d in ds] for ds in d0] == [[d.rows for d in ds] for ds in d1], "different samples"
            worst = max(worst, float((l0 - l1).abs().max()), float((f0 - f1).abs().max()))
            rows = sum(len(d.rows) for ds in d1 for d in ds)
            distinct = sum(len({pair for d in ds for pair in d.row_pairs()}) for ds in d1)
    med = {s: {p: statistics.median(v) for p, v in per_plan[s].items()} for s in per_plan}
    return {"median": med, "max_abs_logprob_diff": worst, "prompt_tokens": prompt_tokens, "rows": rows,
            "distinct_rows": distinct,
            "plans": args.tasks * args.k, "tasks": len(tasks)}


def report(args, out: dict) -> dict:
    old, new = out["median"][False], out["median"][True]
    toks = out["prompt_tokens"]
    print(f"{args.planner} + LoRA, {out['tasks']} tasks x {args.k} plans = {out['plans']} sampled plans "
          f"({out['rows']} decoder rows, {out['distinct_rows']} distinct), "
          f"{args.prompt} prompts of {min(toks)}-{max(toks)} tokens; "
          f"{args.threads} torch thread(s); "
          f"CPU seconds per plan, median of {args.repeats} after {args.warmup} warm-up")
    print(f"largest |log-prob difference| between the two paths: {out['max_abs_logprob_diff']:.2e}")
    print()
    print("| phase | prompt per row (s/plan) | prompt once (s/plan) | speed-up |")
    print("|---|---|---|---|")
    for p in PHASES:
        print(f"| {p} | {old[p]:.4f} | {new[p]:.4f} | {old[p] / new[p]:.2f} |")
    before = new["sampling"] + old["scoring"]  # the trainer before: sampling already shared a task's prompt
    after = new["sampling"] + new["scoring"]
    print()
    print(f"sampled and scored plan, before (sampling shared, scoring per row): {before:.4f} s; "
          f"after: {after:.4f} s")
    ratio = before / after
    print(f"sampled+scored plan before/after: {ratio:.2f}")
    out["before"], out["after"], out["ratio"] = before, after, ratio
    return out


def add_arguments(ap) -> None:
    ap.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (rltf.temperature)")
    ap.add_argument("--prompt", choices=("task", "instructed"), default="task",
                    help="task: the task description (what the trainer passes); instructed: the env's plan "
                         "instructions (the tool list) first, as the zero-shot schema prompts")


def run(args) -> dict:
    return report(args, measure(args))
