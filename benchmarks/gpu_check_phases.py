"""The phases of ``benchmarks/gpu_check.py`` (what each runs and measures: that script's docstring).

Each phase is a function of a :class:`Check` (the settings, the device, the scratch folder, the
:class:`Clock`) returning its figures as a dict; :func:`skip_reason` says why one does not run.
Phases call only the project's stable entry points: ``rltf.config.loading.load_config``, the stages
of :mod:`rltf.stages.plan_job`, the RLTF trainer as ``stages.train_rltf`` builds it, the
constrained sampler / scorer, and :mod:`rltf.comparison.grpo` for TRL's GRPO.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

PHASES = {  # in the order they run (most informative first: a phase does not start after --budget-s)
    "embedded_rltf": "main job stages on the embedded planner (scratch encoder): SFT, RLTF steps, evaluation",
    "device_generators": "constrained sampling on the model's device: same seed, same plans; sampler vs scorer",
    "bf16_autocast": "accelerate mixed_precision=bf16 autocast: on, bf16 compute, log-prob drift from fp32",
    "smollm2_lora_rltf": "main job stages on a random SmolLM2-135M-shaped LLaMA with LoRA (bf16 weights on GPU)",
    "grpo": "TRL GRPOTrainer steps on the random SmolLM2-shaped model (full fine-tuning)",
    "qlora_rltf": "the LoRA phase on a 4-bit NF4 base (QLoRA, bitsandbytes)",
    "flow_rltf": "the MTP agent-flow job on the embedded planner: warm start, batched passes, RLTF steps, evaluation",
}

SMOLLM2_135M = dict(num_hidden_layers=30, hidden_size=576, num_attention_heads=9, num_key_value_heads=3,
                    intermediate_size=1536, vocab_size=49152)
"""SmolLM2-135M's shape (its config.json); the weights here are random."""
TINY_SHAPE = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=128, vocab_size=512)
"""``--tiny``: the same architecture, small enough for a CPU test."""

MIB = 2 ** 20


