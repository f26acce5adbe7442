"""RLTF inside a flow: REINFORCE on trajectories of constrained decisions (MTP, OKR-Agent, ...).

One step, top to bottom (:meth:`FlowRLTFTrainer.train_step`), the same as
:class:`rltf.rl.trainer.RLTFTrainer`'s with a trajectory where it has a plan:

1. draw ``tasks_per_batch`` train queries (the same draw on every process; each takes its shard);
2. run the flow ``k_samples`` times per query with the planner backend *sampling* every choice
   from π_c (the backend's generator reseeded from ``(seed, step, process, query, k)``: a resumed
   run samples what the uninterrupted one would have): each pass is a trajectory of decisions
   (:mod:`rltf.flows.training.trajectory`), its reward the evaluator's score of the delivered itinerary;
3. log π_c(decision) recomputed teacher-forced WITH gradients for every decision of every
   trajectory (:func:`rltf.flows.backends.planner.rescore`: the decoded rows, prompts and
   temperature the sampler used); log π_c(trajectory) = Σ_decisions log π_c(decision);
4. loss weights: the trajectory's weight from the same baselines and regularisers as a flat plan
   (:meth:`~rltf.rl.trainer.RLTFTrainer.loss_weights`: moving average / per-task / RLOO over the K
   passes of a query, entropy and KL on log π_c(trajectory)), then per decision
   (:func:`~rltf.flows.training.trajectory.decision_weights`: ``flow.credit`` global or local+global);
   loss = −Σ_decisions w·log π_c(decision) / trajectories;
5. backward, average gradients over processes, clip, step (:meth:`~rltf.rl.trainer.RLTFTrainer.update`).

With ``flow.roles: lora`` every role decodes and is scored with its own LoRA adapter of one
base model (:class:`rltf.flows.training.roles.RoleAdapters`); the loss sums over roles, so the adapters
train together in one optimizer step. Checkpoints, resume, non-finite handling and the loop are
the flat trainer's.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from rltf.flows.backends.base import Sampling
from rltf.flows.backends.planner import PlannerBackend, rescore
from rltf.flows.training.trajectory import Trajectory, decision_weights, role_rewards, roll_out
from rltf.rl.trainer import RLTFTrainer, StepBatch


class FlowRLTFTrainer(RLTFTrainer):
    """The RLTF loop on a flow of the travel sandbox (``flow.methods[0]``; see the module docstring)."""

    def __init__(self, cfg, planner, env, accelerator, tracker=None, evaluate=None, sharding=None, roles=None):
        super().__init__(cfg, planner, env, accelerator, tracker, evaluate, sharding)
        self.flow = cfg.flow
        self.method = cfg.flow.methods[0]
        self.roles = roles  # RoleAdapters (flow.roles: lora) or None: one policy for every role
        self.backend = PlannerBackend(planner, sampling=Sampling(max_new_tokens=cfg.flow.backend.max_new_tokens,
                                                                 do_sample=True, temperature=self.rl.temperature),
                                      batch_size=cfg.flow.backend.batch_size)
        if self.roles is not None:
            self.backend = self.roles.backend(self.backend)
        self.last_trajectories: list[Trajectory] = []

    def load_weights(self, directory) -> None:
        """The base weights, then (``flow.roles: lora``) every role adapter's."""
        super().load_weights(directory)
        if self.roles is not None:
            self.roles.load(directory)

    def _roll_outs(self, tasks, sample_seed: int) -> list[Trajectory]:
        out = []
        for ti, task in enumerate(tasks):
            for k in range(self.rl.k_samples):
                self.backend.reseed(int(np.random.default_rng([sample_seed, ti, k]).integers(2**62)))
                out.append(roll_out(self.method, self.env, task.id, self.backend, self.flow))
        return out

    def _scored(self, model, decisions) -> torch.Tensor:
        """log π_c of every decision under ``model`` now (per role's adapter with ``roles: lora``).
        A choice with one option has log π_c = 0 whatever the weights: it is not run through the
        model (under FSDP every decision is, so that every process makes the same forward calls)."""
        forced = [not self.sharding.sharded and _forced(d) for d in decisions]
        live = [d for d, f in zip(decisions, forced) if not f]
        if not live:
            return torch.zeros(len(decisions), device=self.acc.device, requires_grad=True)
        if self.roles is None:
            lp = rescore(model, self.planner.tokenizer, [d.completion for d in live], through_forward=self.sharding.sharded)
        else:
            lp = self.roles.rescore(model, self.planner.tokenizer, live, through_forward=self.sharding.sharded)
        if not any(forced):
            return lp
        idx = torch.tensor([i for i, f in enumerate(forced) if not f], device=lp.device)
        return torch.zeros(len(decisions), dtype=lp.dtype, device=lp.device).index_put((idx,), lp)

    def train_step(self) -> dict[str, float]:
        rl, acc = self.rl, self.acc
        t0 = time.perf_counter()
        rng = np.random.default_rng([self.cfg.seed, self.step])
        sample_seed = int(rng.integers(2**62)) + acc.process_index

        # 1. queries: one global draw, sharded across processes
        replace = rl.tasks_per_batch > len(self.train_ids)
        drawn = rng.choice(self.train_ids, size=rl.tasks_per_batch, replace=replace).tolist()
        tasks = [self.env.get_task(i) for i in drawn[acc.process_index :: acc.num_processes]]

        # 2. K sampled passes of the flow per query: trajectories of constrained decisions, rewarded
        self.model.eval()  # no dropout: sampling and scoring evaluate the same function
        with self.sharding.gathered(self.model):
            trajs = self._roll_outs(tasks, sample_seed)
        rewards = np.array([t.reward for t in trajs], dtype=np.float64)
        decisions = [d for t in trajs for d in t.decisions]
        owner = torch.tensor([i for i, t in enumerate(trajs) for _ in t.decisions], dtype=torch.long)

        # 3. log π_c of every decision, teacher-forced with gradients; a trajectory's is their sum
        with acc.autocast():
            logp_dec = self._scored(self.model, decisions) if decisions else torch.zeros(0, requires_grad=True)
        owner = owner.to(logp_dec.device)
        logp_traj = torch.zeros(len(trajs), dtype=logp_dec.dtype, device=logp_dec.device).index_add(0, owner, logp_dec)
        logp_d = logp_traj.detach().float().cpu()
        kl = torch.zeros_like(logp_d)
        if self.reference is not None and decisions:
            with self.reference() as ref_model, torch.no_grad():
                ref_dec = self._scored(ref_model, decisions).float()
            ref = torch.zeros(len(trajs), dtype=ref_dec.dtype, device=ref_dec.device).index_add(0, owner.to(ref_dec.device),
                                                                                          ref_dec)
            kl = logp_d - ref.cpu()

        # 4. weights: the trajectory's advantage (baseline over every process's trajectories) + credit
        ids = np.array([t.task_id for t in trajs])
        shaped, adv_all, base_all, all_rewards = self.loss_weights(rewards, ids, logp_d.numpy(), kl.numpy())
        local_mean = self._local_mean(trajs)
        w_dec, credit = decision_weights(shaped, trajs, self.flow.credit, self.flow.local_weight, local_mean)
        w = torch.as_tensor(w_dec, dtype=torch.float32, device=logp_dec.device)
        loss = -(w * logp_dec).sum() / max(1, len(trajs))

        # 5. update
        grad_norm, skipped = self.update(loss)
        self.step += 1
        self.last_trajectories = trajs
        self.last_batch = StepBatch([t.task_id for t in trajs], [t.plan_text for t in trajs], rewards, shaped,
                                    [None] * len(trajs), [t.description for t in tasks for _ in range(rl.k_samples)])
        sampled = torch.tensor([t.logprob for t in trajs], dtype=torch.float64)
        row = {
            "train/reward": float(all_rewards.mean()),
            "train/final_pass": float(self._gather(np.array([t.final_pass for t in trajs], np.float64)).mean()),
            "train/baseline": float(base_all.mean()),
            "train/advantage": float(np.abs(adv_all).mean()),
            "train/loss": float(loss.detach()),
            "train/entropy": float(-logp_d.mean()),  # trajectory-level estimate E[-log π_c]
            "train/kl": float(kl.mean()),
            "train/decisions": len(decisions) / max(1, len(trajs)),
            "train/local": credit.local_mean,
            "train/flow_errors": float(sum(t.error is not None and not t.decisions for t in trajs)),
            "train/distinct_plans": len({(t.task_id, t.plan_text) for t in trajs}) / max(1, len(trajs)),
            "train/logprob_mismatch": float((sampled - logp_d.double()).abs().max()) if len(trajs) else 0.0,
            "train/grad_norm": grad_norm,
            "train/skipped": float(skipped),
            "train/lr": self.scheduler.get_last_lr()[0],
            "train/plans_per_s": len(trajs) * acc.num_processes / (time.perf_counter() - t0),
        }
        row.update({f"role/{r}/reward": v for r, v in role_rewards(trajs, self.flow.credit).items()})
        return row

    def _local_mean(self, trajs: list[Trajectory]) -> float | None:
        """The mean local result over every process's decisions (the local credit's baseline)."""
        local = [d.local for t in trajs for d in t.decisions if d.local is not None]
        if self.acc.num_processes == 1:
            return float(np.mean(local)) if local else None
        tot = self._gather(np.array([sum(local), len(local)], dtype=np.float64)).reshape(-1, 2).sum(0)
        return float(tot[0] / tot[1]) if tot[1] else None


def _forced(decision) -> bool:
    """A choice among one option (log π_c = 0 exactly)."""
    options = getattr(decision.completion.decoded.grammar, "options", None)
    return options is not None and len(options) == 1
