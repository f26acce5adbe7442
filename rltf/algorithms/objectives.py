"""The objectives of the update: REINFORCE, and the clipped ratio surrogate for several exact updates
from one sampled batch (``rltf.update_epochs``, ``rltf.minibatches``).

REINFORCE (:func:`reinforce`, one update per batch): each unit's objective is w·log π_c, w its loss
weight, so the gradient of the batch's mean is the policy gradient with a baseline.

After a batch is sampled and executed once, every further gradient step on it is off-policy: the
plans were drawn from π_c,old, the constrained policy at sampling time, and the weights have moved
since. Each sample's objective is PPO's clipped surrogate

    min(r·A, clip(r, 1 − ε, 1 + ε)·A),   r = π_c(plan) / π_c,old(plan) = exp(log π_c − log π_c,old)

with A the sample's loss weight (:func:`rltf.rl.steps.loss_weights`: advantage and regularisers,
fixed at sampling time) and ε = ``rltf.clip_eps``. Unlike libraries that take the ratio of
unconstrained token log-probabilities of samples a constrained decoder produced, r here is the ratio
of the constrained, renormalised policy itself: log π_c is the teacher-forced scorer
(:func:`constrained_decoding.logprobs.plan_logprobs`) under the grammars, decoded rows and
temperature the sampler used, and log π_c,old is the same scorer's value before the first update.

At r = 1 (the batch's first minibatch) ∇(r·A) = A·∇log π_c: the surrogate's gradient is REINFORCE's.
Clipping zeroes the gradient of a sample whose ratio already left the range in the direction of its
advantage (r > 1 + ε with A > 0, r < 1 − ε with A < 0): the update stops pushing it further.

A flow's trajectory is a sequence of constrained decisions, each conditioned on the earlier ones,
so its exact importance weight is the product of its decisions' ratios (``rltf.ratio``):

* ``trajectory`` (default) — every decision's ratio is its trajectory's ρ = Π_d r_d, with the
  gradient of its own log π_c(decision) (:func:`decision_log_ratios`): unclipped, the gradient is
  ρ·Σ_d w_d·∇log π_c(d), the importance-weighted policy gradient of the trajectory (with the
  per-decision credit of ``flow.credit``; under global credit exactly ∇ min(ρA, clip(ρ)A)); the
  trust region holds the whole trajectory. Chosen as the default because it is the exact
  correction — the reason to compute constrained ratios at all — and a flow's trajectories are a
  handful of decisions, so the product does not drift out of the range much faster than a plan's.
* ``decision`` — each decision's own r_d (as PPO/GRPO take per-token ratios on LLMs): lower
  variance for long trajectories, but biased, since it ignores how the earlier decisions'
  change moved the states the later ones are taken in.

A flat plan is a single decision: both are the same.

:data:`OBJECTIVES` names the two objectives (one pass of one minibatch is ``reinforce``, anything else
``clipped``: :func:`objective_name`) and :data:`RATIOS` the ratio kinds (``rltf.ratio`` accepts
exactly its names), each a plain function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from rltf.algorithms.registry import Registry


class Surrogate(NamedTuple):
    objective: torch.Tensor  # per unit (plan or decision): min(r·A, clip(r)·A), with gradients; maximise
    clip_fraction: float  # fraction of the units whose gradient the clip zeroed
    approx_kl: float  # mean of (r − 1) − log r over the units: an estimate of KL(π_c,old ‖ π_c), ≥ 0


def clipped_surrogate(log_ratio: torch.Tensor, weights: torch.Tensor, clip_eps: float) -> Surrogate:
    """PPO's clipped surrogate per unit: ``log_ratio`` = log π_c − log π_c,old (with gradients through
    log π_c), ``weights`` the units' A (no gradient), ``clip_eps`` the range ε. The loss of a minibatch
    is minus its mean (flat plans) or its sum over trajectories' decisions / trajectories (flows)."""
    if not 0.0 < clip_eps < 1.0:
        raise ValueError(f"clip_eps={clip_eps!r} (rltf.clip_eps): expected a value in (0, 1)")
    if log_ratio.shape != weights.shape:
        raise ValueError(f"{tuple(log_ratio.shape)} log-ratios for {tuple(weights.shape)} weights: expected one each")
    weights = weights.to(dtype=log_ratio.dtype, device=log_ratio.device)
    ratio = log_ratio.exp()
    objective = torch.minimum(ratio * weights, ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * weights)
    with torch.no_grad():
        r, lr = ratio.detach().double(), log_ratio.detach().double()
        clipped = ((r > 1.0 + clip_eps) & (weights > 0)) | ((r < 1.0 - clip_eps) & (weights < 0))
        n = max(1, r.numel())
        clip_fraction = float(clipped.sum()) / n
        approx_kl = float(((r - 1.0) - lr).sum()) / n
    return Surrogate(objective, clip_fraction, approx_kl)


def reinforce(logp: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """REINFORCE's objective per unit: w·log π_c (gradient w·∇log π_c); maximise its mean."""
    return weights.to(logp.device) * logp


def decision_ratio(logp: torch.Tensor, old_logp: torch.Tensor, owner: torch.Tensor | None,
                   trajectories: int) -> torch.Tensor:
    """log r_d = log π_c(d) − log π_c,old(d): each decision's own ratio."""
    return logp - old_logp.to(device=logp.device, dtype=logp.dtype)


def trajectory_ratio(logp: torch.Tensor, old_logp: torch.Tensor, owner: torch.Tensor | None,
                     trajectories: int) -> torch.Tensor:
    """The value of log ρ = Σ_{d' of the trajectory} (log π_c(d') − log π_c,old(d')) with the gradient
    of decision d's own log π_c; ``owner`` None (one decision per trajectory: flat plans) is the
    decision's own ratio."""
    own = decision_ratio(logp, old_logp, owner, trajectories)
    if owner is None:
        return own
    owner = owner.to(logp.device)
    detached = own.detach()
    per_traj = torch.zeros(trajectories, dtype=own.dtype, device=own.device).index_add(0, owner, detached)
    return own + (per_traj[owner] - detached)


RATIOS: Registry[Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None, int], torch.Tensor]] = Registry(
    "ratio", {"trajectory": trajectory_ratio, "decision": decision_ratio})

OBJECTIVES: Registry[Callable[..., object]] = Registry("objective", {"reinforce": reinforce,
                                                                     "clipped": clipped_surrogate})


def objective_name(update_epochs: int, minibatches: int) -> str:
    """``reinforce`` for one pass of one minibatch (r ≡ 1: the surrogate's gradient is REINFORCE's,
    computed directly), ``clipped`` otherwise."""
    return "reinforce" if update_epochs == 1 and minibatches == 1 else "clipped"


def decision_log_ratios(logp: torch.Tensor, old_logp: torch.Tensor, owner: torch.Tensor | None, trajectories: int,
                        ratio: str = "trajectory") -> torch.Tensor:
    """log r per decision of flow trajectories (``rltf.ratio``: a name of :data:`RATIOS`): ``logp``
    (with gradients) and ``old_logp`` per decision, ``owner`` the index of each decision's trajectory
    (of ``trajectories``).

    ``decision``: log π_c(d) − log π_c,old(d). ``trajectory``: the value of log ρ = Σ_{d' of the
    trajectory} (log π_c(d') − log π_c,old(d')) with the gradient of decision d's own log π_c — so
    the surrogate summed over a trajectory's decisions is differentiated decision by decision with
    each decision's own weight (see the module docstring)."""
    return RATIOS.lookup(ratio)(logp, old_logp, owner, trajectories)