# ------------------------------------------------------------------------------------ clock
class Clock:
    """Wall time (CUDA-synchronised on a GPU), process CPU time and peak GPU memory of spans.

    Each span resets the peak-memory counter; :attr:`phase_peak` keeps the largest peak seen since
    :meth:`start_phase`, so a phase's peak covers the stages measured inside it."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        self.phase_peak = 0

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def start_phase(self) -> None:
        self.phase_peak = 0
        self._reset_peak()

    def _reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def _peak(self) -> int:
        if not self.cuda:
            return 0
        peak = torch.cuda.max_memory_allocated()
        self.phase_peak = max(self.phase_peak, peak)
        return peak

    @contextlib.contextmanager
    def span(self, record: dict) -> Iterator[dict]:
        """Fills ``record`` with ``wall_s``, ``cpu_s`` and (on a GPU) ``peak_gpu_mib`` of the block."""
        self.sync()
        self._reset_peak()
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield record
        finally:
            self.sync()
            record["wall_s"] = round(time.perf_counter() - wall, 4)
            record["cpu_s"] = round(time.process_time() - cpu, 4)
            if self.cuda:
                record["peak_gpu_mib"] = round(self._peak() / MIB, 1)


def step_summary(steps: list[dict]) -> dict:
    """Per-step times: every step, the first (warm-up) apart and the median of the others."""
    rest = steps[1:] or steps
    out = {"n": len(steps), "first": steps[0] if steps else None, "each": steps}
    if steps:
        out["median_wall_s"] = round(statistics.median(s["wall_s"] for s in rest), 4)
        out["median_cpu_s"] = round(statistics.median(s["cpu_s"] for s in rest), 4)
        if "peak_gpu_mib" in steps[0]:
            out["peak_gpu_mib"] = max(s["peak_gpu_mib"] for s in steps)
    return out


# ---------------------------------------------------------------------------------- context
@dataclass
class Check:
    """What every phase reads: the settings, the device, the scratch folder and the clock."""

    args: argparse.Namespace
    device: str  # "cuda" or "cpu"
    precision: str  # "bf16" or "fp32"
    tmp: Path
    clock: Clock
    started: float = field(default_factory=time.perf_counter)
    _model_dir: Path | None = None

    @property
    def weights_dtype(self) -> str:
        """The SmolLM2-shaped model's weights: bf16 in a bf16 run (as configs/llama-lora.yaml), else float32."""
        return "bfloat16" if self.precision == "bf16" else "float32"

    def config(self, phase: str, overrides: list[str], openagi: bool = True):
        """The run config of a phase: a config file's ``config=`` first, then the check's sizes, the
        phase's own overrides and ``--override`` (last: it wins, and a bad one fails the phase).
        ``openagi=False`` (a phase on another env): the ``--override env.*`` keys are left out."""
        from rltf.config.loading import load_config  # per phase: an import error fails this phase only

        a = self.args
        extra = [o for o in a.override if openagi or not o.startswith("env.")]
        files = [o for o in overrides if o.startswith("config=")]
        rest = [o for o in overrides if not o.startswith("config=")]
        return load_config([
            *files, f"output_dir={self.tmp / 'runs'}", f"run_name={phase}", "seed=0", "overwrite=true",
            f"planner.embedded.dir={self.tmp / 'embedded'}", "logging.report_to=none", "logging.progress_bar=false",
            f"rltf.steps={a.steps}", f"rltf.tasks_per_batch={a.tasks}", f"rltf.k_samples={a.k}",
            "rltf.eval_every=0", "rltf.checkpoint_every=0", f"sft.epochs={a.sft_epochs}", "eval.splits=[test]",
            *rest, *extra])

    def smollm2_dir(self) -> Path:
        """A random-weight model of SmolLM2-135M's shape (``--tiny``: a small one) with the embedded
        planner's tokenizer (trained here on OpenAGI's texts; LLaMA conventions), saved once."""
        if self._model_dir is None:
            from transformers import LlamaConfig, LlamaForCausalLM  # per phase: an import error fails this phase only

            from rltf.planners.embedded import causal_tokenizer  # per phase: an import error fails this phase only
            from rltf.planners.hf_models import DTYPES  # per phase: an import error fails this phase only
            from rltf.planners.tokenizer import (  # per phase: an import error fails this phase only
                default_tokenizer_texts,
                train_plan_tokenizer,
            )

            tokenizer = causal_tokenizer(train_plan_tokenizer(default_tokenizer_texts()))
            shape = dict(TINY_SHAPE if self.args.tiny else SMOLLM2_135M)
            shape["vocab_size"] = max(shape["vocab_size"], len(tokenizer))
            config = LlamaConfig(**shape, max_position_embeddings=2048, tie_word_embeddings=True,
                                 pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                                 eos_token_id=tokenizer.eos_token_id)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                model = LlamaForCausalLM(config).to(DTYPES[self.weights_dtype])
            out = self.tmp / ("smollm2-tiny" if self.args.tiny else "smollm2-135m-shape")
            model.save_pretrained(out)
            tokenizer.save_pretrained(out)
            self._model_dir = out
        return self._model_dir


# ----------------------------------------------------------------------------------- phases
def main_job_stages(check: Check, cfg) -> dict:
    """The main job's stages on ``cfg``'s planner: build, SFT + handoff, ``rltf.steps`` RLTF steps
    (each timed), the constrained evaluation of ``--eval-tasks`` test tasks."""
    from rltf.rl.trainer import RLTFTrainer  # per phase: an import error fails this phase only
    from rltf.stages import plan_job as stages  # per phase: an import error fails this phase only

    clock, out = check.clock, {}
    job = stages.start(cfg)
    with clock.span(out.setdefault("build", {})):
        envs = stages.build_envs(job)
        planner = stages.build_planner(job, envs)
    if cfg.sft.enabled:
        sft_dir = job.run_dir / "sft"
        with clock.span(out.setdefault("sft", {"epochs": cfg.sft.epochs})):
            stages.fine_tune(job, planner, envs, sft_dir)
            planner = stages.start_rltf_from_sft(job, planner, sft_dir, resumed=False)
    out["planner"] = describe_planner(planner, job.acc)
    trainer = RLTFTrainer(cfg, planner, envs.train, job.acc, None, None, job.sharding)  # as stages.train_rltf
    rows, steps = [], []
    for _ in range(cfg.rltf.steps):
        with clock.span(record := {}):
            rows.append(trainer.train_step())
        steps.append(record)
    out["rltf_steps"] = step_summary(steps) | {"plans_per_step": cfg.rltf.tasks_per_batch * cfg.rltf.k_samples}
    if rows:
        out["train"] = {"reward_last": rows[-1]["train/reward"], "valid_last": rows[-1]["train/valid"],
                        "logprob_mismatch_max": max(r["train/logprob_mismatch"] for r in rows),
                        "grad_norm_last": rows[-1]["train/grad_norm"]}
    tasks = envs.splits["test"][:check.args.eval_tasks]
    with clock.span(out.setdefault("evaluation", {"tasks": len(tasks), "num_beams": cfg.eval.num_beams})):
        result = stages.evaluate(job, ["rltf"], planner, envs, tasks, log=False)["rltf"]
    out["evaluation"]["overall"] = result.overall
    return out


