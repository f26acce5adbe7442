"""The two arms of ``benchmarks/gpu_fair_check.py`` (what it compares: that script's docstring).

Each arm loads the same start weights, runs ``--steps`` RL steps of ``--tasks`` x ``--k`` plans on
the same tasks, and times every step's phases with a :class:`PhaseTimer`:

* ``sampling`` — drawing the plans (RLTF: ``constrained_decoding``'s sampler; TRL GRPO: its
  ``_generate``, ``transformers.generate`` under :class:`GrammarLogitsProcessor`);
* ``reward`` — executing them in the env (RLTF: ``RLTFTrainer._execute`` and its collection; TRL:
  ``_calculate_rewards``, i.e. :class:`rltf.comparison.grpo.EnvReward`);
* ``scoring`` — teacher-forced forwards (RLTF: log π_c with gradients and the KL reference; TRL:
  every ``_get_per_token_logps_and_entropies`` call, the loss's forward and the no-grad ones);
* ``backward`` — RLTF: ``Sharding.backward``; TRL: ``accelerator.backward``;
* ``optimizer`` — gradient clipping and the optimizer step (RLTF: ``Sharding.clip_and_step``; TRL:
  ``_clip_grad_norm`` and ``optimizer.step`` between its ``on_pre_optimizer_step`` and
  ``on_optimizer_step`` callbacks);
* ``other`` — the step's rest (task draw, grammars, advantages, TRL's bookkeeping).

The hooks wrap methods of the trainer instances (and, for RLTF's sampler, the name
``rltf.rl.trainer`` calls, restored afterwards): no project code is changed. Every span is
CUDA-synchronised on a GPU at both ends; a span inside another span is counted by the outer one.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import statistics
import time
from collections.abc import Callable, Iterator

import torch

from benchmarks.gpu_check_phases import MIB, Check, Clock

PHASE_NAMES = ("sampling", "reward", "scoring", "backward", "optimizer")


def weights_hash(model: torch.nn.Module) -> str:
    """sha256 (16 hex) of a model's state dict: every tensor's name, dtype, shape and bytes, by name."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().cpu().contiguous().reshape(-1)
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


