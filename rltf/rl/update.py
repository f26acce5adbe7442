"""The update rule of an RLTF step, written once for both trainers: :func:`policy_update`.

A step hands over its samples (plans, or a flow's trajectories) as *units* — the things log π_c is
computed for: one per plan, one per decision of a trajectory (``owner``: each unit's sample; a flat
plan is the case "one decision per sample", ``owner`` None) — with

* ``logp``: each unit's log π_c as step 4 scored it (with gradients; under ``flow.score_batch``
  its values, without);
* ``weights``: each unit's loss weight w (the advantage with the regularisers,
  :func:`rltf.rl.steps.loss_weights`; per decision after ``flow.credit``);
* ``score(rows)``: those units' log π_c under the weights as they are now, with gradients.

The objective is the run's entry (``rltf.objective``, :func:`rltf.algorithms.choice.objective_of`):
its loss is computed on each minibatch's :class:`~rltf.algorithms.objectives.Units` (log π_c now,
log π_c,old, the weights), and nothing here depends on which entry it is. The passes are generic:

* ``rltf.update_epochs = minibatches = 1``: one optimizer step on every unit, in order; log π_c is
  ``logp`` itself and log π_c,old its values (r ≡ 1). The ``reinforce`` entry (``auto``'s choice
  here) is loss = −Σ_units w·log π_c / samples (flat plans: −mean(w·log π_c));
* otherwise ``update_epochs`` passes over the samples, each cut into ``minibatches``
  (:func:`minibatches`), one step per minibatch: log π_c re-scored by ``score``, log π_c,old the
  values of ``logp``; the first minibatch reuses ``logp`` itself (no update has run), so its r is
  exactly 1. The ``clipped`` entry (``auto``'s choice here) is loss = −Σ_units min(r·w, clip(r, 1 −
  ε, 1 + ε)·w) / samples of the minibatch, r the unit's ratio (``rltf.ratio``: its trajectory's or
  its own, :data:`~rltf.algorithms.objectives.RATIOS`), and its first step is REINFORCE's.

What an entry logs is averaged over each pass's minibatches: ``train/epoch<n>/<name>``.

Whole or chunked (``chunk`` = ``flow.score_batch``): a chunked loss is built on a leaf holding the
units' values and its backward runs ``chunk`` units at a time (:meth:`Updater.apply_in_chunks`: the
same gradient by the chain rule, at most ``chunk`` units in one forward pass).

An optimizer step (:class:`Updater`): backward, gradients averaged over processes and clipped,
optimizer and schedule stepped; a non-finite loss or gradient norm stops the run with the step
named, or skips the update (``rltf.on_nonfinite``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from common.errors import UserError
from rltf.algorithms.choice import objective_of
from rltf.algorithms.objectives import Units
from rltf.rl.steps import Update, gather
from rltf.run.distributed import Sharding, advance_schedule


class NonFiniteLossError(UserError, FloatingPointError):
    """A training step's loss or gradient norm is NaN or infinite (``on_nonfinite: stop``)."""


class Applied(NamedTuple):
    """What :func:`policy_update` did in one step."""

    update: Update  # the step's updates as one (:func:`combined`)
    loss: torch.Tensor  # the (last minibatch's) loss
    passes: dict[str, float]  # train/epoch<n>/<name>: what the objective logged, each pass's mean


