"""A flow's pass on one query as an RL trajectory: its constrained decisions, reward and credit.

Every choice a flow makes on the ``planner`` backend is decoded under a grammar with its exact
log π_c (:meth:`rltf.flows.engine.flow.PassResult.constrained`), so a pass is a trajectory of
decisions whose log-probability is the sum of theirs (the decisions are drawn one after the
other, each conditioned on what the earlier ones did to the prompt and the options). The reward
is the env's score of the delivered plan (travel: the evaluator's of the itinerary) (0 when the flow delivers none).

log π_c of the decisions, teacher-forced under the models' weights now, beside the sampler's own
(:attr:`Trajectory.logprob`, no gradients): :func:`decision_logprobs` with gradients (the decoded
rows, prompts and temperature the sampler used: :func:`rltf.flows.backends.planner.rescore`; per
role's adapter under ``flow.roles: lora``), :func:`decision_values` the same without gradients a
chunk at a time (``flow.score_batch``), and :func:`trajectory_logprobs` log π_c(trajectory) =
Σ_decisions log π_c(decision), with the gradients of its decisions. A choice among one option has
log π_c = 0 whatever the weights: it is not run through the model.

Credit (``flow.credit``, :mod:`rltf.algorithms.credit`):

* ``global`` -- every decision is weighted by its trajectory's advantage (plain REINFORCE on the
  trajectory: loss = −Σ_decisions A·log π(decision));
* ``local+global`` -- an executor decision of a meta-task (MTP) additionally gets its meta-task's
  local-constraint result (:meth:`rltf.flows.agents.mtp.MetaTaskPlanning.local_results`, in [0, 1])
  minus the batch's mean local result, times ``flow.local_weight``; the manager's and the
  deliverer's decisions (and every decision of a flow without meta-tasks) keep the global one.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rltf.algorithms.credit import CREDITS
from rltf.flows.agents.dispatch import run_method
from rltf.flows.agents.domain import flow_domain_of
from rltf.flows.backends.base import Completion, check_usage_and_logprob
from rltf.flows.backends.planner import rescore

__all__ = ["Decision", "Trajectory", "decision_logprobs", "decision_owner", "decision_values", "decision_weights",
           "roll_out", "trajectory_logprobs"]


@dataclass
class Decision:
    """One constrained choice of a pass: the node that made it, its role and the completion
    (decoded rows, prompt, temperature and the sampler's log π_c)."""

    node: str
    role: str
    completion: Completion
    local: float | None = None  # its meta-task's local-constraint result (MTP executors)

    def __post_init__(self) -> None:
        """Refuse a decision whose numbers would poison the policy gradient: a NaN, infinite or
        positive log-probability, negative token counts, a non-finite local result."""
        c = self.completion
        check_usage_and_logprob(c.prompt_tokens, c.completion_tokens, c.logprob,
                                f"decision of node {self.node!r}")
        if self.local is not None and (isinstance(self.local, bool) or not isinstance(self.local, numbers.Real)
                                       or not math.isfinite(self.local)):
            raise ValueError(f"decision of node {self.node!r}: local={self.local!r}; expected a finite "
                             "local-constraint result or None")


@dataclass
class Trajectory:
    """One pass of a flow on one query."""

    task_id: int
    decisions: list[Decision]
    reward: float
    final_pass: bool
    plan: Any = None  # the delivered plan (official JSON), None when the flow delivered none
    plan_text: str = ""
    error: str | None = None

    @property
    def logprob(self) -> float:
        """log π_c of the trajectory as sampled: the sum of its decisions' log-probabilities."""
        return float(sum(d.completion.logprob for d in self.decisions if d.completion.logprob is not None))


def roll_out(method: str, env, task_id: int, backend, flow, *, trace_path=None) -> Trajectory:
    """Run ``method``'s flow on one query with ``backend`` (sampling or greedy, as set) and score
    the delivered plan. A flow that raises is a trajectory with reward 0 and no decisions (warned):
    one query's failure does not stop training."""
    try:
        fr = run_method(method, env, task_id, backend, flow, trace_path)
    except Exception as e:  # noqa: BLE001 - one query's crash is that trajectory's failure
        warnings.warn(f"flow {method} raised on query {task_id}: {type(e).__name__}: {e}", RuntimeWarning,
                      stacklevel=2)
        return Trajectory(int(task_id), [], 0.0, False, error=f"{type(e).__name__}: {e}")
    local = (fr.extra or {}).get("local") or {}
    domain = flow_domain_of(env)
    role_of = domain.methods.lookup(method).role_of
    decisions = [Decision(name, role_of(name), c, local.get(name))
                 for name, c in (fr.result.constrained() if fr.result is not None else [])]
    res = env.reward_plans([(task_id, fr.plan if fr.plan is not None else "")])[0]
    reward = res.reward if math.isfinite(res.reward) else 0.0
    return Trajectory(int(task_id), decisions, float(reward), bool(domain.passed(res)), fr.plan,
                      res.plan_text if fr.plan is not None else "", fr.error)


# -------------------------------------------------------------------------- log π_c, re-scored
def decision_logprobs(model, tokenizer, decisions: Sequence[Decision], *, sharded: bool = False, roles=None,
                      encoder_memo=None, device=None) -> torch.Tensor:
    """log π_c of every decision under ``model`` now, teacher-forced WITH gradients (per role's adapter
    with ``roles``, a :class:`~rltf.flows.training.roles.RoleAdapters`). A choice with one option has
    log π_c = 0 whatever the weights: it is not run through the model (``sharded``, under FSDP, every
    decision is, so that every process makes the same forward calls). ``encoder_memo``: the encoder
    states the sampler read the prompts with; ``device``: where the zeros of an all-forced batch go."""
    forced = [not sharded and _forced(d) for d in decisions]
    live = [d for d, f in zip(decisions, forced) if not f]
    if not live:
        return torch.zeros(len(decisions), device=device, requires_grad=True)
    if roles is None:
        lp = rescore(model, tokenizer, [d.completion for d in live], through_forward=sharded, encoder_memo=encoder_memo)
    else:
        lp = roles.rescore(model, tokenizer, live, through_forward=sharded)
    if not any(forced):
        return lp
    idx = torch.tensor([i for i, f in enumerate(forced) if not f], device=lp.device)
    return torch.zeros(len(decisions), dtype=lp.dtype, device=lp.device).index_put((idx,), lp)


def decision_values(model, tokenizer, decisions: Sequence[Decision], chunk: int | None = None, *,
                    sharded: bool = False, roles=None, device=None) -> torch.Tensor:
    """:func:`decision_logprobs` without gradients, ``chunk`` decisions per forward (None: all in one)."""
    size = chunk or max(1, len(decisions))
    with torch.no_grad():
        parts = [decision_logprobs(model, tokenizer, decisions[lo : lo + size], sharded=sharded, roles=roles,
                                   device=device) for lo in range(0, len(decisions), size)]
    return torch.cat(parts) if parts else torch.zeros(0, device=device)


def decision_owner(trajectories: Sequence[Trajectory]) -> torch.Tensor:
    """The index of each decision's trajectory, decisions in trajectory order."""
    return torch.tensor([i for i, t in enumerate(trajectories) for _ in t.decisions], dtype=torch.long)


def trajectory_logprobs(decision_logp: torch.Tensor, owner: torch.Tensor, trajectories: int) -> torch.Tensor:
    """log π_c(trajectory) = Σ_decisions log π_c(decision) for each of ``trajectories`` (``owner``: each
    decision's trajectory), with the decisions' gradients; 0 for a trajectory without decisions."""
    return torch.zeros(trajectories, dtype=decision_logp.dtype, device=decision_logp.device).index_add(
        0, owner.to(decision_logp.device), decision_logp)


def _forced(decision: Decision) -> bool:
    """A choice among one option (log π_c = 0 exactly)."""
    options = getattr(decision.completion.decoded.grammar, "options", None)
    return options is not None and len(options) == 1


@dataclass
class CreditStats:
    """What :func:`decision_weights` did, for logging."""

    local_mean: float = float("nan")  # the batch's mean local result (the local baseline)
    local_decisions: int = 0
    per_role: dict[str, dict[str, float]] = field(default_factory=dict)


def decision_weights(trajectory_weights: np.ndarray, trajectories: Sequence[Trajectory], credit: str,
                     local_weight: float = 1.0, local_mean: float | None = None) -> tuple[np.ndarray, CreditStats]:
    """One loss weight per decision, in trajectory order: its trajectory's weight (the advantage
    with the regularisers, :func:`rltf.rl.steps.loss_weights`), plus, under
    ``local+global`` credit, ``local_weight · (local − local_mean)`` for decisions with a local
    result. ``local_mean`` (the baseline; every process's decisions when given) defaults to this
    batch's mean."""
    weight = CREDITS.lookup(credit).weight
    w = np.asarray(trajectory_weights, dtype=np.float64)
    if len(w) != len(trajectories):
        raise ValueError(f"{len(w)} trajectory weights for {len(trajectories)} trajectories")
    local = [d.local for t in trajectories for d in t.decisions if d.local is not None]
    stats = CreditStats(local_decisions=len(local))
    if local:
        stats.local_mean = float(np.mean(local)) if local_mean is None else float(local_mean)
    out = []
    for wi, t in zip(w, trajectories):
        out.extend(weight(wi, d.local, local_weight, stats.local_mean) for d in t.decisions)
    return np.asarray(out, dtype=np.float64), stats


def role_rewards(trajectories: Sequence[Trajectory], credit: str) -> dict[str, float]:
    """The mean reward credited to each role's decisions: the trajectory's reward, plus the
    decision's local result under ``local+global`` credit (what the per-role reward plot shows)."""
    credited = CREDITS.lookup(credit).reward
    sums: dict[str, list[float]] = {}
    for t in trajectories:
        for d in t.decisions:
            sums.setdefault(d.role, []).append(credited(t.reward, d.local))
    return {role: float(np.mean(v)) for role, v in sorted(sums.items())}
