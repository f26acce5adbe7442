"""The objectives of the update, each a registered entry (``rltf.objective``): REINFORCE, the clipped
ratio surrogate for several exact updates from one sampled batch (``rltf.update_epochs``,
``rltf.minibatches``), the unordered-set estimator's and GRPO's.

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

The objectives are entries of :data:`OBJECTIVES` (``rltf.objective``; ``auto``, a name, or a user's
import path: :mod:`rltf.algorithms.choice`), each an :class:`ObjectiveSpec`: one signature, the
minibatch's :class:`Units` (exact log π_c now and as sampled, the loss weights) and the ``rltf``
settings -> an :class:`Objective` (the loss and the values it logs), plus the properties the config
and the sampler read (one step per batch or several, distinct plans, the baseline its weights need):

* ``reinforce`` — −Σ w·log π_c / samples, one step per batch;
* ``clipped`` — the clipped surrogate above, over ``rltf.update_epochs`` passes of ``rltf.minibatches``;
* ``unordered_set`` — the rule the epochs imply (:func:`objective_name`) on the unordered-set
  estimator's weights, its plans drawn distinct without replacement (the ``unordered_set`` baseline);
* ``grpo`` — TRL's GRPO loss on these units (:func:`grpo_objective`), on the ``grpo`` baseline's
  group-normalised advantages.

:data:`RATIOS` names the ratio kinds (``rltf.ratio`` accepts exactly its names), each a plain function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

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

def objective_name(update_epochs: int, minibatches: int) -> str:
    """``reinforce`` for one pass of one minibatch (r ≡ 1: the surrogate's gradient is REINFORCE's,
    computed directly), ``clipped`` otherwise: the policy-gradient rule the epochs imply (what
    ``rltf.objective: auto`` picks, and the rule of the ``unordered_set`` entry)."""
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


# ----------------------------------------------------------------------------- the entries
@dataclass(frozen=True)
class Units:
    """One minibatch as an objective sees it (:func:`rltf.rl.update.policy_update` cuts it): per unit
    (a plan, or a decision of a flow's trajectory) the exact constrained log π_c now, with gradients,
    and as the batch was sampled, and its loss weight."""

    logp: torch.Tensor  # log π_c now, with gradients (the teacher-forced constrained scorer)
    old_logp: torch.Tensor  # log π_c,old: the same scorer's value before any update of this batch (no gradient)
    weights: torch.Tensor  # the loss weight w (no gradient): the advantage with the regularisers, or the
    #                        unordered-set estimator's weight (rltf.rl.steps.loss_weights)
    samples: int  # plans / trajectories in this minibatch: the loss is a sum over units / samples
    owner: torch.Tensor | None = None  # each unit's sample (of ``trajectories``); None: one unit per sample
    trajectories: int = 0  # the samples of the whole batch (the range of ``owner``)

    def log_ratio(self, kind: str = "trajectory") -> torch.Tensor:
        """log r per unit: log π_c − log π_c,old, its trajectory's or its own (``rltf.ratio``, :data:`RATIOS`)."""
        return RATIOS.lookup(kind)(self.logp, self.old_logp, self.owner, self.trajectories)


class Objective(NamedTuple):
    """What an objective returns for a minibatch: the loss to minimise (a scalar tensor with gradients)
    and the values it logs (name -> float; the step's row has each pass's mean as
    ``train/epoch<n>/<name>``)."""

    loss: torch.Tensor
    logs: dict[str, float]


def reinforce_objective(units: Units, rule) -> Objective:
    """REINFORCE: loss = −Σ_units w·log π_c / samples; logs nothing. One step per batch."""
    return Objective(-reinforce(units.logp, units.weights).sum() / max(1, units.samples), {})


def clipped_objective(units: Units, rule) -> Objective:
    """PPO's clipped surrogate: loss = −Σ_units min(r·w, clip(r, 1 − ε, 1 + ε)·w) / samples, r the
    ``rltf.ratio`` and ε ``rltf.clip_eps``; logs clip_fraction and approx_kl."""
    s = clipped_surrogate(units.log_ratio(rule.ratio), units.weights, rule.clip_eps)
    return Objective(-s.objective.sum() / units.samples, {"clip_fraction": s.clip_fraction, "approx_kl": s.approx_kl})


def policy_gradient(units: Units, rule) -> Objective:
    """The rule the epochs imply (:func:`objective_name`): REINFORCE for one step on the batch, the
    clipped surrogate when the batch is reused."""
    rule_loss = reinforce_objective if objective_name(rule.update_epochs, rule.minibatches) == "reinforce" else \
        clipped_objective
    return rule_loss(units, rule)


def grpo_objective(units: Units, rule) -> Objective:
    """GRPO's loss (TRL's ``GRPOTrainer``, ``loss_type: grpo``) with rltf's units: the clipped term
    −min(r·A, clip(r, 1 − ε, 1 + ε)·A) of every unit, r = exp(log π_c − log π_c,old) even on the
    batch's first step (where r ≡ 1 and the gradient is REINFORCE's, as TRL computes it), averaged
    over each sample's units (TRL: over a completion's tokens; here over a trajectory's decisions, a
    plan being one), then over the samples. A = the weights: the ``grpo`` baseline's group-normalised
    advantages (R − mean of the task's group) / (std of the group + 1e-4). Logs clip_fraction and
    approx_kl."""
    s = clipped_surrogate(units.log_ratio(rule.ratio), units.weights, rule.clip_eps)
    per_unit = s.objective
    if units.owner is not None:  # a sample's units share its 1: each divided by their count
        owner = units.owner.to(per_unit.device)
        counts = torch.zeros(max(units.trajectories, 1), dtype=per_unit.dtype, device=per_unit.device)
        counts = counts.index_add(0, owner, torch.ones_like(per_unit))
        per_unit = per_unit / counts[owner]
    return Objective(-per_unit.sum() / max(1, units.samples),
                     {"clip_fraction": s.clip_fraction, "approx_kl": s.approx_kl})


@dataclass(frozen=True)
class ObjectiveSpec:
    """One ``rltf.objective``: its loss, and the properties the sampler, the update and the config read."""

    loss: Callable[[Units, Any], Objective]  # (units of a minibatch, the rltf settings) -> loss and logged values
    reuses_batch: bool = True  # takes rltf.update_epochs passes of rltf.minibatches steps on one sampled batch
    #                            (off-policy after the first: it reads log π_c,old); False: one step per batch
    without_replacement: bool = False  # a task's k_samples plans are distinct, drawn by stochastic beam search
    baseline: str | None = None  # the rltf.baseline its weights must come from (None: any that needs no set)


OBJECTIVES: Registry[ObjectiveSpec] = Registry("objective", {
    "reinforce": ObjectiveSpec(reinforce_objective, reuses_batch=False),
    "clipped": ObjectiveSpec(clipped_objective),
    "unordered_set": ObjectiveSpec(policy_gradient, without_replacement=True, baseline="unordered_set"),
    "grpo": ObjectiveSpec(grpo_objective, baseline="grpo"),
})
