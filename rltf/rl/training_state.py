"""What an RLTF run carries from step to step, and the loop around the steps.

Both trainers (:class:`rltf.rl.trainer.RLTFTrainer`, :class:`rltf.flows.training.trainer.FlowRLTFTrainer`)
hold a :class:`TrainingState`: the policy's optimizer and learning-rate schedule (prepared for the
launch's :class:`~rltf.run.distributed.Sharding`), the advantage baseline, the KL reference policy,
the step count and the history of step rows. It runs a trainer's step until ``rltf.steps`` (with
the periodic evaluation, logging and checkpoints) and saves and resumes all of it, so a resumed run
continues exactly as the uninterrupted run would have.

Selection (``rltf.select``): the periodic validation score (``validate`` every ``rltf.eval_every``
steps, and once at step 0, before the first step: the planner RLTF starts from) decides which
planner the run hands on. Whenever validation runs, whatever ``rltf.select`` says, the step with
the best score (ties: the better :data:`VALIDATION_TIEBREAK` where the rows hold one, the flows'
mean reward; then the earliest) is checkpointed when it is reached (``checkpoint-0`` for the
starting planner), rotation never deletes that checkpoint and a resumed run keeps it, so a run
resumed with another ``rltf.select`` still has the true best on disk. Under ``best_validation``,
after the last step its weights are loaded back into the planner (:attr:`TrainingState.selection`
says which step). Under ``last``, or without a validation score, the planner is the last step's.
The step-0 score is kept apart from the history of step rows
(:attr:`TrainingState.initial_validation`; :meth:`TrainingState.validation_rows` has the whole curve).

:class:`Trainer` is the protocol both trainers meet and the train stage runs
(:func:`rltf.stages.plan_job.run_trainer`): the state, ``train_step()`` (each trainer's algorithm),
``train()``, ``save()``, ``resume()`` and the planner it handed on (:attr:`Trainer.selection`); each
trainer holds its own :class:`TrainingState` (no base class between them).
The optimizer step itself reads only its :class:`~rltf.rl.update.Updater` (:attr:`TrainingState.updater`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rltf.algorithms.baselines import Baseline
from rltf.config.loading import RunConfig, check_resume_config, config_to_yaml
from rltf.planners.planner import Planner
from rltf.rl.kl_reference import ReferencePolicy
from rltf.rl.optim import make_optimizer
from rltf.rl.score_keys import VALIDATION_PREFIX, VALIDATION_SCORE, VALIDATION_TIEBREAK  # re-exported
from rltf.rl.update import Updater
from rltf.run.checkpoint import (
    ENGINE_DIR,
    MODEL_DIR,
    STATE_FILE,
    latest_intact_checkpoint,
    save_checkpoint,
)
from rltf.run.distributed import Sharding
from rltf.run.tracking import progress_bar


@dataclass(frozen=True)
class Selection:
    """Which planner an RLTF run handed on (``rltf.select``) and why."""

    select: str  # rltf.select: last | best_validation
    step: int  # the step whose weights the planner holds (0: the starting planner)
    score: float | None  # its validation score (None: not validated)
    note: str = ""  # why best_validation fell back to the last planner

    @property
    def label(self) -> str:
        """The rltf row's name in a results table: ``rltf (best validation, step 150)``; ``rltf``
        for the last planner."""
        return f"rltf (best validation, step {self.step})" if self.select == "best_validation" and not self.note \
            else "rltf"

    def as_dict(self) -> dict:
        return {"select": self.select, "step": self.step, "validation_score": self.score, "note": self.note}


class TrainingState:
    """The optimisation state of one RLTF run of ``planner`` (``cfg.rltf``), its loop and checkpoints
    (under ``<run_dir>/rltf/``). ``validate(planner)`` adds its scores to the row every
    ``rltf.eval_every`` steps; ``tracker`` logs rows every ``logging.log_every`` steps."""

    def __init__(self, cfg: RunConfig, planner: Planner, accelerator, sharding: Sharding | None = None,
                 tracker=None, validate: Callable[[Planner], dict[str, float]] | None = None):
        self.cfg, self.rl = cfg, cfg.rltf
        self.planner, self.model, self.acc = planner, planner.model, accelerator
        self.sharding = sharding or Sharding("replicated", accelerator)
        if self.sharding.sharded and self.rl.kl_coef > 0 and not planner.is_peft:
            raise ValueError(f"rltf.kl_coef={self.rl.kl_coef} with a sharded full-model planner: the reference "
                             "policy would be a second sharded copy; use LoRA (its reference is the adapter-"
                             "disabled model) or rltf.kl_coef=0")
        self.tracker, self.validate = tracker, validate
        # the schedule counts optimizer steps: update_epochs * minibatches of them per RLTF step
        per_step = self.rl.update_epochs * self.rl.minibatches
        optimizer, scheduler = make_optimizer(self.model, self.rl.lr, self.rl.steps * per_step,
                                              self.rl.warmup_steps * per_step, self.rl.lr_schedule)
        self.optimizer, self.scheduler = self.sharding.prepare(self.model, optimizer, scheduler,
                                                               self.rl.max_grad_norm)
        self.baseline = Baseline(self.rl.baseline, self.rl.baseline_decay)
        self.reference = ReferencePolicy(planner) if self.rl.kl_coef > 0 else None
        self.step = 0  # steps done (applied or skipped)
        self.history: list[dict] = []
        self.initial_validation: dict | None = None  # validate() of the starting planner, before step 1
        self.best: dict | None = None  # {"step", "score"} of the best validation so far (any rltf.select)
        self.selection: Selection | None = None  # set by run(): the planner it handed on

    @property
    def updater(self) -> Updater:
        """What an optimizer step of this run touches (model, optimizer, schedule, sharding, clipping)."""
        return Updater(self.model, self.optimizer, self.scheduler, self.sharding, self.acc, self.rl.max_grad_norm,
                       self.rl.on_nonfinite, self.rl.lr)

    # ------------------------------------------------------------------------------- the loop
    def run(self, train_step: Callable[[], dict[str, float]],
            load_weights: Callable[[Path], None] | None = None) -> list[dict]:
        """``train_step()`` (which advances :attr:`step`) until ``rltf.steps``, then the selected
        planner's weights (``rltf.select``) loaded by ``load_weights(model_dir)`` (default
        :meth:`load_weights`) when it is not the last; returns the history."""
        rl, acc = self.rl, self.acc
        if rl.tasks_per_batch % acc.num_processes:
            raise ValueError(f"rltf.tasks_per_batch={rl.tasks_per_batch} must be divisible by the "
                             f"{acc.num_processes} processes")
        per_process = rl.tasks_per_batch * rl.k_samples // acc.num_processes
        if rl.minibatches > per_process:
            raise ValueError(f"rltf.minibatches={rl.minibatches}: expected at most {per_process}, the samples each "
                             f"process holds per step (tasks_per_batch * k_samples / {acc.num_processes} processes)")
        validates = self.validate is not None and rl.eval_every > 0
        if validates and self.step == 0 and self.initial_validation is None:
            self.initial_validation = dict(self.validate(self.planner))  # the planner RLTF starts from
            if self.tracker is not None:
                self.tracker.log(self.initial_validation, 0)
            if self._new_best(self.initial_validation):
                self.save()
        bar = progress_bar(total=rl.steps, initial=self.step, desc="rltf", enabled=self.cfg.logging.progress_bar,
                           main=acc.is_main_process)
        while self.step < rl.steps:
            row = {"step": self.step + 1, **train_step()}
            if validates and self.step % rl.eval_every == 0:
                row.update(self.validate(self.planner))
            self.history.append(row)
            if self.tracker is not None and (self.step % self.cfg.logging.log_every == 0 or "eval" in str(row)):
                self.tracker.log({k: v for k, v in row.items() if k != "step"}, self.step)
            bar.update(1)
            bar.set_postfix(reward=f"{row['train/reward']:.3f}", base=f"{row['train/baseline']:.3f}")
            new_best = self._new_best(row)
            if rl.checkpoint_every and self.step % rl.checkpoint_every == 0 or self.step == rl.steps or new_best:
                self.save()
        bar.close()
        self.selection = self._select(validates, load_weights or self.load_weights)
        return self.history

    def validation_rows(self) -> list[dict]:
        """``{"step", VALIDATION_SCORE, ...}`` of every periodic validation so far, from step 0 (the
        starting planner's, kept apart from :attr:`history`, whose rows are steps 1, 2, ...), with the
        validation's other ``eval/validation/*`` values (the tie-breaker, the policy's diversity)."""
        rows = ([{"step": 0, **self.initial_validation}] if self.initial_validation is not None else []) + self.history
        return [{"step": r["step"], **{k: v for k, v in r.items() if k.startswith(VALIDATION_PREFIX)}}
                for r in rows if VALIDATION_SCORE in r]

    def _new_best(self, row: dict) -> bool:
        """True (and :attr:`best` updated) when ``row``'s validation score beats every earlier one, or
        ties the best and beats its :data:`VALIDATION_TIEBREAK` (a full tie keeps the earlier step).
        Whatever ``rltf.select`` says: a run resumed under ``best_validation`` must find the best kept."""
        score = row.get(VALIDATION_SCORE)
        if score is None or not math.isfinite(score):
            return False
        tiebreak = _finite_or_lowest(row.get(VALIDATION_TIEBREAK))
        if self.best is not None and (score, tiebreak) <= (self.best["score"],
                                                           _finite_or_lowest(self.best.get("tiebreak"))):
            return False
        self.best = {"step": self.step, "score": float(score)}
        if tiebreak != -math.inf:
            self.best["tiebreak"] = tiebreak
        return True

    def _select(self, validates: bool, load_weights: Callable[[Path], None]) -> Selection:
        """The planner the run hands on (see the module docstring); loads the best checkpoint's weights."""
        rl = self.rl
        last = next((r[VALIDATION_SCORE] for r in self.validation_rows() if r["step"] == self.step), None)
        if rl.select == "last":
            return Selection("last", self.step, last)
        if self.best is None:
            why = ("no validation score: rltf.eval_every=0" if self.validate is not None and not validates else
                   "no validation score: this trainer has no periodic validation" if self.validate is None else
                   "no finite validation score")
            return Selection("best_validation", self.step, last, f"{why}; the last planner (step {self.step})")
        if self.best["step"] != self.step:
            load_weights(self.cfg.run_dir / "rltf" / f"checkpoint-{self.best['step']}" / MODEL_DIR)
        return Selection("best_validation", self.best["step"], self.best["score"])

    # ---------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """Everything but the model (collective under FSDP: call on every process)."""
        return {"optimizer": self.sharding.optimizer_state_dict(self.model, self.optimizer),
                "scheduler": self.scheduler.state_dict(), "baseline": self.baseline.state_dict(),
                "history": self.history, "sharding": self.sharding.kind, "config": config_to_yaml(self.cfg),
                "initial_validation": self.initial_validation, "best": self.best}

    def save(self) -> None:
        weights = self.sharding.full_state_dict(self.model)  # gathered by every process when sharded
        state = self.state_dict()
        engine = self.sharding.save_engine(self.cfg.run_dir / "rltf" / f".engine-{self.step}")  # DeepSpeed
        self.acc.wait_for_everyone()
        if self.acc.is_main_process:
            save_checkpoint(self.cfg.run_dir / "rltf", self.step, self.planner, state, model_state=weights,
                            extra_dirs={ENGINE_DIR: engine} if engine else None, keep=self.rl.save_total_limit,
                            protect=() if self.best is None else (self.best["step"],))
        self.acc.wait_for_everyone()

    def load_weights(self, directory: Path) -> None:
        """The planner's weights from a checkpoint's model directory (every process, sharded or not)."""
        reloaded = Planner.from_pretrained(directory)
        self.sharding.load_full_state_dict(self.model, reloaded.model.state_dict())

    def resume(self, load_weights: Callable[[Path], None] | None = None) -> bool:
        """Load the newest intact checkpoint of this run, if any (a damaged newer one is skipped with a
        warning naming it); True when training resumes from it. ``load_weights(model_dir)`` reads the
        planner's weights (default :meth:`load_weights`; the flow trainer's also reads role adapters)."""
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
        (load_weights or self.load_weights)(ckpt / MODEL_DIR)
        self.sharding.load_optimizer_state_dict(self.model, self.optimizer, state["optimizer"])
        self.sharding.load_engine(ckpt / ENGINE_DIR)
        self.scheduler.load_state_dict(state["scheduler"])
        self.baseline.load_state_dict(state["baseline"])
        self.history = state["history"]
        self.step = state["step"]
        self.initial_validation = state.get("initial_validation")  # (checkpoints written before rltf.select
        self.best = state.get("best")                                # have neither)
        return True


class Trainer(Protocol):
    """What the train stage runs (:func:`rltf.stages.plan_job.run_trainer`), the flat plans' trainer
    or a flow's: its :class:`TrainingState`, ``train_step()`` (its algorithm: sample, reward, score,
    weigh, update; it advances :attr:`TrainingState.step`), ``train()`` (the state's loop around the
    step), ``resume()``, ``save()``, the steps done and the planner it handed on. A protocol, not a
    base class: each trainer holds its state and says what it delegates to it."""

    state: TrainingState

    @property
    def step(self) -> int: ...

    @property
    def selection(self) -> Selection | None: ...

    def train_step(self) -> dict[str, float]: ...

    def train(self) -> list[dict]: ...

    def resume(self) -> bool: ...

    def save(self) -> None: ...


def _finite_or_lowest(value) -> float:
    """``value`` as a float, or -inf when it is missing or not finite (it breaks no tie)."""
    return float(value) if value is not None and math.isfinite(value) else -math.inf