def describe_planner(planner, acc) -> dict:
    p = next(planner.model.parameters())
    return {"source": Path(planner.source).name, "arch": planner.arch, "device": str(p.device),
            "dtype": str(p.dtype).removeprefix("torch."), "peft": planner.is_peft,
            "parameters_m": round(sum(x.numel() for x in planner.model.parameters()) / 1e6, 3),
            "trained_m": round(sum(x.numel() for x in planner.model.parameters() if x.requires_grad) / 1e6, 3),
            "mixed_precision": acc.mixed_precision}


def phase_embedded_rltf(check: Check) -> dict:
    return main_job_stages(check, check.config("embedded_rltf", ["planner.embedded.encoder=scratch"]))


def _sampling_setup(check: Check, phase: str):
    """The embedded planner (scratch encoder, not fine-tuned) on the device, the accelerator and
    ``--tasks`` train tasks with their grammars."""
    from rltf.stages import plan_job as stages  # per phase: an import error fails this phase only

    job = stages.start(check.config(phase, ["planner.embedded.encoder=scratch"]))
    envs = stages.build_envs(job)
    planner = stages.build_planner(job, envs)
    tasks = envs.splits["train"][:check.args.tasks]
    grammars = [envs.train.grammar(planner.tokenizer, t) for t in tasks]
    return job, planner, tasks, grammars


def _teacher_forced(planner, tasks, grammars, decoded, temperature: float) -> torch.Tensor:
    from constrained_decoding.logprobs import plan_logprobs  # per phase: an import error fails this phase only

    plans = [d for ds in decoded for d in ds]
    prompts = [t.description for t, ds in zip(tasks, decoded) for _ in ds]
    with torch.no_grad():
        return plan_logprobs(planner.model, planner.tokenizer, prompts, [d.grammar for d in plans], plans,
                             temperature).float().cpu()


def phase_device_generators(check: Check) -> dict:
    from constrained_decoding.decode import sample_plans  # per phase: an import error fails this phase only

    job, planner, tasks, grammars = _sampling_setup(check, "device_generators")
    model, k, out = planner.model, check.args.k, {}
    device = next(model.parameters()).device
    draws = []
    for i in range(2):
        with check.clock.span(out.setdefault(f"sample_{i + 1}", {})), torch.no_grad():
            draws.append(sample_plans(model, planner.tokenizer, [t.description for t in tasks], grammars, k, 1.0,
                                      seed=1234))
    rows = [[d.rows for d in ds] for ds in draws[0]], [[d.rows for d in ds] for ds in draws[1]]
    sampled = [torch.tensor([d.logprob for ds in draw for d in ds]) for draw in draws]
    # an explicit generator on the model's device is accepted and gives the seeded draw
    generator = torch.Generator(device=device)
    generator.manual_seed(1234)
    with torch.no_grad():
        explicit = sample_plans(model, planner.tokenizer, [t.description for t in tasks], grammars, k, 1.0,
                                generator=generator)
    scored = _teacher_forced(planner, tasks, grammars, draws[0], 1.0)
    out.update(model_device=str(device), generator_device=str(generator.device), samples=len(sampled[0]),
               same_plans=rows[0] == rows[1], same_plans_explicit_generator=[[d.rows for d in ds] for ds in explicit]
               == rows[0], logprob_repeat_max_abs=float((sampled[0] - sampled[1]).abs().max()),
               sampler_vs_scorer_max_abs=float((sampled[0] - scored).abs().max()))
    if not (out["same_plans"] and out["same_plans_explicit_generator"]):
        raise AssertionError(f"the same seed gave different plans on {device}")
    torch.testing.assert_close(scored, sampled[0], rtol=1e-4, atol=1e-4,
                               msg=lambda m: f"sampler vs teacher-forced log π_c on {device}: {m}")
    return out


