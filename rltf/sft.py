"""Supervised fine-tuning on the train tasks' reference plans (the paper's "Fine-tuning" schema).

The loss is the negative log-likelihood of each reference plan under the *constrained* policy
π_c (:func:`constrained_decoding.logprobs.plan_logprobs`): the planner is fitted in exactly the plan
space and row factorisation that RLTF samples from and evaluation searches, for T5 and causal
planners alike. (TRL's SFTTrainer would fit the unconstrained canonical text instead, and has no
encoder-decoder path.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from constrained_decoding.logprobs import plan_logprobs
from envs.openagi.env import OpenAGIEnv
from envs.openagi.tasks import Task
from rltf.distributed import Sharding
from rltf.optim import make_optimizer


def supervised_finetune(planner, env: OpenAGIEnv, tasks: Sequence[Task], *, epochs: int, lr: float,
                        batch_size: int, seed: int, accelerator, max_grad_norm: float = 1.0,
                        progress: bool = True, sharding: Sharding | None = None) -> list[dict]:
    """Fit the reference plans of ``tasks``; returns one row of metrics per epoch.

    Each process takes its share of every batch; a last batch with fewer tasks than processes
    is skipped (every process must run the same number of steps)."""
    sharding = sharding or Sharding("replicated", accelerator)
    model = planner.model
    tasks = list(tasks)
    steps_per_epoch = -(-len(tasks) // batch_size)
    optimizer, scheduler = sharding.prepare(model, *make_optimizer(model, lr, epochs * steps_per_epoch),
                                            max_grad_norm)
    rank, world = accelerator.process_index, accelerator.num_processes
    history = []
    model.eval()  # no dropout: the same function that sampling and scoring use
    bar = tqdm(range(epochs), desc="sft", disable=not (progress and accelerator.is_main_process))
    for epoch in bar:
        order = np.random.default_rng([seed, epoch]).permutation(len(tasks))
        losses = []
        for start in range(0, len(tasks), batch_size):
            if len(order[start : start + batch_size]) < world:
                continue
            batch = [tasks[i] for i in order[start : start + batch_size]][rank::world]
            with accelerator.autocast():
                logp = plan_logprobs(model, planner.tokenizer,
                                   [t.description for t in batch],
                                   [env.grammar(planner.tokenizer, t) for t in batch],
                                   [t.reference_plan for t in batch], through_forward=sharding.sharded)
            loss = -logp.mean()
            sharding.backward(loss)
            sharding.clip_and_step(model, optimizer, scheduler, max_grad_norm)
            losses.append(float(loss.detach()))
        row = {"epoch": epoch, "sft/nll": float(np.mean(losses))}
        history.append(row)
        bar.set_postfix(nll=f"{row['sft/nll']:.3f}")
    sharding.release()
    return history
