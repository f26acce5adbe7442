"""Credit: the loss weight of each decision of a flow's trajectory (``flow.credit``).

A trajectory's weight w (its advantage A = R − b with the regularisers,
:func:`rltf.rl.steps.loss_weights`) is shared out to its decisions:

* ``global`` -- every decision gets w (plain REINFORCE on the trajectory:
  loss = −Σ_decisions w·log π(decision));
* ``local+global`` -- a decision with a local result ℓ (an MTP executor: its meta-task's
  local-constraint result in [0, 1]) gets w + λ·(ℓ − ℓ̄), λ = ``flow.local_weight`` and ℓ̄ the mean
  local result of the batch (the local term's baseline); the other decisions (the manager's, the
  deliverer's, every decision of a flow without meta-tasks) keep w. The reward credited to such a
  decision (the per-role reward curve) is R + ℓ.

Each is a :class:`CreditSpec` of :data:`CREDITS` (``flow.credit`` accepts exactly its names): the
decision's weight ``weight(w, ℓ, λ, ℓ̄)`` and its credited reward ``reward(R, ℓ)``, plain functions of
numbers (ℓ None: the decision has no local result).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rltf.algorithms.registry import Registry


def global_weight(w: float, local: float | None, local_weight: float, local_mean: float) -> float:
    return float(w)


def global_reward(reward: float, local: float | None) -> float:
    return reward + 0.0


def local_global_weight(w: float, local: float | None, local_weight: float, local_mean: float) -> float:
    x = float(w)
    if local is not None:
        x += local_weight * (local - local_mean)
    return x


def local_global_reward(reward: float, local: float | None) -> float:
    return reward + (local if local is not None else 0.0)


@dataclass(frozen=True)
class CreditSpec:
    """One ``flow.credit``: a decision's loss weight and the reward credited to it."""

    weight: Callable[[float, float | None, float, float], float]
    reward: Callable[[float, float | None], float]


CREDITS: Registry[CreditSpec] = Registry("credit", {
    "global": CreditSpec(global_weight, global_reward),
    "local+global": CreditSpec(local_global_weight, local_global_reward),
})