def phase_bf16_autocast(check: Check) -> dict:
    from constrained_decoding.decode import sample_plans  # per phase: an import error fails this phase only

    job, planner, tasks, grammars = _sampling_setup(check, "bf16_autocast")
    acc, model = job.acc, planner.model
    device = next(model.parameters()).device
    with acc.autocast():
        enabled = torch.is_autocast_enabled(device.type)
        a = torch.ones(16, 16, device=device)
        compute_dtype = (a @ a).dtype
    if acc.mixed_precision != "bf16" or not enabled or compute_dtype != torch.bfloat16:
        raise AssertionError(f"accelerate mixed_precision={acc.mixed_precision!r}, autocast enabled={enabled}, "
                             f"matmul dtype {compute_dtype}: expected bf16 autocast")
    with torch.no_grad():
        decoded = sample_plans(model, planner.tokenizer, [t.description for t in tasks], grammars, check.args.k,
                               1.0, seed=0)
    fp32 = _teacher_forced(planner, tasks, grammars, decoded, 1.0)
    with acc.autocast():
        bf16 = _teacher_forced(planner, tasks, grammars, decoded, 1.0)
    drift = (bf16 - fp32).abs()
    return {"mixed_precision": acc.mixed_precision, "autocast_enabled": enabled,
            "matmul_dtype": str(compute_dtype).removeprefix("torch."), "samples": len(fp32),
            "logprob_bf16_vs_fp32_max_abs": float(drift.max()),
            "logprob_bf16_vs_fp32_max_rel": float((drift / fp32.abs().clamp_min(1e-6)).max())}


def _random_model(check: Check, out: dict) -> Path:
    """The SmolLM2-shaped model's folder; the phase that builds it records the time in ``out``."""
    if check._model_dir is not None:
        return check._model_dir
    with check.clock.span(out.setdefault("random_model", {})):
        return check.smollm2_dir()


def _smollm2_overrides(check: Check, out: dict) -> list[str]:
    # configs/llama-lora.yaml: LoRA r=8 on q_proj / v_proj, KL 0.05 to the adapter-disabled model
    return ["config=configs/llama-lora.yaml", f"planner.model={_random_model(check, out)}",
            f"planner.dtype={check.weights_dtype}", "eval.num_beams=8"]


def phase_smollm2_lora_rltf(check: Check) -> dict:
    out: dict = {}
    return out | main_job_stages(check, check.config("smollm2_lora_rltf", _smollm2_overrides(check, out)))


def phase_qlora_rltf(check: Check) -> dict:
    # a 4-bit base cannot take the SFT adapter merged exactly: no KL term (rltf.planners.loading)
    out: dict = {}
    cfg = check.config("qlora_rltf", [*_smollm2_overrides(check, out), "planner.load_in_4bit=true", "rltf.kl_coef=0"])
    return out | main_job_stages(check, cfg)


def phase_grpo(check: Check) -> dict:
    from transformers import TrainerCallback  # per phase: an import error fails this phase only

    from rltf.comparison.grpo import make_grpo_trainer  # per phase: an import error fails this phase only
    from rltf.stages import plan_job as stages  # per phase: an import error fails this phase only

    clock, out, steps = check.clock, {}, []
    cfg = check.config("grpo", ["config=configs/grpo-lite.yaml", f"planner.model={_random_model(check, out)}",
                                "planner.arch=causal", f"planner.dtype={check.weights_dtype}",
                                f"rltf.steps={check.args.grpo_steps}", "sft.enabled=false"])

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.span = clock.span(record := {})
            self.span.__enter__()
            steps.append(record)

        def on_step_end(self, args, state, control, **kwargs):
            self.span.__exit__(None, None, None)

    job = stages.start(cfg)
    with clock.span(out.setdefault("build", {})):
        envs = stages.build_envs(job)
        planner = stages.build_planner(job, envs)
        trainer, reward = make_grpo_trainer(cfg, planner, envs.train, envs.splits["train"], job.run_dir / "grpo",
                                            cfg.grpo, callbacks=[StepTimer()], bf16=check.precision == "bf16",
                                            use_cpu=check.device == "cpu")
    out["planner"] = describe_planner(planner, trainer.accelerator)
    trainer.train()
    out["grpo_steps"] = step_summary(steps) | {"completions_per_step": cfg.rltf.tasks_per_batch * cfg.rltf.k_samples}
    rewards = [r for c in reward.calls for r in c.rewards]
    valid = [v for c in reward.calls for v in c.valid]
    out["train"] = {"reward_mean": statistics.fmean(rewards) if rewards else None,
                    "valid_fraction": statistics.fmean(valid) if valid else None,
                    "model_device": str(next(trainer.model.parameters()).device)}
    return out