# --------------------------------------------------------------------------- one optimizer step
@dataclass(frozen=True)
class Updater:
    """What an optimizer step touches: the model, its optimizer and schedule (prepared for the
    launch's :class:`~rltf.run.distributed.Sharding`), the accelerator (to agree on a non-finite
    loss over processes) and ``rltf.max_grad_norm`` / ``on_nonfinite`` / ``lr`` (the last for the
    error message)."""

    model: torch.nn.Module
    optimizer: Any
    scheduler: Any
    sharding: Sharding
    accelerator: Any
    max_grad_norm: float
    on_nonfinite: str = "stop"
    lr: float = 0.0

    def apply(self, loss: torch.Tensor, step: int) -> Update:
        """Backward, average gradients over processes, clip, step (replicated parameters are averaged
        explicitly; FSDP reduce-scatters them itself). A non-finite loss or gradient norm stops the
        run naming RLTF step ``step + 1``, or skips the update (decided on every process's loss: the
        processes must agree on whether to run the backward)."""
        skipped = self._nonfinite_loss(loss, step)
        grad_norm = float("nan")
        if skipped:
            advance_schedule(self.scheduler)  # the schedule stays aligned with the step count
        else:
            self.sharding.backward(loss)
            grad_norm = self.sharding.clip_and_step(self.model, self.optimizer, self.scheduler, self.max_grad_norm)
            skipped = self._nonfinite("gradient norm", float(grad_norm), step)  # (the step was not applied)
        return Update(grad_norm, float(skipped))

    def apply_in_chunks(self, loss: torch.Tensor, scores: torch.Tensor, rows: Sequence[int],
                        rescore: Callable[[list[int]], torch.Tensor], chunk: int, step: int) -> Update:
        """:meth:`apply` for a loss that reaches the parameters only through per-unit scores (a flow's
        log π_c per decision) too many to hold in one graph. ``scores`` is a leaf (``requires_grad``,
        no graph to the parameters) holding the values of units ``rows``, computed beforehand without
        gradients; ``loss`` was computed from it; ``rescore(rows)`` computes those units' scores again
        with gradients. The backward runs in two stages: d loss / d scores first (no model), then for
        every ``chunk`` rows (in order) their scores re-computed and back-propagated weighted by it,
        the gradients accumulating: by the chain rule the parameters' gradient is :meth:`apply`'s on
        the loss built on the scores' graph, with at most ``chunk`` units in one forward pass. The rest
        as :meth:`apply`; replicated processes only (each process's backward calls may differ in
        number: FSDP and DeepSpeed reduce inside every backward)."""
        if chunk < 1:
            raise ValueError(f"chunk={chunk}: expected at least 1 sample per forward pass")
        if self.sharding.kind != "replicated":
            raise ValueError(f"chunked backward with {self.sharding.kind} sharding: its processes must make the same "
                             "backward calls; expected replicated processes")
        if self._nonfinite_loss(loss, step):
            advance_schedule(self.scheduler)
            return Update(float("nan"), 1.0)
        (d_scores,) = torch.autograd.grad(loss, scores, allow_unused=True)
        if d_scores is None:  # the loss does not depend on the scores
            d_scores = torch.zeros_like(scores)
        rows = list(rows)
        for lo in range(0, len(rows), chunk):
            now = rescore(rows[lo : lo + chunk])
            self.sharding.backward((now * d_scores[lo : lo + chunk].to(device=now.device, dtype=now.dtype)).sum())
        grad_norm = self.sharding.clip_and_step(self.model, self.optimizer, self.scheduler, self.max_grad_norm)
        return Update(grad_norm, float(self._nonfinite("gradient norm", float(grad_norm), step)))

    def _nonfinite_loss(self, loss: torch.Tensor, step: int) -> bool:
        """Whether the update is skipped for a non-finite loss on any process (they all agree: decided
        on the sum of every process's loss)."""
        acc = self.accelerator
        worst = float(loss.detach()) if acc.num_processes == 1 else float(
            gather(acc, np.array([float(loss.detach())])).sum())
        return self._nonfinite("loss", worst, step)

    def _nonfinite(self, what: str, value: float, step: int) -> bool:
        """True when ``value`` is NaN/inf and ``on_nonfinite: skip`` (the update is skipped, warned);
        raises :class:`NonFiniteLossError` naming the step under ``stop``."""
        if math.isfinite(value):
            return False
        message = (f"non-finite {what} at RLTF step {step + 1} ({value}): the policy diverged; lower "
                   f"rltf.lr (now {self.lr:g}) or set rltf.on_nonfinite=skip to skip such steps")
        if self.on_nonfinite == "stop":
            raise NonFiniteLossError(message)
        warnings.warn(message.replace("the policy diverged", "step skipped"), RuntimeWarning, stacklevel=4)
        return True


