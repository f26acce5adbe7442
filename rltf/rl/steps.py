"""The pieces of an RLTF step that every trainer calls, in the order it calls them.

The flat trainer (:class:`rltf.rl.trainer.RLTFTrainer`, plans) and the flow trainer
(:class:`rltf.flows.training.trainer.FlowRLTFTrainer`, trajectories of decisions) differ in what
they sample and how they score it; around that they run the same maths, written once here:

* :func:`draw_step` — what is random in a step, a pure function of ``(seed, step, process)``: the
  task draw (each process draws from its own fixed part of the tasks: :func:`task_shard`) and the
  seeds of the sampler and the env;
* :func:`loss_weights` — the REINFORCE weight of every sample: advantage against the baseline over
  ALL processes' rewards, the entropy and KL regularisers, the optional normalisation;
* (the update: :func:`rltf.rl.update.policy_update`, the run's objective entry over the batch,
  ``rltf.objective``, whole or chunked, one function for both trainers);
* :func:`step_metrics` — the row every step logs (each trainer adds its own keys).

What the step reads and writes between steps (optimizer, schedule, baseline, KL reference, step
count) is a :class:`rltf.rl.training_state.TrainingState`, which also runs the loop, the checkpoints and
the selected planner; :class:`rltf.rl.training_state.Trainer` is the protocol both trainers meet.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from rltf.algorithms.baselines import Baseline, SetDraws, normalize
from rltf.algorithms.choice import draws_distinct_plans
from rltf.algorithms.unordered_set import set_estimate
from rltf.run.distributed import gather_objects, launch_share

if TYPE_CHECKING:
    from rltf.config.sections import RltfSettings


@dataclass
class StepBatch:
    """What one process sampled and learned from in the last step (for inspection and tests)."""

    task_ids: list[int]
    plans: list[str]  # the plans' texts (a flow: each trajectory's delivered plan)
    rewards: np.ndarray
    advantages: np.ndarray  # after the baseline and the regularisers: the loss weights
    prompts: list[str]


# ------------------------------------------------------------------------------- 1. the draw
@dataclass(frozen=True)
class StepDraw:
    """What is random in one step for one process."""

    task_ids: list[int]  # this process's shard of the global draw
    sample_seed: int  # the sampler's generator seed (made on the model's device by the decoder)
    env_rng: np.random.Generator  # what the env's scoring draws (OpenAGI: each plan's sample subset)


def draw_step(seed: int, step: int, task_ids: list[int], tasks_per_batch: int, process_index: int = 0,
              num_processes: int = 1) -> StepDraw:
    """``tasks_per_batch`` of ``task_ids`` drawn for step ``step``; a pure function of ``(seed, step,
    process)``, so a resumed run draws what the uninterrupted one would.

    One process draws them from all of ``task_ids`` (with replacement only when there are fewer).
    With several, every process owns a fixed part of the tasks, the same at every step
    (:func:`task_shard`: every ``num_processes``-th task from its index), and its
    ``tasks_per_batch / num_processes`` tasks of the step come from its part: a task is only ever
    sampled, executed and cached by one process, so the processes' execution caches do not overlap.
    Every process makes the whole global draw (each part's share, in process order, from one
    generator seeded by ``(seed, step)``) and keeps its own, so the global batch (``tasks_per_batch``
    tasks, stratified over the parts) depends only on ``(seed, step, num_processes)``."""
    if num_processes < 1 or not 0 <= process_index < num_processes:
        raise ValueError(f"process {process_index} of {num_processes}: expected 0 <= process < processes")
    if tasks_per_batch % num_processes:
        raise ValueError(f"rltf.tasks_per_batch={tasks_per_batch} must be divisible by the {num_processes} processes")
    rng = np.random.default_rng([seed, step])
    # (a seed, not a generator: a CPU generator cannot draw for CUDA tensors)
    sample_seed = int(rng.integers(2**62)) + process_index
    per_process = tasks_per_batch // num_processes
    drawn: list[int] = []
    for p in range(process_index + 1):  # the parts before this one advance the generator as they would
        part = task_shard(task_ids, p, num_processes)
        drawn = rng.choice(part, size=per_process, replace=per_process > len(part)).tolist()
    return StepDraw(drawn, sample_seed, np.random.default_rng([seed, step, process_index, 1]))


def task_shard(task_ids: list[int], process_index: int, num_processes: int) -> list[int]:
    """The tasks process ``process_index`` of ``num_processes`` owns: every ``num_processes``-th of
    ``task_ids`` from its index (parts differ in size by one at most); all of them for one process."""
    part = list(task_ids)[process_index::num_processes]
    if not part:
        raise ValueError(f"{len(task_ids)} train task(s) for {num_processes} processes: every process needs a task "
                         f"of its own; launch at most {len(task_ids)} processes")
    return part


# ------------------------------------------------------------------------------ the rewards
def execute(env, pairs: list, rng: np.random.Generator, accelerator) -> list:
    """The env's results for this process's (task, plan) pairs (``env.reward_plans``). With several
    processes, the env's ``split_reward_plans`` (all processes at once): an env may share the execution
    out (OpenAGI: every process executes its own samples of every process's plans, so no process waits
    for the one whose tasks cost most); the rewards are the same."""
    if accelerator.num_processes == 1:
        return env.reward_plans(pairs, rng=rng)
    return env.split_reward_plans(pairs, rng, gather_objects, accelerator.process_index, accelerator.num_processes)


# ------------------------------------------------------------------------ 2. the loss weights
def gather(accelerator, x: np.ndarray) -> np.ndarray:
    """``x`` of every process, concatenated in process order (``x`` itself with one process)."""
    if accelerator.num_processes == 1:
        return x
    t = torch.as_tensor(x, dtype=torch.float64, device=accelerator.device)
    return accelerator.gather(t).cpu().numpy()


class LossWeights(NamedTuple):
    shaped: np.ndarray  # this process's REINFORCE weights
    advantages: np.ndarray  # every process's advantages R - b
    baselines: np.ndarray  # every process's baselines b
    rewards: np.ndarray  # every process's rewards R
    reward_estimate: float = math.nan  # drawn without replacement: the mean over tasks of E[R]'s estimate


def loss_weights(rewards: np.ndarray, task_ids: np.ndarray, logp: np.ndarray, kl: np.ndarray,
                 baseline: Baseline, rl: RltfSettings, accelerator, complete: np.ndarray | None = None) -> LossWeights:
    """This process's REINFORCE weights, shaped = A − c_H·log π_c − c_KL·KL, normalised by their std
    over ALL processes when ``rl.normalize_rewards``; plus every process's advantages, baselines and
    rewards. The baseline and the std see the whole global batch, so the weights are the same however
    the batch is sharded (shards are equal: tasks_per_batch % processes == 0). Updates ``baseline``.

    Plans drawn without replacement (:func:`~rltf.algorithms.choice.draws_distinct_plans`: the
    ``unordered_set`` objective; ``complete``: per plan, whether its task's set holds every valid
    plan) are weighted by the set's baseline, which weights the regularisers like the reward: they are folded into
    R first (R − c_H·log π_c − c_KL·KL is the score the estimator weights), and ``logp`` must be log π_c
    as the plans were drawn."""
    if draws_distinct_plans(rl):
        return _set_weights(rewards, task_ids, logp, kl, baseline, rl, complete)
    all_rewards = gather(accelerator, np.asarray(rewards, dtype=np.float64))
    all_ids = gather(accelerator, np.asarray(task_ids, dtype=np.float64)).astype(int)
    adv_all, base_all = baseline.advantages(all_rewards, all_ids)
    lo = accelerator.process_index * len(rewards)
    adv = adv_all[lo : lo + len(rewards)]
    shaped = adv - rl.entropy_coef * np.asarray(logp, np.float64) - rl.kl_coef * np.asarray(kl, np.float64)
    if rl.normalize_rewards:
        shaped = normalize(shaped, float(gather(accelerator, shaped).std()))
    return LossWeights(shaped, adv_all, base_all, all_rewards)


def _set_weights(rewards, task_ids, logp, kl, baseline: Baseline, rl: RltfSettings,
                 complete: np.ndarray | None) -> LossWeights:
    """:func:`loss_weights` for a draw without replacement: a process may hold fewer plans than
    another (a task with fewer valid plans than k_samples gives them all), so every process's batch is
    gathered as objects, with the offset of this process's plans."""
    if complete is None:
        raise ValueError(f"the {baseline.kind} baseline needs each task's draw without replacement (complete=)")
    penalty = rl.entropy_coef * np.asarray(logp, np.float64) + rl.kl_coef * np.asarray(kl, np.float64)
    mine = (np.asarray(rewards, np.float64), np.asarray(task_ids), np.asarray(logp, np.float64),
            np.asarray(complete, bool), penalty)
    parts = gather_objects(mine)
    lo = sum(len(p[0]) for p in parts[: launch_share()[0]])  # the plans of the processes before this one
    all_rewards, all_ids, all_logp, all_complete, all_penalty = (np.concatenate(c) for c in zip(*parts))
    adv_all, base_all = baseline.advantages(all_rewards - all_penalty, all_ids.astype(int),
                                            SetDraws(all_logp, all_complete))
    shaped = adv_all[lo : lo + len(rewards)]
    if rl.normalize_rewards:
        shaped = normalize(shaped, float(adv_all.std()))
    estimates = [set_estimate(all_logp[all_ids == t], all_rewards[all_ids == t], bool(all_complete[all_ids == t].all()))
                 for t in np.unique(all_ids)]
    return LossWeights(shaped, adv_all, base_all, all_rewards, float(np.mean(estimates)) if estimates else math.nan)