class PhaseTimer:
    """Per-step wall (CUDA-synchronised) and process CPU time of each phase of :data:`PHASE_NAMES`,
    the step's total, its plans and valid plans, and (on a GPU) its peak memory."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.steps: list[dict] = []
        self.current: dict | None = None
        self._open: tuple[str, float, float] | None = None

    def begin_step(self) -> None:
        self.clock.sync()
        self.clock._reset_peak()
        self.current = {"phases": {p: {"wall_s": 0.0, "cpu_s": 0.0, "calls": 0} for p in PHASE_NAMES},
                        "plans": 0, "valid_plans": 0}
        self._started = (time.perf_counter(), time.process_time())

    def end_step(self, **extra) -> dict:
        self.clock.sync()
        step, self.current = self.current, None
        step["wall_s"] = round(time.perf_counter() - self._started[0], 4)
        step["cpu_s"] = round(time.process_time() - self._started[1], 4)
        for p in step["phases"].values():
            p["wall_s"], p["cpu_s"] = round(p["wall_s"], 4), round(p["cpu_s"], 4)
        for key in ("wall_s", "cpu_s"):
            step["phases"]["other"] = step["phases"].get("other", {})
            step["phases"]["other"][key] = round(step[key] - sum(step["phases"][p][key] for p in PHASE_NAMES), 4)
        if self.clock.cuda:
            step["peak_gpu_mib"] = round(self.clock._peak() / MIB, 1)
        step.update(extra)
        self.steps.append(step)
        return step

    def count(self, plans: int, valid: int) -> None:
        if self.current is not None:
            self.current["plans"] += plans
            self.current["valid_plans"] += valid

    def start(self, name: str) -> bool:
        """Opens a span of ``name``; False (nothing opened) outside a step or inside another span."""
        if self.current is None or self._open is not None:
            return False
        self.clock.sync()
        self._open = (name, time.perf_counter(), time.process_time())
        return True

    def stop(self, name: str) -> None:
        if self._open is None or self._open[0] != name:
            return
        self.clock.sync()
        _, wall, cpu = self._open
        self._open = None
        if self.current is not None:
            p = self.current["phases"][name]
            p["wall_s"] += time.perf_counter() - wall
            p["cpu_s"] += time.process_time() - cpu
            p["calls"] += 1

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        opened = self.start(name)
        try:
            yield
        finally:
            if opened:
                self.stop(name)

    def wrap(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            with self.phase(name):
                return fn(*args, **kwargs)
        return timed


def summary(steps: list[dict]) -> dict:
    """Medians over the steps after the first (the warm-up: grammars, kernels, caches), the first apart."""
    rest = steps[1:] or steps
    med = lambda values: round(statistics.median(values), 4)  # noqa: E731
    out = {"n": len(steps), "median_wall_s": med([s["wall_s"] for s in rest]),
           "median_cpu_s": med([s["cpu_s"] for s in rest]),
           "phases_median": {p: {k: med([s["phases"][p][k] for s in rest]) for k in ("wall_s", "cpu_s")}
                             for p in (*PHASE_NAMES, "other")},
           "plans_per_step": med([s["plans"] for s in rest]),
           "valid_plans_per_step": med([s["valid_plans"] for s in rest]),
           "first_step_wall_s": steps[0]["wall_s"], "each": steps}
    out["plans_per_s"] = round(out["plans_per_step"] / out["median_wall_s"], 3) if out["median_wall_s"] else None
    out["valid_plans_per_s"] = (round(out["valid_plans_per_step"] / out["median_wall_s"], 3)
                                if out["median_wall_s"] else None)
    out["wall_s_per_valid_plan"] = (round(out["median_wall_s"] / out["valid_plans_per_step"], 4)
                                    if out["valid_plans_per_step"] else None)
    if steps and "peak_gpu_mib" in steps[0]:
        out["peak_gpu_mib"] = max(s["peak_gpu_mib"] for s in steps)
    return out


def release(clock: Clock) -> None:
    gc.collect()
    if clock.cuda:
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------- RLTF
def rltf_arm(check: Check, cfg, steps: int) -> dict:
    """``steps`` steps of :class:`rltf.rl.trainer.RLTFTrainer` (as ``stages.train_rltf`` builds it),
    every phase timed; the tasks each step drew."""
    from rltf.rl import trainer as rl_trainer  # per arm: an import error fails this arm only
    from rltf.rl.steps import draw_step  # as the line above
    from rltf.stages import plan_job as stages  # as the line above

    timer, out = PhaseTimer(check.clock), {}
    job = stages.start(cfg)
    with check.clock.span(out.setdefault("build", {})):
        envs = stages.build_envs(job)
        planner = stages.build_planner(job, envs)
    out["start_weights_sha256"] = weights_hash(planner.model)
    trainer = rl_trainer.RLTFTrainer(cfg, planner, envs.train, job.acc, None, None, job.sharding)
    execute, scorer, sharding = trainer._execute, trainer._scorer, trainer.state.sharding

    def timed_execute(pairs, rng):
        with timer.phase("reward"):
            collect = execute(pairs, rng)

        def timed_collect():
            with timer.phase("reward"):
                results = collect()
            timer.count(len(results), sum(bool(r.valid) for r in results))
            return results
        return timed_collect

    trainer._execute = timed_execute
    trainer._scorer = lambda prompts, plans: timer.wrap("scoring", scorer(prompts, plans))
    trainer._kl = timer.wrap("scoring", trainer._kl)
    sharding.backward = timer.wrap("backward", sharding.backward)
    sharding.clip_and_step = timer.wrap("optimizer", sharding.clip_and_step)
    samplers = {n: getattr(rl_trainer, n) for n in ("sample_plans", "sample_distinct_plans")}
    check.clock.start_phase()
    try:
        for name, fn in samplers.items():
            setattr(rl_trainer, name, timer.wrap("sampling", fn))
        for s in range(steps):
            tasks = draw_step(cfg.seed, trainer.step, trainer.train_ids, cfg.rltf.tasks_per_batch).task_ids
            timer.begin_step()
            row = trainer.train_step()
            timer.end_step(task_ids=[int(t) for t in tasks], reward_mean=round(float(row["train/reward"]), 4))
    finally:
        for name, fn in samplers.items():
            setattr(rl_trainer, name, fn)
        trainer.close()
    out["planner"] = describe(planner, job.acc.mixed_precision)
    out["steps"] = summary(timer.steps)
    del trainer, planner
    release(check.clock)
    return out


# ----------------------------------------------------------------------------------- GRPO
def grpo_arm(check: Check, cfg, step_tasks: list[list[int]]) -> dict:
    """TRL's GRPOTrainer (:func:`rltf.comparison.grpo.make_grpo_trainer`, ``grpo.sampling=constrained``)
    for ``len(step_tasks)`` steps, step ``s`` on the tasks ``step_tasks[s]`` (the dataset is those
    tasks in order, TRL's shuffling off), every phase timed."""
    from transformers import TrainerCallback  # per arm: an import error fails this arm only

    from rltf.comparison.grpo import make_grpo_trainer  # imports TRL: as the line above
    from rltf.stages import plan_job as stages  # as the line above

    timer, out = PhaseTimer(check.clock), {}
    job = stages.start(cfg)
    with check.clock.span(out.setdefault("build", {})):
        envs = stages.build_envs(job)
        planner = stages.build_planner(job, envs)
        tasks = [envs.train.get_task(i) for ids in step_tasks for i in ids]
        out["start_weights_sha256"] = weights_hash(planner.model)
        calls: list = []

        class Hooks(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                timer.begin_step()

            def on_pre_optimizer_step(self, args, state, control, **kwargs):
                timer.start("optimizer")

            def on_optimizer_step(self, args, state, control, **kwargs):
                timer.stop("optimizer")

            def on_step_end(self, args, state, control, **kwargs):
                new = reward.calls[len(calls):]
                calls.extend(new)
                timer.count(sum(len(c.valid) for c in new), sum(sum(c.valid) for c in new))
                rewards = [r for c in new for r in c.rewards]
                timer.end_step(task_ids=[t for c in new for t in c.task_ids[::cfg.rltf.k_samples]],
                               reward_mean=round(sum(rewards) / len(rewards), 4) if rewards else None)

        trainer, reward = make_grpo_trainer(cfg, planner, envs.train, tasks, job.run_dir / "grpo", cfg.grpo,
                                            callbacks=[Hooks()], bf16=check.precision == "bf16",
                                            use_cpu=check.device == "cpu", max_steps=len(step_tasks),
                                            shuffle_dataset=False)
    for name, phase in (("_generate", "sampling"), ("_calculate_rewards", "reward"),
                        ("_get_per_token_logps_and_entropies", "scoring"), ("_clip_grad_norm", "optimizer")):
        setattr(trainer, name, timer.wrap(phase, getattr(trainer, name)))
    trainer.accelerator.backward = timer.wrap("backward", trainer.accelerator.backward)
    check.clock.start_phase()
    trainer.train()
    out["planner"] = describe(planner, trainer.accelerator.mixed_precision)
    out["steps"] = summary(timer.steps)
    del trainer, planner
    release(check.clock)
    return out


def describe(planner, mixed_precision: str) -> dict:
    p = next(planner.model.parameters())
    return {"arch": planner.arch, "device": str(p.device), "dtype": str(p.dtype).removeprefix("torch."),
            "peft": planner.is_peft, "parameters_m": round(sum(x.numel() for x in planner.model.parameters()) / 1e6, 3),
            "trained_m": round(sum(x.numel() for x in planner.model.parameters() if x.requires_grad) / 1e6, 3),
            "mixed_precision": mixed_precision}
