"""RLTF: REINFORCE with a baseline on plans sampled from the constrained policy π_c.

One step, top to bottom (:meth:`RLTFTrainer.train_step`):

1. draw ``tasks_per_batch`` train tasks (the same draw on every process; each takes its shard);
2. sample ``k_samples`` plans per task from π_c — the constrained, renormalised distribution;
3. execute them in the environment (cached): reward R in [0, 1] per plan;
4. log π_c(plan) recomputed teacher-forced WITH gradients under the same grammar masks and
   temperature the sampler used (and log π_ref(plan) for a KL penalty);
5. loss weights (:meth:`RLTFTrainer.loss_weights`): advantage A = R − b with the configured
   baseline (the paper's moving average by default) over the rewards of ALL processes, plus
   optional regularisers folded in as score-function terms — an entropy bonus −c_H·log π_c(plan)
   and a KL penalty −c_KL·(log π_c(plan) − log π_ref(plan)) to the policy RLTF started from —
   optionally scaled to unit std over all processes; loss = −mean(weight · log π_c(plan));
6. backward, average gradients over processes, clip, step (:class:`rltf.run.distributed.Sharding`:
   replicated parameters are averaged explicitly; FSDP reduce-scatters them itself).

Everything random in a step is a pure function of ``(seed, step, process)`` — the task draw, the
env's sample subset and the decoder's generator, which lives on the model's device — so a run
resumed from a checkpoint continues exactly as the uninterrupted run would have.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from constrained_decoding.decode import sample_plans
from constrained_decoding.logprobs import plan_logprobs
from rltf.rl.baselines import Baseline, normalize
from rltf.run.checkpoint import ENGINE_DIR, MODEL_DIR, STATE_FILE, latest_intact_checkpoint, save_checkpoint
from rltf.config.loading import RunConfig, check_resume_config, config_to_yaml
from rltf.run.distributed import Sharding, advance_schedule
from rltf.rl.optim import make_optimizer
from rltf.planners.planner import Planner
from rltf.rl.kl_reference import ReferencePolicy


@dataclass
class StepBatch:
    """What one process sampled and learned from in the last step (for inspection and tests)."""

    task_ids: list[int]
    plans: list[str]
    rewards: np.ndarray
    advantages: np.ndarray  # after the baseline and the regularisers: the loss weights
    signatures: list  # OpenAGI: each task's (inputs, target); None for envs without them
    prompts: list[str]


class NonFiniteLossError(FloatingPointError):
    """A training step's loss or gradient norm is NaN or infinite (``on_nonfinite: stop``)."""