def phase_flow_rltf(check: Check) -> dict:
    """``configs/travel-mtp.yaml``'s job (:func:`rltf.stages.flow_job.run_flow_job`) on the device:
    the warm start on ``--sft-epochs`` epochs of a few train queries' solver decisions, the greedy
    flow evaluation of ``--eval-tasks`` test queries before and after, ``--steps`` RLTF steps of the
    job's 4 queries x 4 passes (``--tasks`` x ``--k`` on the CPU), the passes batched."""
    import json  # per phase: an import error fails this phase only

    from rltf.stages.flow_job import run_flow_job  # per phase: an import error fails this phase only

    a, out = check.args, {}
    queries, passes = (4, 4) if check.device == "cuda" else (a.tasks, a.k)
    cfg = check.config("flow_rltf", ["config=configs/travel-mtp.yaml", f"rltf.tasks_per_batch={queries}",
                                     f"rltf.k_samples={passes}", f"flow.limit={a.eval_tasks}",
                                     f"flow.warm_start_queries={max(2, a.eval_tasks)}", "flow.oracle=false",
                                     "flow.trace_queries=0"], openagi=False)
    with check.clock.span(out.setdefault("job", {})):
        summary = run_flow_job(cfg)
    history = json.loads((Path(cfg.run_dir) / "rltf_history.json").read_text())
    trajectories = queries * passes
    walls = [trajectories / row["train/plans_per_s"] for row in history]
    out["rltf_steps"] = {"n": len(walls), "first_wall_s": round(walls[0], 4),
                         "median_wall_s": round(statistics.median(walls[1:] or walls), 4),
                         "trajectories_per_step": trajectories,
                         "decisions_per_trajectory_last": history[-1]["train/decisions"]}
    out["train"] = {"reward_last": history[-1]["train/reward"], "final_pass_last": history[-1]["train/final_pass"],
                    "logprob_mismatch_max": max(r["train/logprob_mismatch"] for r in history),
                    "grad_norm_last": history[-1]["train/grad_norm"]}
    out["evaluation"] = {"queries": len(summary["queries"]),
                         **{f"{name}_final_pass": row["final pass"] for name, row in summary["table"].items()},
                         "seconds_per_query": {name: row["seconds/query"] for name, row in summary["table"].items()}}
    return out


RUNS: dict[str, Callable[[Check], dict]] = {
    "embedded_rltf": phase_embedded_rltf, "device_generators": phase_device_generators,
    "bf16_autocast": phase_bf16_autocast, "smollm2_lora_rltf": phase_smollm2_lora_rltf,
    "grpo": phase_grpo, "qlora_rltf": phase_qlora_rltf, "flow_rltf": phase_flow_rltf,
}


def skip_reason(name: str, check: Check) -> str | None:
    """Why a phase does not run here, or None."""
    a = check.args
    if a.only and name not in a.only:
        return f"not selected (--only {','.join(a.only)})"
    if name == "bf16_autocast" and check.precision != "bf16":
        return (f"an fp32 run on the {check.device.upper()}: bf16 autocast runs on a GPU "
                "(or with --precision bf16)")
    if name == "qlora_rltf":
        if check.device != "cuda":
            return "QLoRA needs a CUDA GPU (bitsandbytes' 4-bit kernels)"
        try:
            import bitsandbytes  # noqa: F401
        except Exception as e:  # ImportError, or a bitsandbytes that cannot find its CUDA library
            return f"bitsandbytes is not importable ({type(e).__name__}: {last_line(str(e))})"
    spent = time.perf_counter() - check.started
    if spent > a.budget_s:
        return f"time budget spent ({spent:.0f} s > --budget-s {a.budget_s:g})"
    return None


def last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1].strip() if lines else ""