# ------------------------------------------------------------------------------ 3. the metrics
class Update(NamedTuple):
    """What the optimizer steps of a step did (:class:`rltf.rl.update.Updater`)."""

    grad_norm: float  # before clipping; NaN when the backward did not run (several updates: their mean)
    skipped: float  # the update was not applied (non-finite loss or gradient norm, on_nonfinite: skip):
    #                 1.0 / 0.0; several updates (:func:`rltf.rl.update.combined`): the fraction skipped


def step_metrics(weights: LossWeights, loss: torch.Tensor, logp: torch.Tensor, kl: torch.Tensor,
                 sampled_logp: torch.Tensor, plans: list[tuple[int, str]], applied: Update, lr: float,
                 started: float, num_processes: int) -> dict[str, float]:
    """The row of a step: ``logp`` / ``kl`` are this process's log π_c and KL per sample (detached),
    ``sampled_logp`` the sampler's own log π_c of the same samples, ``plans`` their (task id, plan
    text), ``applied`` what the update did (:func:`rltf.rl.update.policy_update`), ``started`` the
    step's ``time.perf_counter()``."""
    estimate = {} if math.isnan(weights.reward_estimate) else {"train/reward_estimate": weights.reward_estimate}
    return {
        "train/reward": float(weights.rewards.mean()),
        **estimate,  # (drawn without replacement: train/reward is the mean over distinct plans)
        "train/baseline": float(weights.baselines.mean()),
        "train/advantage": float(np.abs(weights.advantages).mean()),
        "train/loss": float(loss.detach()),
        "train/entropy": float(-logp.mean()),  # estimate of E[-log π_c] per sample
        "train/kl": float(kl.mean()),
        "train/distinct_plans": len(set(plans)) / max(1, len(plans)),
        # the sampler's log π_c against the scorer's (0 up to float error)
        "train/logprob_mismatch": (float((sampled_logp - logp.to(sampled_logp.dtype)).abs().max())
                                   if len(sampled_logp) else 0.0),
        "train/grad_norm": applied.grad_norm,
        "train/skipped": float(applied.skipped),
        "train/lr": lr,
        "train/plans_per_s": len(plans) * num_processes / (time.perf_counter() - started),
    }
