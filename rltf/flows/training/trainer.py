"""RLTF inside a flow: REINFORCE on trajectories of constrained decisions (MTP, OKR-Agent, ...).

One step, top to bottom (:meth:`FlowRLTFTrainer.train_step`), the same as
:class:`rltf.rl.trainer.RLTFTrainer`'s with a trajectory where it has a plan:

1. draw ``tasks_per_batch`` train queries (each process draws its share from its own fixed part
   of the queries: :func:`rltf.rl.steps.draw_step`, :func:`rltf.rl.steps.task_shard`);
2. run the flow ``k_samples`` times per query with the planner backend *sampling* every choice
   from π_c, the passes together (each backend call decodes the pending decisions of up to
   ``flow.backend.batch_size`` passes), each pass with its own generator seeded from
   ``(seed, step, process, query, k)`` (the same samples alone or batched; a resumed run samples
   what the uninterrupted one would have): each pass is a trajectory of decisions
   (:mod:`rltf.flows.training.trajectory`), its reward the evaluator's score of the delivered itinerary;
3. log π_c(decision) recomputed teacher-forced WITH gradients for every decision of every
   trajectory (:func:`rltf.flows.training.trajectory.decision_logprobs`: the decoded rows, prompts and
   temperature the sampler used); log π_c(trajectory) = Σ_decisions log π_c(decision)
   (:func:`~rltf.flows.training.trajectory.trajectory_logprobs`). An
   encoder-decoder planner reads each distinct prompt once per step: the sampler's encoder pass
   runs with gradients and 3 back-propagates through it (:meth:`FlowRLTFTrainer._encoder_memo`);
   a choice among one option is neither decoded (the backend answers it, log π_c = 0) nor scored;
4. loss weights: the trajectory's weight from the same baselines and regularisers as a flat plan
   (:func:`rltf.rl.steps.loss_weights`: moving average / per-task / RLOO over the K
   passes of a query, entropy and KL on log π_c(trajectory)), then per decision
   (:func:`~rltf.flows.training.trajectory.decision_weights`: ``flow.credit`` global or local+global);
   loss = −Σ_decisions w·log π_c(decision) / trajectories;
5. the update (:func:`rltf.rl.update.policy_update`, the flat trainer's too: units are decisions,
   ``owner`` their trajectory; the loss is the ``rltf.objective`` entry's, here as ``auto`` derives it):
   backward, average gradients over processes, clip, step: once
   (REINFORCE, ``rltf.update_epochs = minibatches = 1``), or ``update_epochs`` passes over the batch
   cut into ``minibatches`` of trajectories, one step per minibatch on the clipped ratio surrogate
   loss = −Σ_decisions min(r·w, clip(r)·w) / trajectories (:func:`rltf.algorithms.objectives.clipped_surrogate`),
   log π_c re-scored as in 3, log π_c,old the values of 3, r the trajectory's ratio or the
   decision's (``rltf.ratio``: :data:`rltf.algorithms.objectives.RATIOS`); the first minibatch
   reuses the values of 3, so its r is exactly 1.

``flow.score_batch: N`` bounds the memory of 3 and 5 (every decision's activations held at once
otherwise): log π_c of the decisions is computed without gradients, N decisions per forward, and
the loss (a function of those values) is back-propagated N decisions at a time, each chunk re-scored
with gradients (:meth:`rltf.rl.update.Updater.apply_in_chunks`: the same gradient, one more forward per
decision); the KL reference scores N at a time too.

With ``flow.roles: lora`` every role decodes and is scored with its own LoRA adapter of one
base model (:class:`rltf.flows.training.roles.RoleAdapters`); the loss sums over roles, so the adapters
train together in one optimizer step. The optimizer, baseline, KL reference, loop, checkpoints,
resume and the periodic validation are a :class:`rltf.rl.training_state.TrainingState` run by the
:class:`rltf.rl.training_state.Trainer` both trainers extend: ``validate(planner)`` (the main job's:
:func:`rltf.stages.flow_job.flow_validation`, the flow with greedy decisions on validation queries) scores the
planner at step 0 and every
``rltf.eval_every`` steps, and ``rltf.select: best_validation`` hands on the best step's weights
(role adapters included).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from constrained_decoding.encoder_memo import EncoderMemo
from rltf.flows.backends.base import Sampling
from rltf.flows.backends.planner import PlannerBackend
from rltf.flows.engine.batching import PassBatch
from rltf.flows.training.trajectory import (
    Trajectory,
    decision_logprobs,
    decision_owner,
    decision_values,
    decision_weights,
    role_rewards,
    roll_out,
    trajectory_logprobs,
)
from rltf.rl.steps import StepBatch, draw_step, gather, loss_weights, step_metrics
from rltf.rl.training_state import Selection, TrainingState
from rltf.rl.update import policy_update


class FlowRLTFTrainer:
    """The RLTF loop on a flow of the travel sandbox (``flow.methods[0]``; see the module docstring)."""

    def __init__(self, cfg, planner, env, accelerator, tracker=None, validate=None, sharding=None, roles=None):
        self.cfg, self.rl = cfg, cfg.rltf
        self.planner, self.model, self.env, self.acc = planner, planner.model, env, accelerator
        self.state = TrainingState(cfg, planner, accelerator, sharding, tracker, validate)
        self.train_ids = [t.id for t in env.tasks()]
        self.last_batch: StepBatch | None = None  # what the last step sampled and learned from
        self.flow, self.method = cfg.flow, cfg.flow.methods[0]
        self.roles = roles  # RoleAdapters (flow.roles: lora) or None: one policy for every role
        self.backend = PlannerBackend(planner, sampling=Sampling(max_new_tokens=cfg.flow.backend.max_new_tokens,
                                                                 do_sample=True, temperature=self.rl.temperature),
                                      batch_size=cfg.flow.backend.batch_size)
        if self.roles is not None:
            self.backend = self.roles.backend(self.backend)
        self.score_batch = cfg.flow.score_batch  # decisions per forward when re-scoring (None: all at once)
        if self.score_batch is not None and self.state.sharding.kind != "replicated":
            raise ValueError(f"flow.score_batch={self.score_batch} runs one backward per chunk of decisions, which "
                             f"{self.state.sharding.kind} sharding cannot (its processes must make the same calls); "
                             "set flow.score_batch=null")
        self.last_trajectories: list[Trajectory] = []

    # ------------------------------------------------------------------------------ one step
    def train_step(self) -> dict[str, float]:
        rl, acc, state = self.rl, self.acc, self.state
        started = time.perf_counter()

        # 1. queries: one global draw, sharded across processes
        draw = draw_step(self.cfg.seed, state.step, self.train_ids, rl.tasks_per_batch, acc.process_index,
                         acc.num_processes)
        tasks = [self.env.get_task(i) for i in draw.task_ids]

        # 2. K sampled passes of the flow per query: trajectories of constrained decisions, rewarded
        self.model.eval()  # no dropout: sampling and scoring evaluate the same function
        memo = self._encoder_memo()  # (encoder-decoder) each prompt's encoder pass, shared by 2 and 3
        with state.sharding.gathered(self.model):
            trajs = self._roll_outs(tasks, draw.sample_seed, memo)
        rewards = np.array([t.reward for t in trajs], dtype=np.float64)
        decisions = [d for t in trajs for d in t.decisions]

        # 3. log π_c of every decision, teacher-forced with gradients (flow.score_batch: values; the
        #    update re-scores them in chunks); a trajectory's is their sum
        chunk = self.score_batch if decisions else None
        score = self._scorer(decisions)
        with acc.autocast():
            if chunk:
                logp_dec = self._values(self.model, decisions)
            else:
                logp_dec = score(range(len(decisions)), memo) if decisions else torch.zeros(0, requires_grad=True)
        del memo  # the weights change from here on
        owner = decision_owner(trajs).to(logp_dec.device)
        logp_d = trajectory_logprobs(logp_dec, owner, len(trajs)).detach().float().cpu()
        kl = self._kl(logp_d, decisions, owner)

        # 4. weights: the trajectory's advantage (baseline over every process's trajectories) + credit
        ids = [t.task_id for t in trajs]
        weights = loss_weights(rewards, np.array(ids), logp_d.numpy(), kl.numpy(), state.baseline, rl, acc)
        w_dec, credit = decision_weights(weights.shaped, trajs, self.flow.credit, self.flow.local_weight,
                                         _local_mean(trajs, acc))
        w = torch.as_tensor(w_dec, dtype=torch.float32, device=logp_dec.device)

        # 5. update: REINFORCE or the clipped epochs, per decision, whole or in chunks
        applied = policy_update(logp_dec, w, len(trajs), score, rl, state.updater, seed=self.cfg.seed,
                                step=state.step, owner=owner, chunk=chunk)
        state.step += 1  # the step is done, applied or skipped
        self.last_trajectories = trajs
        self.last_batch = StepBatch(ids, [t.plan_text for t in trajs], rewards, weights.shaped,
                                    [t.description for t in tasks for _ in range(rl.k_samples)])

        sampled = torch.tensor([t.logprob for t in trajs], dtype=torch.float64)  # the sampler's log π_c
        row = step_metrics(weights, applied.loss, logp_d, kl, sampled, [(t.task_id, t.plan_text) for t in trajs],
                           applied.update, state.scheduler.get_last_lr()[0], started, acc.num_processes)
        return {**row, **self._flow_metrics(trajs, credit), **applied.passes,
                **{f"role/{r}/reward": v for r, v in role_rewards(trajs, self.flow.credit).items()}}

    def _flow_metrics(self, trajs: list[Trajectory], credit) -> dict[str, float]:
        """The flow's share of a step's row: final pass rate (every process's), decisions per
        trajectory, the local credit's baseline, the passes that crashed."""
        return {
            "train/final_pass": float(gather(self.acc, np.array([t.final_pass for t in trajs], np.float64)).mean()),
            "train/decisions": sum(len(t.decisions) for t in trajs) / max(1, len(trajs)),
            "train/local": credit.local_mean,
            "train/flow_errors": float(sum(t.error is not None and not t.decisions for t in trajs)),
        }

    def _encoder_memo(self) -> EncoderMemo | None:
        """A memo of the step's encoder passes (:class:`~constrained_decoding.encoder_memo.EncoderMemo`):
        the sampler reads each distinct prompt once, with gradients, and 3 back-propagates through
        those states instead of reading the prompts again. Only where 3 is one forward of the one
        policy that sampled, as it sampled: an encoder-decoder planner, no role adapters, no
        sharding, no ``flow.score_batch`` chunks, no mixed precision; None otherwise."""
        plain = (self.planner.is_encoder_decoder and self.roles is None and not self.state.sharding.sharded
                 and self.score_batch is None and getattr(self.acc, "mixed_precision", "no") == "no")
        return EncoderMemo() if plain else None

    def _roll_outs(self, tasks, sample_seed: int, memo: EncoderMemo | None = None) -> list[Trajectory]:
        """The K passes of every query, run together (:class:`~rltf.flows.engine.batching.PassBatch`,
        ``flow.backend.batch_size`` passes at a time: each backend call decodes their pending
        decisions in one batch), each sampling with its own generator seeded from
        ``(sample_seed, query, k)``: a pass samples the same decisions alone or batched, and a
        resumed run what the uninterrupted one would. The generators only draw one seed per
        decision (host side), so they live on the CPU."""
        jobs, generators = [], []
        for ti, task in enumerate(tasks):
            for k in range(self.rl.k_samples):
                g = torch.Generator(device="cpu")  # host-side seed draws, whatever the model's device
                g.manual_seed(int(np.random.default_rng([sample_seed, ti, k]).integers(2**62)))
                generators.append(g)
                jobs.append(lambda backend, task_id=task.id: roll_out(self.method, self.env, task_id, backend,
                                                                      self.flow))
        self.backend.encoder_memo = memo
        try:
            return PassBatch(self.backend, self.flow.backend.batch_size).run(jobs, generators)
        finally:
            self.backend.encoder_memo = None

    def _scorer(self, decisions):
        """``(rows, memo=None) -> log π_c`` of those decisions under the trained model now, with
        gradients (:func:`~rltf.flows.training.trajectory.decision_logprobs`; ``memo``: the encoder
        states the sampler read the prompts with, see :meth:`_encoder_memo`)."""
        def scored(rows, memo: EncoderMemo | None = None) -> torch.Tensor:
            with self.acc.autocast():
                return decision_logprobs(self.model, self.planner.tokenizer, [decisions[i] for i in rows],
                                         sharded=self.state.sharding.sharded, roles=self.roles, encoder_memo=memo,
                                         device=self.acc.device)
        return scored

    def _values(self, model, decisions) -> torch.Tensor:
        """log π_c of ``decisions`` under ``model`` without gradients, ``flow.score_batch`` per forward."""
        return decision_values(model, self.planner.tokenizer, decisions, self.score_batch,
                               sharded=self.state.sharding.sharded, roles=self.roles, device=self.acc.device)

    def _kl(self, logp: torch.Tensor, decisions, owner: torch.Tensor) -> torch.Tensor:
        """log π_c(trajectory) − log π_ref(trajectory) (``logp`` detached, on the CPU); zeros without a
        KL reference. The reference scores ``flow.score_batch`` decisions at a time too."""
        if self.state.reference is None or not decisions:
            return torch.zeros_like(logp)
        with self.state.reference() as ref_model:
            ref_dec = self._values(ref_model, decisions).float()
        return logp - trajectory_logprobs(ref_dec, owner, len(logp)).cpu()

    # ------------------------------------------------------------------------ loop, checkpoints
    @property
    def step(self) -> int:
        """Steps done (applied or skipped)."""
        return self.state.step

    @property
    def selection(self) -> Selection | None:
        """The planner :meth:`train` handed on (``rltf.select``), None before."""
        return self.state.selection

    def train(self) -> list[dict]:
        """Steps until ``rltf.steps``, logged, validated and checkpointed, then the selected planner
        (``rltf.select``; without ``validate`` or with ``rltf.eval_every=0``, the last), its role
        adapters too; the history of step rows."""
        return self.state.run(self.train_step, load_weights=self.load_weights)

    def save(self) -> None:
        self.state.save()

    def resume(self) -> bool:
        """Continue from the newest intact checkpoint of this run, if any (True when it does)."""
        return self.state.resume(load_weights=self.load_weights)

    def load_weights(self, directory) -> None:
        """The base weights, then (``flow.roles: lora``) every role adapter's."""
        self.state.load_weights(directory)
        if self.roles is not None:
            self.roles.load(directory)


def _local_mean(trajs: list[Trajectory], accelerator) -> float | None:
    """The mean local result over every process's decisions (the local credit's baseline)."""
    local = [d.local for t in trajs for d in t.decisions if d.local is not None]
    if accelerator.num_processes == 1:
        return float(np.mean(local)) if local else None
    tot = gather(accelerator, np.array([sum(local), len(local)], dtype=np.float64)).reshape(-1, 2).sum(0)
    return float(tot[0] / tot[1]) if tot[1] else None