class RLTFTrainer:
    """The RLTF loop on any env with the trainer's interface (OpenAGI's, the travel sandbox's):
    ``env.tasks()``, ``env.get_task(id)`` (tasks with ``id`` and ``description``),
    ``env.grammar(tokenizer, task)``, ``env.reward_plans(pairs, rng=...)`` (results with
    ``reward``, ``valid``, ``plan_text``, ``sample_errors``) and ``env.cache_stats()``."""

    def __init__(self, cfg: RunConfig, planner: Planner, env, accelerator,
                 tracker=None, evaluate: Callable[[Planner], dict[str, float]] | None = None,
                 sharding: Sharding | None = None):
        self.cfg, self.rl = cfg, cfg.rltf
        self.planner, self.env, self.acc = planner, env, accelerator
        self.sharding = sharding or Sharding("replicated", accelerator)
        if self.sharding.sharded and self.rl.kl_coef > 0 and not planner.is_peft:
            raise ValueError(f"rltf.kl_coef={self.rl.kl_coef} with a sharded full-model planner: the reference "
                             "policy would be a second sharded copy; use LoRA (its reference is the adapter-"
                             "disabled model) or rltf.kl_coef=0")
        self.tracker, self.evaluate = tracker, evaluate
        self.model = planner.model
        optimizer, scheduler = make_optimizer(self.model, self.rl.lr, self.rl.steps, self.rl.warmup_steps,
                                              self.rl.lr_schedule)
        self.optimizer, self.scheduler = self.sharding.prepare(self.model, optimizer, scheduler,
                                                               self.rl.max_grad_norm)
        self.baseline = Baseline(self.rl.baseline, self.rl.baseline_decay)
        self.reference = ReferencePolicy(planner) if self.rl.kl_coef > 0 else None
        self.train_ids = [t.id for t in env.tasks()]
        self.step = 0
        self.history: list[dict] = []
        self.last_batch: StepBatch | None = None

    # ------------------------------------------------------------------------------ one step
    def train_step(self) -> dict[str, float]:
        rl, env, acc = self.rl, self.env, self.acc
        t0 = time.perf_counter()
        rng = np.random.default_rng([self.cfg.seed, self.step])
        samples_rng = np.random.default_rng([self.cfg.seed, self.step, acc.process_index, 1])  # env sample subsets
        # the decoder makes its generator on the model's device from this seed (a CPU generator
        # cannot draw for CUDA tensors)
        sample_seed = int(rng.integers(2**62)) + acc.process_index

        # 1. tasks: one global draw, sharded across processes
        replace = rl.tasks_per_batch > len(self.train_ids)
        drawn = rng.choice(self.train_ids, size=rl.tasks_per_batch, replace=replace).tolist()
        tasks = [env.get_task(i) for i in drawn[acc.process_index :: acc.num_processes]]
        prompts = [t.description for t in tasks]  # the decoder formats them (format_prompt)
        sigs = [(t.inputs, t.target) if hasattr(t, "inputs") else None for t in tasks]
        grammars = [env.grammar(self.planner.tokenizer, t) for t in tasks]  # the env's valid plans

        # 2. K plans per task sampled from the constrained policy
        self.model.eval()  # no dropout: sampling and scoring evaluate the same function
        with self.sharding.gathered(self.model):
            decoded = sample_plans(self.model, self.planner.tokenizer, prompts, grammars, rl.k_samples,
                                   rl.temperature, seed=sample_seed)
        flat = [(t, p, s, d) for t, p, s, ds in zip(tasks, prompts, sigs, decoded) for d in ds]
        flat_grammars = [d.grammar for *_, d in flat]

        # 3. rewards from executing the plans (the parsed plans: checked once, formatted once)
        results = env.reward_plans([(t, d.plan) for t, _, _, d in flat], rng=samples_rng)
        rewards = np.array([r.reward if math.isfinite(r.reward) else 0.0 for r in results])
        expert_error_rate = self._check_experts(results)

        # 4. log π_c(plan), teacher-forced with gradients, under the sampler's masks and temperature
        #    (the decoded rows themselves: nothing is rebuilt from the plans)
        with acc.autocast():
            logp = plan_logprobs(self.model, self.planner.tokenizer, [p for _, p, _, _ in flat], flat_grammars,
                               [d for *_, d in flat], rl.temperature, through_forward=self.sharding.sharded)
        logp_d = logp.detach().float().cpu()
        kl = torch.zeros_like(logp_d)
        if self.reference is not None:
            with self.reference() as ref_model, torch.no_grad():
                ref_lp = plan_logprobs(ref_model, self.planner.tokenizer, [p for _, p, _, _ in flat], flat_grammars,
                                     [d for *_, d in flat], rl.temperature,
                                     through_forward=self.sharding.sharded).float().cpu()
            kl = logp_d - ref_lp

        # 5. loss weights: advantage against the baseline and regularisers, over every process's batch
        ids = np.array([t.id for t, *_ in flat])
        shaped, adv_all, base_all, all_rewards = self.loss_weights(rewards, ids, logp_d.numpy(), kl.numpy())
        shaped = torch.as_tensor(shaped, dtype=torch.float32)
        loss = -(shaped.to(logp.device) * logp).mean()

        # 6. update (a non-finite loss or gradient norm stops the run with the step named, or skips the step)
        grad_norm, skipped = self.update(loss)
        self.step += 1
        texts = [r.plan_text for r in results]  # (the env formatted each valid plan once)
        self.last_batch = StepBatch([t.id for t, *_ in flat], texts, rewards,
                                    shaped.numpy(), [s for _, _, s, _ in flat], [p for _, p, _, _ in flat])

        stats = env.cache_stats()
        sampled_lp = torch.tensor([d.logprob for *_, d in flat])
        return {
            "train/reward": float(all_rewards.mean()),
            "train/baseline": float(base_all.mean()),
            "train/advantage": float(np.abs(adv_all).mean()),
            "train/loss": float(loss.detach()),
            "train/entropy": float(-logp_d.mean()),  # sequence-level estimate E[-log π_c]
            "train/kl": float(kl.mean()),
            "train/valid": float(np.mean([r.valid for r in results])),
            "train/expert_error_rate": expert_error_rate,
            "train/distinct_plans": len({(t.id, text) for (t, *_), text in zip(flat, texts)}) / len(flat),
            "train/logprob_mismatch": float((sampled_lp - logp_d).abs().max()),
            "train/grad_norm": grad_norm,
            "train/skipped": float(skipped),
            "train/lr": self.scheduler.get_last_lr()[0],
            "train/cache_hit_rate": stats.hit_rate if stats else 0.0,
            "train/plans_per_s": len(flat) * acc.num_processes / (time.perf_counter() - t0),
        }

    def update(self, loss: torch.Tensor) -> tuple[float, bool]:
        """Backward, average gradients over processes, clip, step; ``(grad_norm, skipped)``. A
        non-finite loss or gradient norm stops the run with the step named, or skips the step
        (decided on every process's loss: the processes must agree on whether to run the backward)."""
        worst = float(loss.detach()) if self.acc.num_processes == 1 else float(
            self._gather(np.array([float(loss.detach())])).sum())
        skipped = self._nonfinite("loss", worst)
        grad_norm = float("nan")
        if skipped:
            advance_schedule(self.scheduler)  # the schedule stays aligned with the step count
        else:
            self.sharding.backward(loss)
            grad_norm = self.sharding.clip_and_step(self.model, self.optimizer, self.scheduler, self.rl.max_grad_norm)
            skipped = self._nonfinite("gradient norm", float(grad_norm))  # (the step was not applied)
        return grad_norm, skipped

    def _nonfinite(self, what: str, value: float) -> bool:
        """True when ``value`` is NaN/inf and ``on_nonfinite: skip`` (the step is skipped, warned);
        raises :class:`NonFiniteLossError` naming the step under ``stop``."""
        if math.isfinite(value):
            return False
        message = (f"non-finite {what} at RLTF step {self.step + 1} ({value}): the policy diverged; lower "
                   f"rltf.lr (now {self.rl.lr:g}) or set rltf.on_nonfinite=skip to skip such steps")
        if self.rl.on_nonfinite == "stop":
            raise NonFiniteLossError(message)
        warnings.warn(message.replace("the policy diverged", "step skipped"), RuntimeWarning, stacklevel=3)
        return True

    def _check_experts(self, results) -> float:
        """The fraction of executed samples (of valid plans) that an expert failed on; a loud
        warning for each tool that failed on every call of this step (a broken expert or cache would
        otherwise only show as lower rewards)."""
        executed = failed = 0
        failing: dict[str, int] = {}  # tool -> samples it failed on
        worked: set[str] = set()  # tools of plans with at least one successful sample
        for r in results:
            if not r.valid:
                continue
            executed += len(r.sample_errors)
            errs = [e for e in r.sample_errors if e is not None]
            failed += len(errs)
            for e in errs:
                tool = e.split(" raised ", 1)[0]
                failing[tool] = failing.get(tool, 0) + 1
            if len(errs) < len(r.sample_errors):
                worked.update(t.strip("() ") for t in r.plan_text.replace(")", ",").split(","))
        for tool, n in failing.items():
            if tool not in worked:
                example = next(e for r in results if r.valid for e in r.sample_errors if e and e.startswith(tool))
                warnings.warn(f"step {self.step + 1}: expert {tool!r} failed on every call ({n} samples): "
                              f"{example[:300]}", RuntimeWarning, stacklevel=2)
        return failed / executed if executed else 0.0

    def loss_weights(self, rewards: np.ndarray, task_ids: np.ndarray, logp: np.ndarray,
                     kl: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """This process's REINFORCE weights, shaped = A − c_H·log π_c − c_KL·KL, normalised by their
        std over ALL processes when ``normalize_rewards``; plus every process's advantages,
        baselines and rewards. The baseline and the std see the whole global batch, so the weights
        are the same however the batch is sharded (shards are equal: tasks_per_batch % processes == 0).
        Returns ``(shaped, advantages_all, baselines_all, rewards_all)``; updates the baseline."""
        rl = self.rl
        all_rewards = self._gather(np.asarray(rewards, dtype=np.float64))
        all_ids = self._gather(np.asarray(task_ids, dtype=np.float64)).astype(int)
        adv_all, base_all = self.baseline.advantages(all_rewards, all_ids)
        lo = self.acc.process_index * len(rewards)
        adv = adv_all[lo : lo + len(rewards)]
        shaped = adv - rl.entropy_coef * np.asarray(logp, np.float64) - rl.kl_coef * np.asarray(kl, np.float64)
        if rl.normalize_rewards:
            shaped = normalize(shaped, float(self._gather(shaped).std()))
        return shaped, adv_all, base_all, all_rewards

    def _gather(self, x: np.ndarray) -> np.ndarray:
        if self.acc.num_processes == 1:
            return x
        t = torch.as_tensor(x, dtype=torch.float64, device=self.acc.device)
        return self.acc.gather(t).cpu().numpy()

    # ------------------------------------------------------------------------------- the loop
    def train(self) -> list[dict]:
        rl, acc = self.rl, self.acc
        if rl.tasks_per_batch % acc.num_processes:
            raise ValueError(f"rltf.tasks_per_batch={rl.tasks_per_batch} must be divisible by the "
                             f"{acc.num_processes} processes")
        bar = tqdm(total=rl.steps, initial=self.step, desc="rltf",
                   disable=not (self.cfg.logging.progress_bar and acc.is_main_process))
        while self.step < rl.steps:
            row = {"step": self.step + 1, **self.train_step()}
            if self.evaluate is not None and rl.eval_every and self.step % rl.eval_every == 0:
                row.update(self.evaluate(self.planner))
            self.history.append(row)
            if self.tracker is not None and (self.step % self.cfg.logging.log_every == 0 or "eval" in str(row)):
                self.tracker.log({k: v for k, v in row.items() if k != "step"}, self.step)
            bar.update(1)
            bar.set_postfix(reward=f"{row['train/reward']:.3f}", base=f"{row['train/baseline']:.3f}")
            if rl.checkpoint_every and self.step % rl.checkpoint_every == 0 or self.step == rl.steps:
                self.save()
        bar.close()
        return self.history

    # ---------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """Everything but the model (collective under FSDP: call on every process)."""
        return {"optimizer": self.sharding.optimizer_state_dict(self.model, self.optimizer),
                "scheduler": self.scheduler.state_dict(), "baseline": self.baseline.state_dict(),
                "history": self.history, "sharding": self.sharding.kind, "config": config_to_yaml(self.cfg)}

    def save(self) -> None:
        weights = self.sharding.full_state_dict(self.model)  # gathered by every process when sharded
        state = self.state_dict()
        engine = self.sharding.save_engine(self.cfg.run_dir / "rltf" / f".engine-{self.step}")  # DeepSpeed
        self.acc.wait_for_everyone()
        if self.acc.is_main_process:
            save_checkpoint(self.cfg.run_dir / "rltf", self.step, self.planner, state, model_state=weights,
                            extra_dirs={ENGINE_DIR: engine} if engine else None, keep=self.rl.save_total_limit)
        self.acc.wait_for_everyone()

    def load_weights(self, directory) -> None:
        """The planner's weights from a checkpoint's model directory (every process, sharded or not)."""
        reloaded = Planner.from_pretrained(directory)
        self.sharding.load_full_state_dict(self.model, reloaded.model.state_dict())

    def resume(self) -> bool:
        """Load the newest intact checkpoint of this run, if any (a damaged newer one is skipped with a
        warning naming it); True when training resumes from it."""
        found = latest_intact_checkpoint(self.cfg.run_dir / "rltf")  # damaged ones skipped, with a warning
        if found is None:
            return False
        ckpt, state = found
        if "config" in state:  # (checkpoints written before configs were stored have none)
            check_resume_config(state["config"], self.cfg, f"{ckpt / STATE_FILE}")
        saved = state.get("sharding", "replicated")
        if saved != self.sharding.kind:
            raise ValueError(f"{ckpt} was written by a {saved} run; this run is {self.sharding.kind}: its optimizer "
                             f"state cannot be resumed here (start a new run from {ckpt / MODEL_DIR} instead)")
        self.load_weights(ckpt / MODEL_DIR)
        self.sharding.load_optimizer_state_dict(self.model, self.optimizer, state["optimizer"])
        self.sharding.load_engine(ckpt / ENGINE_DIR)
        self.scheduler.load_state_dict(state["scheduler"])
        self.baseline.load_state_dict(state["baseline"])
        self.history = state["history"]
        self.step = state["step"]
        return True
