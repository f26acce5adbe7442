"""Baselines b for the advantage A = R - b (``rltf.baseline``).

A *group* is the samples of one task in the batch (its ``k_samples`` plans, or trajectories; a task
drawn twice in a batch is one group of 2K). Whether a sample's own reward R_i is in its b_i decides
whether E[A·∇log π] is the policy gradient (not in it: unbiased) or a biased/rescaled version:

=================  ===========================================  ===================================  ==========
``baseline``       b_i                                          A_i                                  own R_i in b_i
=================  ===========================================  ===================================  ==========
``moving_average`` EMA of earlier batches' mean reward           R_i − b_i                            never
                   (the paper's Eq. 4)
``per_task``       EMA of earlier visits' mean reward of the     R_i − b_i                            never
                   task
``rloo``           mean of the group's OTHER K−1 rewards         R_i − b_i                            never
                   (leave-one-out)
``grpo``           the group's mean reward (GRPO, DeepSeekMath)  (R_i − b_i) / (std_group + 1e-4)     yes
``dr_grpo``        the group's mean reward (Dr. GRPO)            R_i − b_i                            yes
``unordered_set``  B_i: p(s_i)R_i + the unordered-set estimate   n/T · p(s_i)·R(S, s_i)·(R_i − B_i)   its exact
                   of E[R] from the group's other plans          (the estimator's weight)             share
                   (Kool et al. 2020)
=================  ===========================================  ===================================  ==========

``moving_average`` / ``per_task`` / ``rloo``: a sample's baseline never contains its own reward, so
E[(R − b)·∇log π] is unbiased. The moving averages are updated AFTER the advantage is computed;
before a moving average has history (the first batch; a task's first visit for ``per_task``), b_i
is the leave-one-out mean of the other rewards it would have averaged: the rest of the batch
(``moving_average``) or the task's other samples in the batch (``per_task``). A sample with no
other sample to compare with (a batch of one; K = 1) gets b_i = R_i: advantage 0, no update from it.

``grpo`` / ``dr_grpo``: the group mean contains the sample's own reward by definition. Without
the std, that only rescales: R_i − mean = (K−1)/K · (R_i − mean of the others), so ``dr_grpo`` is
``rloo`` times (K−1)/K (unbiased up to that constant). ``grpo`` divides by the group's reward
standard deviation (Bessel-corrected, as TRL's GRPOTrainer; 0 for a group of one), which also
depends on R_i: groups with nearly equal rewards get large weights (the bias Dr. GRPO removes). A
group whose rewards are all equal has A = 0 for every sample under both.

Each row of the table is an entry of :data:`BASELINES` (a :class:`~rltf.algorithms.registry.Registry`
of :class:`BaselineSpec`: the formula as a plain function ``(rewards, task_ids, memory, decay) ->
(advantages, baselines)`` plus its properties: ``group`` (a baseline over each task's group of K
samples: K = 1 makes every advantage 0, so the config asks for ``k_samples >= 2``) and
``own_reward``); ``rltf.baseline`` accepts exactly its names. :class:`Baseline` is the run's baseline:
the chosen formula and the memory the moving averages carry between batches, which checkpoints with
``state_dict`` / ``load_state_dict`` (the group baselines keep none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rltf.algorithms.registry import Registry
from rltf.algorithms.unordered_set import unordered_set_weights

GRPO_STD_EPS = 1e-4  # grpo: A = (R − mean) / (std + eps), TRL's epsilon


@dataclass(frozen=True)
class SetDraws:
    """What the unordered-set estimator reads of a batch drawn without replacement: log π_c of each
    plan as the sampler drew it, and whether its task's set holds every valid plan."""

    logp: np.ndarray
    complete: np.ndarray


@dataclass
class Memory:
    """What the moving averages carry from batch to batch (the group baselines use none of it)."""

    value: float | None = None  # moving_average: the EMA of the batches' mean reward
    per_task: dict[int, float] = field(default_factory=dict)  # per_task: each task's EMA


# ---------------------------------------------------------------------------- the formulas
# (rewards, task ids, memory, decay) -> (advantages, baselines); the moving averages take in the
# batch AFTER its advantages are computed


def moving_average(r: np.ndarray, ids: np.ndarray, memory: Memory, decay: float,
                   sets: SetDraws | None = None) -> tuple[np.ndarray, np.ndarray]:
    b = leave_one_out(r) if memory.value is None else np.full_like(r, memory.value)
    mean = float(r.mean())
    memory.value = mean if memory.value is None else decay * memory.value + (1 - decay) * mean
    return r - b, b


def per_task(r: np.ndarray, ids: np.ndarray, memory: Memory, decay: float,
             sets: SetDraws | None = None) -> tuple[np.ndarray, np.ndarray]:
    b = np.array([memory.per_task.get(int(t), np.nan) for t in ids])
    first = np.isnan(b)  # a task's first visit: the mean of its other samples
    for t in np.unique(ids[first]):
        b[ids == t] = leave_one_out(r[ids == t])
    for t in np.unique(ids):
        mean = float(r[ids == t].mean())
        old = memory.per_task.get(int(t))
        memory.per_task[int(t)] = mean if old is None else decay * old + (1 - decay) * mean
    return r - b, b


