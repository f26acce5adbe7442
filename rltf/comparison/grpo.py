"""GRPO baseline (issue #15): TRL's ``GRPOTrainer`` on rltf's causal planner, tasks and rewards.

The comparison it exists for: RLTF (:mod:`rltf.rl.trainer`: REINFORCE on plans sampled from the
*constrained* policy π_c) against GRPO as TRL runs it — *unconstrained* sampling of free text,
group-normalised advantages, clipped token-level surrogate — with everything else equal:

* the same planner and warm start: a causal planner (``planner.arch=causal``, e.g. the embedded
  LLaMA of :mod:`rltf.planners.embedded`) fine-tuned by rltf's SFT stage;
* the same train tasks and prompts: ``{"prompt": format_prompt(description, ..., tokenizer), "task_id": id}``
  (:func:`prompt_dataset`: :func:`constrained_decoding.prompts.format_prompt` with the planner's
  tokenizer, its chat template for an instruct LLM such as SmolLM2), turned into ids by
  :func:`constrained_decoding.prompts.encode_formatted` like every prompt of RLTF
  (:class:`rltf.comparison.grpo_trainer.PlannerGRPOTrainer`): GRPO conditions on exactly the ids the
  RLTF planner is trained and evaluated with, and so does the text warm start;
* the same reward: :class:`EnvReward` scores each completion's text with the train env
  (``env.reward_plans``; text that does not parse or check as a valid plan scores 0), one call per
  step, the sample subsets drawn from ``(seed, step, process)`` as in RLTF;
* the same budget and hyperparameters (:func:`grpo_args`): ``rltf.steps`` optimiser steps of
  ``rltf.tasks_per_batch`` prompts x ``rltf.k_samples`` completions (``num_generations``),
  ``rltf.lr`` / ``lr_schedule`` / ``warmup_steps`` / ``max_grad_norm`` / ``temperature``,
  ``rltf.kl_coef`` as ``beta``, ``planner.max_plan_tokens`` as the completion length.

GRPO's own knobs (TRL's defaults unless set) are the config's ``grpo`` section
(:class:`rltf.config.sections.GrpoSettings`). ``grpo.sampling=constrained`` samples the completions
under rltf's plan grammar while TRL's loss keeps its unconstrained log-probabilities (what vLLM's
structured outputs give a TRL user; the biased gradient RLTF avoids: see
:mod:`rltf.comparison.grpo_trainer`).

The warm start matters more than anything else here. rltf's SFT (:mod:`rltf.rl.sft`) maximises log π_c
of the reference plans: it moves logits only *relative to the other tokens the grammar allows*, so
the unconstrained distribution of the fine-tuned planner stays close to its random initialisation
over the rest of the vocabulary (the embedded LLaMA after 20 epochs: per-token entropy ~5.9 nats of
a maximum log 390 = 5.97, greedy text like ``Image Super Super Super ...``, no valid plan). GRPO from
it samples no valid plan, every reward is 0, every group advantage 0: nothing is learnt.
``GrpoSettings.warm_start = "text"`` (the default) fine-tunes instead with the ordinary unconstrained NLL of the
canonical reference plan text after the prompt (TRL SFTTrainer's objective; :func:`text_finetune`,
the same epochs / lr / batch size / task order as rltf's SFT), which is what GRPO is normally
warm-started with.

:func:`free_text_schema` is the unconstrained held-out evaluation: greedy text, parsed as a plan
as written (no mapping onto a valid plan), scored by the held-out env, with the fraction of valid
plans. TRL runs offline, on the GPU when there is one (else the CPU), in the planner's own dtype, with
no reporting integrations and no hub.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers import LogitsProcessorList
from transformers.trainer_callback import PrinterCallback, TrainerCallback

from constrained_decoding.lazy_dfa import is_lazy
from constrained_decoding.prompts import encode_prompts, format_prompt
from constrained_decoding.protocol import Grammar
from envs import registry as env_registry
from envs.protocol import RLTFEnv, Task
from rltf.comparison import lazy_grammar as lazy
from rltf.config.loading import RunConfig
from rltf.config.sections import GrpoSettings
from rltf.evaluation import schemas as ev
from rltf.planners.planner import Planner
from rltf.rl.optim import make_optimizer


@dataclass
class RewardCall:
    """One call of :class:`EnvReward` (one generation batch)."""

    task_ids: list[int]
    completions: list[str]
    rewards: list[float]
    valid: list[bool]
    plans: list[str] = field(default_factory=list)  # the env's text of each plan (formatted when valid)


class EnvReward:
    """A TRL reward function: the env's score of each completion's text as a plan for its task.

    TRL calls it with ``prompts``, ``completions`` (decoded text) and the dataset's other columns
    (``task_id``), all ``B x G`` long. All completions of a call are scored in one
    ``env.reward_plans`` call (a task's plans on the same sample subset), the subsets drawn from
    ``(seed, call, process)`` like RLTF's ``(seed, step, process)``. Every call is kept in
    :attr:`calls`; the fraction of valid plans is logged through TRL's ``log_metric`` as ``valid``.
    ``to_plan(task_id, completion_ids)``, when given, turns a completion's token ids into the plan
    text the env judges (a lazily constrained completion's rows -> the plan's canonical text:
    :func:`rltf.comparison.lazy_grammar.completion_plan_text`; None: the completion's own text)."""

    __name__ = "env_reward"

    def __init__(self, env: RLTFEnv, seed: int = 0, process_index: int = 0,
                 to_plan: Callable[[int, Sequence[int]], str | None] | None = None):
        self.env, self.seed, self.process_index, self.to_plan = env, seed, process_index, to_plan
        self.calls: list[RewardCall] = []

    def __call__(self, prompts: Sequence[str], completions: Sequence[str], task_id: Sequence[int],
                 **kwargs) -> list[float]:
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        rng = np.random.default_rng([self.seed, len(self.calls), self.process_index, 1])
        judged = [x.strip() for x in texts]
        if self.to_plan is not None:
            ids = kwargs.get("completion_ids")
            if ids is None or len(ids) != len(texts):
                raise ValueError("EnvReward with to_plan needs TRL's completion_ids, one per completion")
            judged = [self.to_plan(int(t), i) or x for t, i, x in zip(task_id, ids, judged)]
        results = self.env.reward_plans(list(zip((int(t) for t in task_id), judged)), rng=rng)
        rewards = [float(r.reward) if math.isfinite(r.reward) else 0.0 for r in results]
        valid = [bool(r.valid) for r in results]
        self.calls.append(RewardCall([int(t) for t in task_id], list(texts), rewards, valid,
                                     [r.plan_text for r in results]))
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric("valid", float(np.mean(valid)) if valid else 0.0)
        return rewards


def prompt_dataset(tasks: Sequence[Task], encoder_decoder: bool = False, tokenizer=None):
    """TRL's train dataset: one row per task, the prompt text as the planner is conditioned on it
    (:func:`constrained_decoding.prompts.format_prompt` with the planner's ``tokenizer``: its chat
    template, if it has one; the plain format without)."""
    from datasets import Dataset  # heavy: datasets, only when the TRL trainer's prompt set is built

    return Dataset.from_dict({"prompt": [format_prompt(t.description, encoder_decoder, tokenizer) for t in tasks],
                              "task_id": [int(t.id) for t in tasks]})


_SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}


def grpo_args(cfg: RunConfig, output_dir: str | os.PathLike, grpo: GrpoSettings | None = None, **overrides):
    """TRL's ``GRPOConfig`` for a run config: one optimiser step per generation batch of
    ``rltf.tasks_per_batch`` prompts x ``rltf.k_samples`` completions, ``rltf.steps`` steps,
    offline on the CPU in float32 (``overrides``: any other ``GRPOConfig`` field)."""
    from trl import GRPOConfig  # heavy: TRL, only when a GRPO trainer is built

    g, rl = grpo or cfg.grpo, cfg.rltf
    kw = dict(
        output_dir=str(output_dir), max_steps=rl.steps, per_device_train_batch_size=rl.tasks_per_batch * rl.k_samples,
        gradient_accumulation_steps=1, num_generations=rl.k_samples, learning_rate=rl.lr,
        lr_scheduler_type=_SCHEDULES[rl.lr_schedule], warmup_steps=rl.warmup_steps, weight_decay=0.0,
        max_grad_norm=rl.max_grad_norm if rl.max_grad_norm > 0 else 1e9, temperature=rl.temperature,
        top_k=g.top_k, top_p=g.top_p, max_completion_length=cfg.planner.max_plan_tokens,
        beta=rl.kl_coef if g.beta is None else g.beta, loss_type=g.loss_type, scale_rewards=g.scale_rewards,
        epsilon=g.epsilon, num_iterations=g.num_iterations, entropy_coef=g.entropy_coef,
        seed=cfg.seed, data_seed=cfg.seed, use_cpu=not torch.cuda.is_available(), bf16=False, fp16=False,
        report_to="none", push_to_hub=False, save_strategy="no", logging_steps=1, gradient_checkpointing=False,
        disable_dropout=True, log_completions=False,
        disable_tqdm=not cfg.logging.progress_bar, dataloader_num_workers=0,
    )
    if "activation_checkpointing" in {f.name for f in dataclasses.fields(GRPOConfig)}:  # transformers >= 5.2x
        kw["activation_checkpointing"] = False  # its new name; the old one is kept there, deprecated
    kw.update(overrides)
    return GRPOConfig(**kw)


def make_grpo_trainer(cfg: RunConfig, planner: Planner, env: RLTFEnv, tasks: Sequence[Task],
                      output_dir: str | os.PathLike, grpo: GrpoSettings | None = None,
                      reference_dir: str | os.PathLike | None = None, callbacks=None, separator: int | None = None,
                      **overrides):
    """A ``GRPOTrainer`` (:class:`PlannerGRPOTrainer`: rltf's prompt ids; under the plan grammar
    with ``grpo.sampling=constrained``) training ``planner.model`` in place on ``tasks`` with
    :class:`EnvReward` on ``env``. Returns ``(trainer, reward)``. With a KL term (``beta > 0``) TRL
    builds its reference model from ``reference_dir`` (the saved start policy: the SFT folder).
    Constrained sampling off OpenAGI follows each grammar lazily (:mod:`rltf.comparison.lazy_grammar`:
    itineraries are too many to enumerate) with ``separator`` between rows (None: chosen from the train
    grammars), the completion length the grammars' longest sequence, and the reward judging the plan of
    each completion's ids."""
    from rltf.comparison.grpo_trainer import PlannerGRPOTrainer  # imports TRL: only when a trainer is built

    g = grpo or cfg.grpo
    if planner.is_encoder_decoder:
        raise ValueError("TRL's GRPOTrainer trains decoder-only models: use a causal planner "
                         "(planner.arch=causal; the embedded planner builds a LLaMA with it)")
    grammars = ({int(t.id): env.grammar(planner.tokenizer, t) for t in tasks} if g.sampling == "constrained"
                else None)
    to_plan = None
    if grammars is not None and follows_rows_lazily(cfg):  # plans too many to enumerate: the rows, lazily
        if separator is None:
            separator = lazy.separator_id(planner.tokenizer, list(grammars.values()))
        to_plan = functools.partial(_lazy_plan_text, grammars, separator)
        longest = max(lazy.longest_sequence(gr, cfg.planner.max_plan_tokens)
                      for gr in {id(gr): gr for gr in grammars.values()}.values())
        overrides.setdefault("max_completion_length", longest)  # no plan cut short
    args = grpo_args(cfg, output_dir, grpo, **overrides)
    if args.beta > 0:
        if reference_dir is None:
            raise ValueError("GRPO with beta > 0 (rltf.kl_coef) needs reference_dir: the saved start policy")
        model = planner.model.get_base_model() if planner.is_peft else planner.model
        model.config._name_or_path = str(Path(reference_dir).resolve())
    reward = EnvReward(env, cfg.seed, to_plan=to_plan)
    trainer = PlannerGRPOTrainer(model=planner.model, reward_funcs=[reward], args=args,
                                 train_dataset=prompt_dataset(tasks, False, planner.tokenizer),
                                 processing_class=planner.tokenizer, encoder_decoder=False, grammars=grammars,
                                 separator=separator, callbacks=[*(callbacks or []), _StepLog(cfg.logging.log_every)])
    trainer.remove_callback(PrinterCallback)  # one dict per step otherwise: _StepLog prints a short line
    return trainer, reward


def follows_rows_lazily(cfg: RunConfig) -> bool:
    """Whether constrained GRPO sampling on ``cfg.env``'s env follows each grammar's rows lazily
    (:mod:`rltf.comparison.lazy_grammar`) rather than one automaton of every plan's text: unless the env's
    spec says its plans are few enough to enumerate (:attr:`envs.registry.EnvSpec.enumerable_plans`)."""
    spec = env_registry.spec_of_section(cfg.env)
    return not (spec is not None and spec.enumerable_plans)


def _lazy_plan_text(grammars: dict[int, Grammar], separator: int, task_id: int, ids: Sequence[int]) -> str | None:
    return lazy.completion_plan_text(grammars[task_id], separator, ids)


class _StepLog(TrainerCallback):
    """Every ``every`` steps: step, train reward, fraction of valid plans, mean completion length."""

    def __init__(self, every: int):
        self.every = every

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs and state.is_world_process_zero and (
                state.global_step % self.every == 0 or state.global_step == state.max_steps):
            print(f"grpo step {state.global_step}/{state.max_steps}: reward {logs['reward']:.4f} "
                  f"valid {logs.get('valid', float('nan')):.3f} "
                  f"length {logs.get('completions/mean_length', float('nan')):.1f}", flush=True)


class PeriodicEval(TrainerCallback):
    """Held-out score during GRPO training, as RLTF's trainer logs it: after every ``every``-th
    optimiser step (``rltf.eval_every``; 0: never), ``evaluate()`` (e.g. the constrained beam
    search on the validation tasks: ``{"eval/validation/score": x}``) is recorded in ``rows`` as
    ``{"step": step, **metrics}`` and printed. The model's train/eval mode is restored after."""

    def __init__(self, every: int, evaluate):
        self.every, self.evaluate = every, evaluate
        self.rows: list[dict] = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if not self.every or state.global_step % self.every:
            return
        was_training = model.training if model is not None else None
        metrics = self.evaluate()
        if model is not None and was_training:
            model.train()
        self.rows.append({"step": state.global_step, **metrics})
        if state.is_world_process_zero:
            print(f"grpo step {state.global_step}/{state.max_steps}: "
                  + " ".join(f"{k} {v:.4f}" for k, v in metrics.items()), flush=True)


def training_curve(trainer, evals: Sequence[dict] = ()) -> list[dict]:
    """GRPO's per-step history in the rows RLTF's ``rltf_history.json`` holds: ``step``,
    ``train/reward``, ``train/valid`` (fraction of sampled texts that are valid plans), plus the
    periodic held-out metrics of ``evals`` (:class:`PeriodicEval` rows) at their steps."""
    rows = {int(r["step"]): {"step": int(r["step"]), "train/reward": float(r["reward"]),
                             **({"train/valid": float(r["valid"])} if "valid" in r else {})}
            for r in reward_history(trainer)}
    for e in evals:
        rows.setdefault(int(e["step"]), {"step": int(e["step"])}).update({k: v for k, v in e.items() if k != "step"})
    return [rows[k] for k in sorted(rows)]


def reward_history(trainer) -> list[dict]:
    """TRL's per-step log rows (``trainer.state.log_history``) that carry a reward."""
    return [row for row in trainer.state.log_history if "reward" in row]


# ------------------------------------------------------------------------------ warm start
def text_finetune(planner: Planner, tasks: Sequence[Task], *, epochs: int, lr: float, batch_size: int, seed: int,
                  max_grad_norm: float = 1.0, plan_text: Callable[[Task], str] | None = None) -> list[dict]:
    """Unconstrained supervised fine-tuning of a causal planner: mean token NLL of each task's
    reference plan text and EOS after its prompt (:func:`constrained_decoding.prompts.encode_prompts`: the chat
    template of an instruct LLM, else BOS, description, ``"\\nPlan:"``), prompt tokens unscored; a LoRA planner
    trains its adapter; one process, the batch order of :mod:`rltf.rl.sft` (a permutation seeded by
    ``(seed, epoch)``). Returns one row per epoch (``sft/nll``). ``plan_text(task)``: the text of the task's
    reference plan (travel: the solver plan's JSON, what the env's parser reads); default
    ``str(task.reference_plan)``, an OpenAGI plan's canonical text (GRPO is OpenAGI's baseline)."""
    if planner.is_encoder_decoder:
        raise ValueError("text_finetune fine-tunes causal planners")
    model, tok = planner.model, planner.tokenizer
    tasks = list(tasks)
    prompts = encode_prompts(tok, [t.description for t in tasks], False)
    texts = [str(t.reference_plan) if plan_text is None else plan_text(t) for t in tasks]
    plans = tok(texts, add_special_tokens=False)["input_ids"]
    rows = [(p, list(x) + [tok.eos_token_id]) for p, x in zip(prompts, plans)]
    steps_per_epoch = -(-len(tasks) // batch_size)
    optimizer, scheduler = make_optimizer(model, lr, epochs * steps_per_epoch)
    device = next(model.parameters()).device
    history = []
    model.eval()  # no dropout, as rltf's SFT
    for epoch in range(epochs):
        order = np.random.default_rng([seed, epoch]).permutation(len(tasks))
        losses = []
        for start in range(0, len(tasks), batch_size):
            batch = [rows[i] for i in order[start : start + batch_size]]
            width = max(len(p) + len(x) for p, x in batch)
            ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
            labels = torch.full((len(batch), width), -100, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for b, (p, x) in enumerate(batch):  # right-padded: positions start at 0 in every row
                ids[b, : len(p) + len(x)] = torch.tensor(p + x)
                labels[b, len(p) : len(p) + len(x)] = torch.tensor(x)
                mask[b, : len(p) + len(x)] = 1
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
            out.loss.backward()
            if max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(out.loss.detach()))
        history.append({"epoch": epoch, "sft/nll": float(np.mean(losses))})
    return history


# ------------------------------------------------------------------------------ evaluation
@dataclass
class FreeTextResult:
    """Unconstrained greedy decoding on held-out tasks: the schema's plans and scores, the raw
    texts and which of them were valid plans."""

    result: ev.SchemaResult
    texts: dict[int, str]
    valid: dict[int, bool]

    @property
    def valid_fraction(self) -> float:
        return float(np.mean(list(self.valid.values()))) if self.valid else 0.0


def free_text_schema(name: str, planner: Planner, env: RLTFEnv, tasks: Sequence[Task],
                     max_new_tokens: int = 64) -> FreeTextResult:
    """Greedy unconstrained text (:func:`rltf.evaluation.schemas.free_text`) parsed as a plan as written and
    scored on all of each task's samples by ``env`` (invalid text scores 0)."""
    prompts = [format_prompt(t.description, planner.is_encoder_decoder, planner.tokenizer) for t in tasks]
    texts = ev.free_text(planner, prompts, max_new_tokens)  # the prompt SFT, RLTF and GRPO train on
    texts = [x.strip() for x in texts]
    res = ev.SchemaResult(name)
    valid: dict[int, bool] = {}
    for t, r in zip(tasks, env.reward_plans(list(zip(tasks, texts)))):
        res.plans[t.id], res.scores[t.id], valid[t.id] = r.plan_text, r.reward, bool(r.valid)
    return FreeTextResult(res, {t.id: x for t, x in zip(tasks, texts)}, valid)


def sequence_schema(name: str, planner: Planner, env: RLTFEnv, tasks: Sequence[Task], separator: int,
                    batch_size: int = 16, lazy_limit: int | None = None) -> ev.SchemaResult:
    """Greedy decoding of each task's plan as the lazily constrained sequence constrained GRPO samples
    (:mod:`rltf.comparison.lazy_grammar`, the same ``separator``): a GRPO planner in the format it was trained
    in (rltf's beam search writes branch rows in parallel), every plan valid, scored by ``env``. ``lazy_limit``:
    the most tokens written for a grammar built lazily (:func:`~rltf.comparison.lazy_grammar.longest_sequence`;
    a plan cut there is scored as its text)."""
    model, tok = planner.model, planner.tokenizer
    grammars = [env.grammar(tok, t) for t in tasks]
    device = next(model.parameters()).device
    texts: list[str | None] = []
    was_training = model.training
    model.eval()
    try:
        for i in range(0, len(tasks), batch_size):
            part, gs = tasks[i : i + batch_size], grammars[i : i + batch_size]
            enc = tok.pad({"input_ids": encode_prompts(tok, [t.description for t in part], False)},
                          return_tensors="pt").to(device)
            processor = lazy.LazyGrammarLogitsProcessor(gs, separator)
            with torch.inference_mode():
                gen = model.generate(**enc, max_new_tokens=max(lazy.longest_sequence(g, lazy_limit) for g in gs),
                                     do_sample=False, num_beams=1, pad_token_id=tok.pad_token_id,
                                     eos_token_id=tok.eos_token_id, logits_processor=LogitsProcessorList([processor]))
            for g, row in zip(gs, gen[:, enc["input_ids"].shape[1]:].tolist()):
                text = lazy.completion_plan_text(g, separator, row)
                if text is None and not is_lazy(g.dfa):  # pragma: no cover - the processor allows nothing else
                    raise RuntimeError(f"{name}: greedy decoding under the lazy grammar wrote no plan for a task")
                texts.append(text if text is not None else tok.decode(row, skip_special_tokens=True).strip())
    finally:
        model.train(was_training)
    res = ev.SchemaResult(name)
    for t, r in zip(tasks, env.reward_plans(list(zip(tasks, texts)))):
        res.plans[t.id], res.scores[t.id] = r.plan_text, r.reward
    return res


def comparison_table(constrained: dict[str, ev.SchemaResult], free: dict[str, FreeTextResult],
                     tasks: Sequence[Task], title: str, env: RLTFEnv | None = None) -> tuple[dict, str]:
    """The held-out table: per metric family and overall for each constrained (beam search) and
    free-text (greedy, parsed) schema, plus the fraction of valid plans (1 for constrained
    decoding); ``env`` (the held-out env): its own columns (travel's, pddl's), when it has any, and the
    mean reward instead (:func:`rltf.evaluation.schemas.results_table`). Returns ``(table, markdown)``."""
    results = [*constrained.values(), *(f.result for f in free.values())]
    table = ev.results_table(results, tasks, env)
    valid = {**{k: 1.0 for k in constrained}, **{k: f.valid_fraction for k, f in free.items()}}
    for schema, row in table["rows"].items():
        row["valid"] = valid[schema]
    table["columns"] = [*table["columns"], "valid"]
    table["n_tasks"]["valid"] = len(tasks)
    return table, ev.table_markdown(table, title)