def combined(updates: list[Update]) -> Update:
    """The updates of one step as one row's numbers: the mean gradient norm of those that ran
    (NaN when none did) and the fraction skipped."""
    norms = [u.grad_norm for u in updates if not math.isnan(u.grad_norm)]
    return Update(float(np.mean(norms)) if norms else float("nan"),
                  float(np.mean([u.skipped for u in updates])) if updates else 0.0)


def minibatches(n: int, count: int, seed: int, step: int, epoch: int) -> list[np.ndarray]:
    """Pass ``epoch`` of step ``step`` over this process's ``n`` samples: a permutation drawn from
    ``(seed, step, epoch)`` cut into ``count`` minibatches of sizes differing by at most one. Every
    process has as many samples (equal shards), so every process takes as many optimizer steps; a
    resumed run cuts what the uninterrupted one would have."""
    if not 1 <= count <= n:
        raise ValueError(f"rltf.minibatches={count}: expected 1 to {n}, the samples each process holds per step "
                         "(tasks_per_batch * k_samples / processes)")
    order = np.random.default_rng([seed, step, epoch, 2]).permutation(n)
    return np.array_split(order, count)


# ------------------------------------------------------------------------------- the update rule
def policy_update(logp: torch.Tensor, weights: torch.Tensor, samples: int, score: Callable[[list[int]], torch.Tensor],
                  rule, updater: Updater, *, seed: int, step: int, owner: torch.Tensor | None = None,
                  chunk: int | None = None) -> Applied:
    """The step's optimizer steps (see the module docstring): ``logp`` and ``weights`` per unit,
    ``samples`` the number of samples, ``owner`` each unit's sample (None: one unit per sample),
    ``score(rows)`` the units' log π_c now with gradients; ``rule`` has ``objective``, ``baseline``,
    ``update_epochs``, ``minibatches`` and what the objective reads (``clip_eps``, ``ratio``: ``rltf.``);
    ``chunk`` (``flow.score_batch``): ``logp`` holds values and every backward runs ``chunk`` units at a
    time; ``step``: the steps done before."""
    def apply(loss: torch.Tensor, leaf: torch.Tensor, rows: list[int]) -> Update:
        if chunk is None:
            return updater.apply(loss, step)
        return updater.apply_in_chunks(loss, leaf, rows, score, chunk, step)

    def values(rows: list[int]) -> torch.Tensor:  # (chunked) log π_c now, without gradients
        with torch.no_grad():
            parts = [score(rows[lo : lo + chunk]) for lo in range(0, len(rows), chunk)]
        return torch.cat(parts) if parts else logp.new_zeros(0)

    objective = objective_of(rule).loss
    if chunk is not None:
        logp = logp.detach().requires_grad_(True)  # the leaf the loss is built on
    old = logp.detach()
    whole = rule.update_epochs == 1 and rule.minibatches == 1  # one step on the batch as sampled (r ≡ 1)
    done: list[Update] = []
    passes: dict[str, float] = {}
    for epoch in range(rule.update_epochs):
        logged: dict[str, list[float]] = {}
        for chosen in [None] if whole else minibatches(samples, rule.minibatches, seed, step, epoch):
            if chosen is None:  # every unit, in order
                units = Units(logp, old, weights, samples, owner, samples)
                listed = list(range(len(logp)))
            else:
                rows = (torch.as_tensor(chosen) if owner is None else
                        torch.nonzero(torch.isin(owner, torch.as_tensor(chosen, device=owner.device))).flatten())
                listed = rows.tolist()
                if not done:  # no update yet: the values of step 4 (r = 1 exactly)
                    now = old[rows].clone().requires_grad_(True) if chunk is not None else logp[rows]
                else:  # re-scored with the weights as they are now
                    now = values(listed).requires_grad_(True) if chunk is not None else score(listed)
                units = Units(now, old[rows], weights[rows], len(chosen), None if owner is None else owner[rows],
                              samples)
            loss, logs = objective(units, rule)
            done.append(apply(loss, units.logp, listed))
            for key, value in logs.items():
                logged.setdefault(key, []).append(value)
        passes.update({f"train/epoch{epoch + 1}/{key}": float(np.mean(v)) for key, v in logged.items()})
    return Applied(combined(done), loss, passes)
