"""Supervised fine-tuning on the train tasks' reference plans (the paper's "Fine-tuning" schema).

The loss is the negative log-likelihood of each reference plan under the *constrained* policy
π_c (:func:`constrained_decoding.logprobs.plan_logprobs`): the planner is fitted in exactly the plan
space and row factorisation that RLTF samples from and evaluation searches, for T5 and causal
planners alike. (TRL's SFTTrainer would fit the unconstrained canonical text instead, and has no
encoder-decoder path.)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import torch

from common.errors import UserError
from constrained_decoding.logprobs import plan_logprobs
from rltf.rl.optim import make_optimizer
from rltf.run.distributed import Sharding, advance_schedule
from rltf.run.tracking import progress_bar


class NonFiniteSFTLossError(UserError, FloatingPointError):
    """An SFT step's loss or gradient norm is NaN or infinite (``sft.on_nonfinite: stop``)."""


def supervised_finetune(planner, env, tasks: Sequence, *, epochs: int, lr: float,
                        batch_size: int, seed: int, accelerator, max_grad_norm: float = 1.0,
                        progress: bool = True, sharding: Sharding | None = None,
                        on_nonfinite: str = "stop") -> list[dict]:
    """Fit the reference plans of ``tasks`` (any env's: ``description``, ``reference_plan``, and
    ``env.grammar``); returns one row of metrics per epoch.

    Each process takes its share of every batch; a last batch with fewer tasks than processes
    is skipped (every process must run the same number of steps). A step whose loss or gradient
    norm is NaN/inf stops with the step named (``on_nonfinite="stop"``) or is skipped ("skip");
    its weights are never updated."""
    tasks = [t for t in tasks if t.reference_plan is not None]  # (a travel query the solver found no plan for)
    sharding = sharding or Sharding("replicated", accelerator)
    model = planner.model
    steps_per_epoch = -(-len(tasks) // batch_size)
    optimizer, scheduler = sharding.prepare(model, *make_optimizer(model, lr, epochs * steps_per_epoch),
                                            max_grad_norm)
    rank, world = accelerator.process_index, accelerator.num_processes
    history = []
    model.eval()  # no dropout: the same function that sampling and scoring use
    # one tick per batch (an epoch of a real LLM is minutes): plain lines every ~30 s when the bar is off
    bar = progress_bar(total=epochs * steps_per_epoch, desc="sft", enabled=progress, main=accelerator.is_main_process)
    for epoch in range(epochs):
        order = np.random.default_rng([seed, epoch]).permutation(len(tasks))
        losses, skipped = [], 0
        for start in range(0, len(tasks), batch_size):
            bar.update(1)
            if len(order[start : start + batch_size]) < world:
                continue
            batch = [tasks[i] for i in order[start : start + batch_size]][rank::world]
            with accelerator.autocast():
                logp = plan_logprobs(model, planner.tokenizer,
                                   [t.description for t in batch],
                                   [env.grammar(planner.tokenizer, t) for t in batch],
                                   [t.reference_plan for t in batch], through_forward=sharding.sharded)
            loss = -logp.mean()
            step = epoch * steps_per_epoch + start // batch_size + 1
            value = _agreed(accelerator, float(loss.detach()))
            if not math.isfinite(value):
                _nonfinite("loss", value, step, lr, on_nonfinite)
                advance_schedule(scheduler)
                skipped += 1
                continue
            sharding.backward(loss)
            norm = sharding.clip_and_step(model, optimizer, scheduler, max_grad_norm)  # not applied if NaN
            if not math.isfinite(norm):
                _nonfinite("gradient norm", norm, step, lr, on_nonfinite)
                skipped += 1
                continue
            losses.append(float(loss.detach()))
        row = {"epoch": epoch, "sft/nll": float(np.mean(losses)) if losses else None, "sft/skipped_steps": skipped}
        history.append(row)
        if row["sft/nll"] is not None:
            bar.set_postfix(nll=f"{row['sft/nll']:.3f}")
    bar.close()
    sharding.release()
    return history


def _agreed(accelerator, value: float) -> float:
    """The sum of every process's ``value`` (NaN/inf if any is): the processes must agree on
    whether a step runs its backward."""
    if accelerator.num_processes == 1:
        return value
    return float(accelerator.reduce(torch.tensor([value], dtype=torch.float64, device=accelerator.device),
                                    reduction="sum"))


def _nonfinite(what: str, value: float, step: int, lr: float, mode: str) -> None:
    message = f"non-finite {what} at SFT step {step} ({value})"
    if mode == "stop":
        raise NonFiniteSFTLossError(f"{message}: the planner diverged; lower sft.lr (now {lr:g}) or set "
                                    "sft.on_nonfinite=skip to skip such steps")
    warnings.warn(f"{message}: step skipped", RuntimeWarning, stacklevel=3)


def warm_start_tasks(train: Sequence, max_plans: int, seed: int) -> list:
    """The train tasks whose reference plans the warm start fits (``sft.max_plans``): all of those with
    one (``max_plans`` 0, or at least their number), else ``max_plans`` of them -- the first of a
    permutation seeded with ``seed``, kept in the train split's order."""
    solved = [t for t in train if t.reference_plan is not None]
    if not max_plans or max_plans >= len(solved):
        return solved
    keep = set(np.random.default_rng([seed, max_plans]).permutation(len(solved))[:max_plans].tolist())
    return [t for i, t in enumerate(solved) if i in keep]
