"""RLTF: REINFORCE with a baseline on plans sampled from the constrained policy π_c (optionally
several clipped-ratio updates per batch, or another objective entry: ``rltf.objective``).

One step, top to bottom (:meth:`RLTFTrainer.train_step`):

1. draw ``tasks_per_batch`` train tasks (each process its share, from its own fixed part of the
   tasks: :func:`rltf.rl.steps.draw_step`);
2. sample ``k_samples`` plans per task from π_c — the constrained, renormalised distribution (when
   the objective draws distinct plans, :func:`rltf.algorithms.choice.draws_distinct_plans`: the
   ``unordered_set`` objective, which ``rltf.baseline: unordered_set`` picks, ``k_samples``
   *distinct* plans drawn without replacement by stochastic beam search, all of a task's valid plans
   when it has fewer);
3. execute them in the environment (cached): reward R in [0, 1] per plan (and the env's report of
   the experts that failed: ``env.expert_failures``); with several processes an env that can
   (OpenAGI's) shares the execution by sample (:func:`rltf.rl.steps.execute`); with
   ``rltf.reward_workers`` the plans are handed to worker processes
   (:mod:`rltf.rl.reward_workers`: the same rewards) and executed while 4 runs, which does not
   need them; the rewards are collected before 5;
4. log π_c(plan) recomputed teacher-forced WITH gradients under the same grammar masks and
   temperature the sampler used (and log π_ref(plan) for a KL penalty); an encoder-decoder planner
   reads each prompt through its encoder once per step, sampling and scoring sharing the pass
   (:meth:`RLTFTrainer._encoder_memo`; the same numbers);
5. loss weights (:func:`rltf.rl.steps.loss_weights`): advantage A = R − b with the configured
   baseline (the paper's moving average by default) over the rewards of ALL processes, plus
   optional regularisers folded in as score-function terms — an entropy bonus −c_H·log π_c(plan)
   and a KL penalty −c_KL·(log π_c(plan) − log π_ref(plan)) to the policy RLTF started from —
   optionally scaled to unit std over all processes (distinct plans: the unordered-set
   estimator's weights);
6. the update (:func:`rltf.rl.update.policy_update`, the one update rule of both trainers, a plan
   being one decision per sample): the objective entry (``rltf.objective``,
   :mod:`rltf.algorithms.objectives`) gives each minibatch's loss; backward, average gradients over
   processes, clip, step (through :class:`rltf.run.distributed.Sharding`: replicated parameters are
   averaged explicitly; FSDP reduce-scatters them itself). With ``rltf.objective: auto`` (the
   default):

   * ``rltf.update_epochs = minibatches = 1``: REINFORCE, one step on
     loss = −mean(weight · log π_c(plan));
   * otherwise ``update_epochs`` passes over the batch, each cut into ``minibatches``
     (:func:`rltf.rl.update.minibatches`), one step per minibatch on the clipped surrogate
     loss = −mean(min(r·A, clip(r, 1 − ε, 1 + ε)·A)), r = π_c(plan) / π_c,old(plan)
     (:func:`rltf.algorithms.objectives.clipped_surrogate`): log π_c re-scored teacher-forced as in 4,
     log π_c,old the values of 4 (the same scorer, before any update; the first minibatch reuses
     them, so its r is exactly 1 and its step is REINFORCE's). The loss weights, KL and entropy
     terms stay those of the sampling policy. With one pass and one minibatch r ≡ 1 and the
     surrogate's gradient is REINFORCE's: the first case is that one, computed directly.

Everything random in a step is a pure function of ``(seed, step, process)`` — the task draw, the
env's sample subset and the decoder's generator, which lives on the model's device — so a run
resumed from a checkpoint continues exactly as the uninterrupted run would have. The optimizer,
baseline, KL reference, step count, loop and checkpoints are the trainer's
:class:`rltf.rl.training_state.TrainingState` (held, not inherited: ``self.state``, which runs
:meth:`RLTFTrainer.train_step` in its loop); the trainer meets the
:class:`rltf.rl.training_state.Trainer` protocol the train stage runs.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import torch

from constrained_decoding.decode import sample_plans
from constrained_decoding.encoder_memo import EncoderMemo
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.without_replacement import sample_distinct_plans
from rltf.algorithms.choice import draws_distinct_plans
from rltf.rl.reward_workers import RewardWorkers, resolve_workers
from rltf.rl.steps import StepBatch, draw_step, execute, loss_weights, step_metrics
from rltf.rl.training_state import Selection, TrainingState
from rltf.rl.update import policy_update


class RLTFTrainer:
    """The RLTF loop on any env of :class:`envs.protocol.RLTFEnv` (OpenAGI's, the travel sandbox's):
    its tasks, the grammar of a task's plans, the rewards of plans and what failed while scoring them."""

    def __init__(self, cfg, planner, env, accelerator, tracker=None, validate=None, sharding=None):
        self.cfg, self.rl = cfg, cfg.rltf
        self.planner, self.model, self.env, self.acc = planner, planner.model, env, accelerator
        self.state = TrainingState(cfg, planner, accelerator, sharding, tracker, validate)
        self.train_ids = [t.id for t in env.tasks()]
        self.last_batch: StepBatch | None = None  # what the last step sampled and learned from
        # the pool executing the plans while step 4 runs (rltf.reward_workers; 0: in this process)
        self.reward_workers = resolve_workers(self.rl.reward_workers, env, accelerator.num_processes)
        self._pool: RewardWorkers | None = None  # forked at the first step that executes plans

    # ------------------------------------------------------------------------------ one step
    def train_step(self) -> dict[str, float]:
        rl, env, acc, state = self.rl, self.env, self.acc, self.state
        tokenizer, sharding = self.planner.tokenizer, state.sharding
        started = time.perf_counter()

        # 1. tasks: this process's share of the global draw, from the tasks it owns
        draw = draw_step(self.cfg.seed, state.step, self.train_ids, rl.tasks_per_batch, acc.process_index,
                         acc.num_processes)
        tasks = [env.get_task(i) for i in draw.task_ids]
        prompts = [t.description for t in tasks]  # the decoder formats them (format_prompt)
        grammars = [env.grammar(tokenizer, t) for t in tasks]  # the env's valid plans

        # 2. K plans per task sampled from the constrained policy (distinct ones, without replacement,
        #    for an objective that weights a set: then complete = the set holds all of the task's plans)
        self.model.eval()  # no dropout: sampling and scoring evaluate the same function
        memo = self._encoder_memo()  # (encoder-decoder) each prompt's encoder pass, shared by 2 and 4
        complete = None
        with sharding.gathered(self.model):
            if draws_distinct_plans(rl):
                sets = sample_distinct_plans(self.model, tokenizer, prompts, grammars, rl.k_samples, rl.temperature,
                                             seed=draw.sample_seed, encoder_memo=memo)
                decoded = [s.plans for s in sets]
                complete = np.array([s.complete for s in sets for _ in s.plans])
            else:
                decoded = sample_plans(self.model, tokenizer, prompts, grammars, rl.k_samples, rl.temperature,
                                       seed=draw.sample_seed, encoder_memo=memo)
        plan_tasks = [t for t, ds in zip(tasks, decoded) for _ in ds]  # one entry per sampled plan
        plan_prompts = [t.description for t in plan_tasks]
        plans = [d for ds in decoded for d in ds]

        # 3. rewards from executing the plans (the parsed plans: checked once, formatted once): done
        #    here, or handed to the reward workers and collected after 4
        collect = self._execute([(t, d.plan) for t, d in zip(plan_tasks, plans)], draw.env_rng)

        # 4. log π_c(plan), teacher-forced with gradients, under the sampler's masks and temperature
        #    (the decoded rows themselves: nothing is rebuilt from the plans); detached: log π_c,old
        score = self._scorer(plan_prompts, plans)
        logp = score(range(len(plans)), memo)  # (later re-scoring, after an update, reads the prompts again)
        logp_d = logp.detach().float().cpu()
        kl = self._kl(logp_d, plan_prompts, plans)
        results = collect()
        rewards = np.array([r.reward if math.isfinite(r.reward) else 0.0 for r in results])
        env_row = self._env_metrics(results)  # (warns of the experts that failed)

        # 5. loss weights: advantage against the baseline and regularisers, over every process's batch
        ids = [t.id for t in plan_tasks]
        weights = loss_weights(rewards, np.array(ids), logp_d.numpy(), kl.numpy(), state.baseline, rl, acc, complete)
        shaped = torch.as_tensor(weights.shaped, dtype=torch.float32)

        # 6. update: the objective entry over the batch's passes (a non-finite loss or gradient norm
        #    stops the run with the step named, or skips the update)
        applied = policy_update(logp, shaped, len(plans), score, rl, state.updater, seed=self.cfg.seed, step=state.step)
        state.step += 1  # the step is done, applied or skipped
        texts = [r.plan_text for r in results]  # (the env formatted each valid plan once)
        self.last_batch = StepBatch(ids, texts, rewards, shaped.numpy(), plan_prompts)

        row = step_metrics(weights, applied.loss, logp_d, kl, torch.tensor([d.logprob for d in plans]),
                           list(zip(ids, texts)), applied.update, state.scheduler.get_last_lr()[0], started,
                           acc.num_processes)
        return {**row, **env_row, **applied.passes}

    def _execute(self, pairs: list, rng: np.random.Generator):
        """The results of this process's (task, plan) pairs, returned by the function this returns:
        executed now (:func:`rltf.rl.steps.execute`), or sent to the reward workers, that function
        then waiting for them."""
        if not self.reward_workers:
            results = execute(self.env, pairs, rng, self.acc)
            return lambda: results
        if self._pool is None or not self._pool.alive:
            self._pool = RewardWorkers(self.env, self.reward_workers, self.rl.reward_worker_timeout_s)
        return self._pool.submit(pairs, rng, self.state.step + 1)

    def close(self) -> None:
        """Stop the reward workers, if any (:meth:`train` does at its end; a later step starts new ones)."""
        if self._pool is not None:
            self._pool.close()

    def _env_metrics(self, results: list) -> dict[str, float]:
        """The env's share of a step's row: valid plans, the experts that failed (each failure warned:
        a broken expert or cache would otherwise only show as lower rewards), the cache's hit rate."""
        expert_error_rate, failures = self.env.expert_failures(results)
        for text in failures:
            warnings.warn(f"step {self.state.step + 1}: {text}", RuntimeWarning, stacklevel=3)
        stats = self._pool.cache_stats() if self.reward_workers and self._pool is not None else self.env.cache_stats()
        return {"train/valid": float(np.mean([r.valid for r in results])), "train/expert_error_rate": expert_error_rate,
                "train/cache_hit_rate": stats.hit_rate if stats else 0.0}

    def _scorer(self, prompts: list[str], plans: list):
        """``(rows, memo=None) -> log π_c`` of those plans under the model now, teacher-forced with
        gradients under the sampler's grammar masks and temperature (the decoded rows themselves)."""
        grammars = [d.grammar for d in plans]

        def scored(rows, memo: EncoderMemo | None = None) -> torch.Tensor:
            with self.acc.autocast():
                return plan_logprobs(self.model, self.planner.tokenizer, [prompts[i] for i in rows],
                                     [grammars[i] for i in rows], [plans[i] for i in rows], self.rl.temperature,
                                     through_forward=self.state.sharding.sharded, encoder_memo=memo)
        return scored

    def _kl(self, logp: torch.Tensor, prompts: list[str], plans: list) -> torch.Tensor:
        """log π_c(plan) − log π_ref(plan) per plan (``logp`` detached, on the CPU); zeros without a
        KL reference."""
        if self.state.reference is None:
            return torch.zeros_like(logp)
        with self.state.reference() as ref_model, torch.no_grad():
            ref_lp = plan_logprobs(ref_model, self.planner.tokenizer, prompts, [d.grammar for d in plans], plans,
                                   self.rl.temperature, through_forward=self.state.sharding.sharded).float().cpu()
        return logp - ref_lp

    def _encoder_memo(self) -> EncoderMemo | None:
        """A memo of the step's encoder passes (:class:`~constrained_decoding.encoder_memo.EncoderMemo`):
        sampling reads each task's prompt once, with gradients, and 4 back-propagates through those
        states instead of reading the prompts again (the same numbers). Only where 4 is one plain
        forward of the model that sampled: an encoder-decoder planner, no sharding, no mixed
        precision; None otherwise."""
        plain = (self.planner.is_encoder_decoder and not self.state.sharding.sharded
                 and getattr(self.acc, "mixed_precision", "no") == "no")
        return EncoderMemo() if plain else None

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
        (``rltf.select``; without ``validate`` or with ``rltf.eval_every=0``, the last); the
        history of step rows."""
        try:
            return self.state.run(self.train_step)
        finally:
            self.close()  # the reward workers, also when a step raised

    def save(self) -> None:
        self.state.save()

    def resume(self) -> bool:
        """Continue from the newest intact checkpoint of this run, if any (True when it does)."""
        return self.state.resume()
