"""``dry_run=true``: validate a run config and say everything the run would load, loading nothing.

No weights, no datasets, no ``AutoConfig`` (that is a download too): the planner, expert and
metric model ids come from the config and the hf backend's table (``describe_models``), task
counts from the grammar, split sizes from the persisted split, dataset sources from
``envs.openagi.hf.data``, the launch setup from the environment ``accelerate launch`` sets.

    python -m rltf.dry_run config=configs/openagi-flan-t5-large.yaml [key=value ...]
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rltf.config import ConfigError, RunConfig, load_config

# Exhaustive plan search is only affordable with the offline zoo; on the full grammar a VQA task
# alone has millions of valid plans (enumerate_plans under SUITE_LIMITS["full"]).
_ORACLE_NOTE = ("eval.schemas includes 'oracle' (exhaustive plan search): the full suite has up to "
                "~6 million valid plans per task, far too many to execute with hub experts; drop it")


def hf_backend_config(cfg: RunConfig):
    """``env.hf`` as a validated :class:`HFBackendConfig` (a ConfigError naming the key otherwise)."""
    from envs.openagi.hf.config import HFBackendConfig

    try:
        return HFBackendConfig.from_dict(cfg.env.hf)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"bad value for 'env.hf': {e}") from None


def data_sources(cfg: RunConfig) -> dict:
    """``env.datasets`` applied to the default hub sources (a ConfigError naming the key otherwise)."""
    from envs.openagi.hf.sources import resolve_sources

    try:
        return resolve_sources(cfg.env.datasets)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"bad value for 'env.datasets': {e}") from None


def check_env(cfg: RunConfig) -> None:
    """The checks make_envs needs before loading anything: a suite/backend pair that can run and
    well-formed hf / dataset sections."""
    env = cfg.env
    if env.suite == "full" and env.backend != "hf":
        raise ConfigError("'env.suite' is 'full' but 'env.backend' is 'lite': the offline zoo has no machine "
                          "translation, captioning, detection or image generation, and the full suite's German "
                          "targets and metrics come from the hf backend; use env.backend=hf")
    if env.backend == "hf":
        hf_backend_config(cfg)
    if env.suite == "full":
        data_sources(cfg)


def _planner_lines(cfg: RunConfig) -> list[str]:
    p = cfg.planner
    if p.model == "embedded":
        e = p.embedded
        where = (f"embedded T5 built from scratch (d_model {e.d_model}, {e.num_layers}+{e.num_layers} layers, "
                 f"{e.num_heads} heads, d_ff {e.d_ff}, vocab <= {e.vocab_size}; cached under {e.dir})")
        arch = "seq2seq"
    else:
        path = Path(p.model).expanduser()
        if path.is_dir():
            kind = "LoRA adapter directory" if (path / "adapter_config.json").is_file() else "model directory"
            model_type = ""
            cfg_file = path / "config.json"
            if cfg_file.is_file():  # a local file: reading it downloads nothing
                try:
                    model_type = json.loads(cfg_file.read_text()).get("model_type", "")
                except (OSError, ValueError):
                    model_type = ""
            where = f"{p.model} ({kind}{', ' + model_type if model_type else ''})"
        else:
            where = f"{p.model} (hub id: downloaded at the start of the run)"
        arch = p.arch if p.arch != "auto" else "auto (encoder-decoder -> seq2seq, else causal; read from its config at load)"
    lines = [f"planner     {where}", f"            arch {arch}, dtype {p.dtype}"]
    if p.lora.enabled:
        targets = ", ".join(p.lora.target_modules) if p.lora.target_modules else "PEFT's default for the model type"
        lines.append(f"            LoRA r={p.lora.r} alpha={p.lora.alpha} dropout={p.lora.dropout} on [{targets}]"
                     f"{' (4-bit NF4 base: QLoRA)' if p.load_in_4bit else ''}; only the adapter trains")
    else:
        lines.append("            full fine-tuning (every weight trains)")
    lines.append(f"            prompt <= {p.max_prompt_tokens} tokens, plan <= {p.max_plan_tokens} tokens")
    return lines


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
        import torch

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


def _suite_lines(cfg: RunConfig) -> list[str]:
    from envs.openagi.split import load_split
    from envs.openagi.suite import task_specs

    specs = task_specs(cfg.env.suite)
    linear = sum(len(s.inputs) == 1 for s in specs)
    split = load_split(cfg.env.suite)
    e = cfg.env
    lines = [f"suite       {e.suite}: {len(specs)} tasks: {linear} linear, {len(specs) - linear} nonlinear; split "
             + ", ".join(f"{k} {len(v)}" for k, v in split.items())
             + f" (envs/openagi/splits/{e.suite}.json)",
             f"            {e.n_samples} samples per task ({e.samples_per_step} per plan per training step), "
             f"data seed {e.data_seed}, execution cache {e.cache_mib} MiB"]
    if e.suite == "full":
        from envs.openagi.hf.suite import full_suite_dir, metric_for, source_for

        metrics = Counter(metric_for(s) for s in specs)
        lines.append("            metrics: " + ", ".join(f"{m} {n} tasks" for m, n in sorted(metrics.items()))
                     + " (overall = task-weighted mean, as the paper's weighted average)")
        where = full_suite_dir(e.data_dir, e.n_samples, e.data_seed, e.datasets, e.max_image_side)
        built = (where / "manifest.json").is_file()
        lines.append(f"            data: {where} ({'built: read from disk' if built else 'not built yet: built once at the start of the run (downloads the sources below, runs Machine Translation)'})")
        uses = Counter(source_for(s) for s in specs)
        lines.append(f"datasets    (images shrunk to <= {e.max_image_side} px; override with env.datasets.<name>)")
        for name, src in data_sources(cfg).items():
            lines.append(f"            {name:<15} {src.describe()}; {uses[name]} tasks")
    return lines


def _expert_lines(cfg: RunConfig) -> list[str]:
    if cfg.env.backend == "lite":
        from envs.openagi.tools import OPENAGI_TOOLS

        return [f"experts     lite (offline zoo, no downloads): {', '.join(s.name for s in OPENAGI_TOOLS)} "
                "(those the lite suite needs are implemented)"]
    from envs.openagi.hf import describe_models

    hf = hf_backend_config(cfg)
    budget = f"{hf.memory_budget_gib:g} GiB" if hf.memory_budget_gib else "70% of GPU memory (50% of RAM on CPU)"
    lines = [f"experts     hf backend: device {hf.device or 'cuda if available'}, dtype {hf.dtype} "
             f"(metrics {hf.metrics_dtype}), model cache budget {budget}, batch {hf.batch_size}; each model "
             "loads on first use"]
    rows = describe_models(hf)
    width = max(len(r["name"]) for r in rows)
    for role, title in (("tool", "tools"), ("metric", "metric models")):
        lines.append(f"            {title}:")
        for r in (r for r in rows if r["role"] == role):
            spec = hf.expert(r["name"]) if role == "tool" else hf.metric_model(r["name"])
            dtype = r["dtype"]
            if r["device"].startswith("cuda") and dtype in ("auto", "float16", "bfloat16"):
                # a GPU config described on a machine without CUDA: what the GPU will run
                dtype = _gpu_dtype(dtype, tuple(spec.half))
            extra = " (optional extra: pip install diffusers)" if r["library"] == "diffusers" else ""
            lines.append(f"              {r['name']:<{width}}  {r['model_id']}  [{r['library']}, {dtype}]{extra}")
    return lines


def _gpu_dtype(requested: str, halves: tuple[str, ...]) -> str:
    """The dtype the hf loader picks on a GPU (``resolve_dtype`` without a device to ask)."""
    if requested == "auto":  # bfloat16 on Ampere and newer (float16 on older GPUs)
        return "bfloat16" if "bfloat16" in halves else "float32"
    return requested if requested in halves else "float32"


def _training_lines(cfg: RunConfig) -> list[str]:
    s, r, ev = cfg.sft, cfg.rltf, cfg.eval
    lines = []
    if s.enabled:
        lines.append(f"sft         {s.epochs} epochs on the train tasks' reference plans, lr {s.lr:g}, batch {s.batch_size}")
    else:
        lines.append("sft         off")
    lines.append(f"rltf        {r.steps} steps x {r.tasks_per_batch} tasks x {r.k_samples} sampled plans, lr {r.lr:g} "
                 f"({r.lr_schedule}, warmup {r.warmup_steps}), baseline {r.baseline}, kl {r.kl_coef:g}, "
                 f"entropy {r.entropy_coef:g}, grad clip {r.max_grad_norm:g}")
    lines.append(f"eval        schemas {', '.join(ev.schemas)} on {', '.join(ev.splits)}; {ev.num_beams} beams, "
                 f"{ev.few_shot_k}-shot prompts")
    if cfg.env.suite == "full" and "oracle" in ev.schemas:
        lines.append(f"            warning: {_ORACLE_NOTE}")
    lines.append(f"logging     {cfg.logging.report_to}, every {cfg.logging.log_every} steps")
    return lines


def describe_run(cfg: RunConfig) -> str:
    """What ``train/rltf.py`` would load and do with ``cfg``; raises ConfigError if it cannot run."""
    check_env(cfg)
    run_dir = Path(cfg.run_dir).resolve()
    lines = [f"dry run of {cfg.run_name!r}: the configuration is valid; nothing was loaded "
             "(no weights, no datasets, no downloads)",
             f"run         {run_dir} (seed {cfg.seed}, resume {str(cfg.resume).lower()})"]
    lines += _planner_lines(cfg)
    lines += _launch_lines(cfg)
    lines += _suite_lines(cfg)
    lines += _expert_lines(cfg)
    lines += _training_lines(cfg)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    cfg = load_config(list(sys.argv[1:] if argv is None else argv))
    print(describe_run(cfg))


if __name__ == "__main__":
    main()