def rloo(r: np.ndarray, ids: np.ndarray, memory: Memory, decay: float,
         sets: SetDraws | None = None) -> tuple[np.ndarray, np.ndarray]:
    b = np.empty_like(r)
    for t in np.unique(ids):
        m = ids == t
        b[m] = leave_one_out(r[m])
    return r - b, b


def group_mean(r: np.ndarray, ids: np.ndarray, scaled: bool) -> tuple[np.ndarray, np.ndarray]:
    """(R − group mean) / scale, the group mean; scale = the group's reward std + eps when ``scaled``
    (grpo), 1 otherwise (dr_grpo)."""
    b, scale = np.empty_like(r), np.ones_like(r)
    for t in np.unique(ids):
        m = ids == t
        b[m] = r[m].mean()
        if scaled:
            scale[m] = (r[m].std(ddof=1) if m.sum() > 1 else 0.0) + GRPO_STD_EPS
    return (r - b) / scale, b


def grpo(r: np.ndarray, ids: np.ndarray, memory: Memory, decay: float,
         sets: SetDraws | None = None) -> tuple[np.ndarray, np.ndarray]:
    return group_mean(r, ids, scaled=True)


def dr_grpo(r: np.ndarray, ids: np.ndarray, memory: Memory, decay: float,
            sets: SetDraws | None = None) -> tuple[np.ndarray, np.ndarray]:
    return group_mean(r, ids, scaled=False)


def unordered_set(r: np.ndarray, ids: np.ndarray, memory: Memory, decay: float,
                  sets: SetDraws | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per task's set: advantage n/T · p(s)R(S, s)·(R_s − B_s), baseline B_s (module docstring)."""
    if sets is None:
        raise ValueError("the unordered_set baseline needs the plans' log-probabilities as drawn without replacement")
    adv, b = np.empty_like(r), np.empty_like(r)
    tasks = np.unique(ids)
    for t in tasks:
        m = ids == t
        w, b[m] = unordered_set_weights(sets.logp[m], r[m], bool(sets.complete[m].all()))
        adv[m] = w * (r[m] - b[m])
    return adv * (len(r) / max(1, len(tasks))), b


@dataclass(frozen=True)
class BaselineSpec:
    """One ``rltf.baseline``: its formula and the properties the config and the docs read."""

    advantages: Callable[..., tuple[np.ndarray, np.ndarray]]  # (rewards, task ids, memory, decay, sets)
    group: bool  # b over each task's group of K samples in the batch: needs k_samples >= 2
    own_reward: bool  # b_i contains R_i (biased or rescaled policy gradient)
    without_replacement: bool = False  # weights a set of K distinct plans drawn without replacement: needs an
    #                                    objective that draws one (rltf.algorithms.choice; auto picks unordered_set)


BASELINES: Registry[BaselineSpec] = Registry("baseline", {
    "moving_average": BaselineSpec(moving_average, group=False, own_reward=False),
    "per_task": BaselineSpec(per_task, group=False, own_reward=False),
    "rloo": BaselineSpec(rloo, group=True, own_reward=False),
    "grpo": BaselineSpec(grpo, group=True, own_reward=True),
    "dr_grpo": BaselineSpec(dr_grpo, group=True, own_reward=True),
    "unordered_set": BaselineSpec(unordered_set, group=True, own_reward=True, without_replacement=True),
})


# -------------------------------------------------------------------------- the run's baseline
@dataclass
class Baseline:
    """The run's baseline ``kind`` (a name of :data:`BASELINES`) and its memory."""

    kind: str = "moving_average"
    decay: float = 0.9
    value: float | None = None
    per_task: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.spec = BASELINES.lookup(self.kind)
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"baseline decay {self.decay!r}: expected a value in [0, 1)")

    def advantages(self, rewards: Sequence[float], task_ids: Sequence[int],
                   sets: SetDraws | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(advantages, baselines) for a batch; then the moving averages take in this batch. ``sets``:
        the batch's draw without replacement (the ``unordered_set`` baseline reads it)."""
        r = np.asarray(rewards, dtype=np.float64)
        memory = Memory(self.value, self.per_task)
        out = self.spec.advantages(r, np.asarray(task_ids), memory, self.decay, sets)
        self.value = memory.value  # (per_task: the same dict, updated in place)
        return out

    def state_dict(self) -> dict:
        return {"kind": self.kind, "decay": self.decay, "value": self.value,
                "per_task": {str(k): v for k, v in self.per_task.items()}}

    def load_state_dict(self, state: dict) -> None:
        if state["kind"] != self.kind:
            raise ValueError(f"checkpoint baseline is {state['kind']!r} but the config asks for {self.kind!r}")
        self.value = state["value"]
        self.per_task = {int(k): float(v) for k, v in state["per_task"].items()}


def leave_one_out(r: np.ndarray) -> np.ndarray:
    """b_i = mean of the other rewards; b_i = r_i (advantage 0) when there is no other."""
    return (r.sum() - r) / (len(r) - 1) if len(r) > 1 else r.copy()


def normalize(adv: np.ndarray, std: float, eps: float = 1e-6) -> np.ndarray:
    """Scale advantages by ``std`` — the standard deviation over EVERY process's advantages, so the
    update does not depend on how the batch was sharded (no re-centring: the baseline did that)."""
    return adv / (std + eps) if std > eps else adv
