"""The stages every recipe in ``train/`` is built from, each written once.

A recipe (``train/rltf.py`` the main job, ``train/sft.py``, ``train/evaluate.py``) is a short
sequence of these calls, in the style of torchtune's recipes:

* :func:`start` — the accelerator, the sharding mode as launched, the seed, the run folder;
* :func:`build_envs` — the train and held-out envs from ``cfg.env`` (``envs.make_train_and_held_out``:
  OpenAGI or the travel sandbox, as ``env.name`` says) and the persisted split's tasks (:class:`Envs`);
* :func:`build_planner` — the configured planner on this process's device, sharded as launched;
* :func:`fine_tune` — supervised fine-tuning on the train tasks' reference plans, saved;
  :func:`start_rltf_from_sft` — the planner RLTF starts from after it (the KL reference);
* :func:`train_rltf` — the RLTF trainer (tracker, periodic validation score from step 0, resume),
  handing on the planner ``rltf.select`` picks (the last or the best on validation);
* :func:`evaluate` — the learning schemas (``rltf.evaluation.schemas``) on held-out tasks, with the
  few-shot examples of :func:`few_shot_examples`; :func:`evaluate_untrained` caches the zero- and
  few-shot results of the main job for ``resume``;
* :func:`report` — the table, the results files, the reward plot and the last line.

Every process calls every stage (the main process alone writes files and prints).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from accelerate import Accelerator
from accelerate.utils import set_seed

import envs as env_factory
from common.atomic import atomic_dir, write_atomic
from envs.splitting import NON_TRAIN
from rltf.config.loading import RunConfig, check_resume_config, config_to_yaml, save_config
from rltf.config.sections import EVAL_SCHEMAS
from rltf.evaluation import schemas as ev
from rltf.evaluation.data_source import data_source, with_data_line
from rltf.evaluation.diversity import (
    Diversity,
    diversity_curve,
    diversity_results,
    load_last_diversity,
    save_last_diversity,
    validation_diversity,
)
from rltf.evaluation.schemas import Env, Task
from rltf.planners.embedded import no_language_pretraining
from rltf.planners.loading import load_planner, merges_sft_adapter, rltf_start_planner
from rltf.planners.planner import Planner
from rltf.planners.source import PlannerSource
from rltf.planners.tokenizer import tokenizer_texts_for
from rltf.rl.sft import supervised_finetune, warm_start_tasks
from rltf.rl.trainer import RLTFTrainer
from rltf.rl.training_state import VALIDATION_SCORE, Selection, Trainer
from rltf.run.checkpoint import prepare_run_folder
from rltf.run.distributed import Sharding, shard_planner, sharding_for
from rltf.run.environment import environment
from rltf.run.folders import disk_errors
from rltf.run.tracking import Tracker, plot_rewards, read_json, write_json
from rltf.stages.evaluated_planner import PLANNER_ROW

UNTRAINED = ("zero", "few")  # schemas of the planner before any training (prompted: ev.untrained_schema)
CONSTRAINED = ("finetuned", "rltf")  # schemas of a trained planner (constrained beam search)
LAST_LINE_SCHEMAS = ("zero", "few", "finetuned", "rltf", PLANNER_ROW, "oracle")
# a table's rows in order: the schemas, with train/evaluate.py's row of the planner it evaluated after the trained ones
_AFTER_TRAINED = EVAL_SCHEMAS.index("rltf") + 1
ROW_ORDER = (*EVAL_SCHEMAS[:_AFTER_TRAINED], PLANNER_ROW, *EVAL_SCHEMAS[_AFTER_TRAINED:])
_LABELS = {"zero": "zero-shot", "few": "few-shot", "finetuned": "fine-tuned"}


@dataclass
class NotApplicable(ev.SchemaResult):
    """A schema that means nothing for the planner (zero-/few-shot free text of a planner without
    language pretraining): no plans or scores, ``n/a`` and the reason in the table."""

    reason: str = ""


# ------------------------------------------------------------------------------------ start
@dataclass
class Run:
    """One process's view of a run: its config, accelerator, sharding mode and start time."""

    cfg: RunConfig
    acc: Accelerator
    sharding: Sharding
    started: float
    envs: "Envs | None" = None  # set by build_envs: what report() takes its table's columns from
    selection: Selection | None = None  # set by train_rltf: the planner RLTF handed on (rltf.select)
    validation: list[dict] | None = None  # set by train_rltf: the validation scores from step 0
    diversity: Diversity | None = None  # set by train_rltf: π_c's diversity at the last validation (eval.diversity_*)

    @property
    def run_dir(self) -> Path:
        return self.cfg.run_dir

    def log(self, msg: str) -> None:
        if self.acc.is_main_process:
            print(msg, flush=True)


def start(cfg: RunConfig, *, write_config: bool = True, first_line: str | None = None) -> Run:
    """Accelerator, sharding (replicated / FSDP2 / DeepSpeed ZeRO-2, as launched), seed; the run
    folder with the resolved ``config.yaml`` (``write_config``). It prints ``run <name> -> <run folder>``,
    or ``first_line`` (a recipe that writes elsewhere: ``train/evaluate.py``) with the processes and device."""
    started = time.perf_counter()
    acc = Accelerator()
    run = Run(cfg, acc, sharding_for(acc), started)
    set_seed(cfg.seed)
    if write_config and acc.is_main_process:
        with disk_errors(run.run_dir, "the run folder"):  # read-only, full: one line naming the path
            prepare_run_folder(run.run_dir, resume=cfg.resume, overwrite=cfg.overwrite)
            if cfg.resume and (run.run_dir / "config.yaml").is_file():  # before it is overwritten
                check_resume_config((run.run_dir / "config.yaml").read_text(), cfg, str(run.run_dir / "config.yaml"))
            run.run_dir.mkdir(parents=True, exist_ok=True)
            save_config(cfg, run.run_dir / "config.yaml")
    run.log(f"{first_line or f'run {cfg.run_name} -> {run.run_dir}'}  ({acc.num_processes} process(es), "
            f"device {acc.device})")
    return run


# ------------------------------------------------------------------------------------- envs
@dataclass
class Envs:
    """The run's envs and tasks: on OpenAGI ``train`` scores a plan on ``env.samples_per_step``
    samples, ``held_out`` on all of a task's samples; ``splits`` maps train / validation / test to
    their tasks (the persisted split, ``envs.split_ids``)."""

    train: Env
    held_out: Env
    splits: dict[str, list[Task]]

    def tasks(self, splits: Iterable[str]) -> list[Task]:
        """The tasks of ``splits`` in order (a split named twice counts once); ``non_train``
        (``envs.splitting.NON_TRAIN``): :meth:`non_train`."""
        return [t for s in dict.fromkeys(splits) for t in (self.non_train() if s == NON_TRAIN else self.splits[s])]

    def non_train(self) -> list[Task]:
        """Every task of the held-out env not in the train split, in the env's order (OpenAGI's full
        suite: also the tasks in no split)."""
        train = {t.id for t in self.splits["train"]}
        return [t for t in self.held_out.tasks() if t.id not in train]


def build_envs(run: Run) -> Envs:
    """The train and held-out envs of ``cfg.env`` from the env factory (OpenAGI's full suite data
    is built once, by the main process; hf experts run on this process's GPU)."""
    cfg, acc = run.cfg, run.acc
    train, held_out = env_factory.make_train_and_held_out(cfg.env, device=str(acc.device),
                                                          build_guard=acc.main_process_first())
    split = env_factory.split_ids(cfg.env)
    split = dict(zip(("train", "validation", "test"), split.values()))  # by role (travel re-split: <src>:re-split:*)
    splits = {"train": train.tasks(), **{s: [held_out.get_task(i) for i in split[s]] for s in ("validation", "test")}}
    run.envs = Envs(train, held_out, splits)
    return run.envs


def few_shot_examples(cfg: RunConfig, envs: Envs) -> list[Task]:
    """The solved train tasks a few-shot prompt shows: ``eval.few_shot_k`` of them, a permutation
    seeded by ``seed``."""
    train = envs.splits["train"]
    return [train[i] for i in np.random.default_rng(cfg.seed).permutation(len(train))[:cfg.eval.few_shot_k]]


# ---------------------------------------------------------------------------------- planner
def build_planner(run: Run, envs: Envs, extra_texts: Sequence[str] = (), *,
                  source: PlannerSource | None = None) -> Planner:
    """The configured planner (``cfg.planner``; ``source``: ``planner.model`` already resolved) on
    this process's device, sharded as launched. The
    embedded planner is built and saved once, by the main process; its tokenizer learns the env's
    action space (OpenAGI: also the tools registered from outside, ``env.tools``; travel: the
    sandbox's entity names) and the train tasks' texts, plus ``extra_texts`` (a flow's prompts)."""
    with run.acc.main_process_first():
        planner = load_planner(run.cfg.planner, tokenizer_texts_for(envs.train) + list(extra_texts), source=source)
    _place(run, planner)
    return planner


def _place(run: Run, planner: Planner) -> None:
    planner.model.to(run.acc.device)
    run.log(f"planner: {planner.source} ({planner.arch}, "
            f"{sum(p.numel() for p in planner.model.parameters()) / 1e6:.2f}M parameters, {run.sharding.kind})")
    shard_planner(planner.model, run.sharding)


# ------------------------------------------------------------------------------ fine-tuning
def fine_tune(run: Run, planner: Planner, envs: Envs, out_dir: Path) -> list[dict]:
    """Supervised fine-tuning on the train tasks' reference plans (``cfg.sft``); the planner is
    saved to ``out_dir`` and the per-epoch losses to ``<run_dir>/sft_history.json``."""
    cfg, acc, sharding = run.cfg, run.acc, run.sharding
    warm_start = warm_start_tasks(envs.splits["train"], cfg.sft.max_plans, cfg.seed)
    history = supervised_finetune(planner, envs.train, warm_start,
                                  epochs=cfg.sft.epochs, lr=cfg.sft.lr,
                                  batch_size=cfg.sft.batch_size, seed=cfg.seed, accelerator=acc,
                                  progress=cfg.logging.progress_bar, sharding=sharding,
                                  on_nonfinite=cfg.sft.on_nonfinite)
    weights = sharding.full_state_dict(planner.model)  # every process takes part when sharded
    if acc.is_main_process:
        save_planner(planner, out_dir, weights, "the fine-tuned planner")
        with disk_errors(run.run_dir / "sft_history.json", "the SFT losses"):
            write_json(run.run_dir / "sft_history.json", history)
    acc.wait_for_everyone()
    return history


def save_planner(planner: Planner, out_dir: Path, weights: dict | None, what: str) -> Path:
    """``planner.save_pretrained`` into a temporary sibling of ``out_dir`` renamed into place: a
    full disk or a kill mid-write leaves no half-written ``out_dir`` to be taken for a finished
    one (a resumed run sees no ``sft/rltf_planner.json`` and fine-tunes again). A disk that
    refuses the write is a :class:`~rltf.run.folders.DiskWriteError` naming ``out_dir`` (``what``)."""
    with disk_errors(out_dir, what), atomic_dir(out_dir, replace=True) as tmp:
        planner.save_pretrained(tmp, state_dict=weights)
    return out_dir


def start_rltf_from_sft(run: Run, planner: Planner, sft_dir: Path, *, resumed: bool) -> Planner:
    """The SFT -> RLTF handoff of the main job (every process calls it, after the SFT stage).

    ``planner`` was fine-tuned in this run, or (``resumed``) still holds the weights from before
    SFT while ``sft_dir`` holds the fine-tuned planner. Returns the planner RLTF starts from, on
    this process's device and sharded as launched, such that the trainer's KL reference is
    exactly that policy: with LoRA the SFT adapter is merged into the base and a fresh adapter
    trains on top (:func:`rltf.planners.loading.rltf_start_planner`, rebuilt from ``sft_dir``, the
    same planner as a run started from ``planner.model=<sft_dir>``); a full model (reference: the
    trainer's frozen copy) and a still-trained adapter keep the fine-tuned weights."""
    if merges_sft_adapter(run.cfg.planner):
        rltf_start_planner(planner, run.cfg.planner, sft_dir)  # releases the fine-tuned model first
        _place(run, planner)
        run.log(f"RLTF starts from {sft_dir} with the SFT adapter merged into the base and a fresh adapter")
    elif resumed:
        run.sharding.load_full_state_dict(planner.model, Planner.from_pretrained(sft_dir).model.state_dict())
        run.log(f"fine-tuned planner reloaded from {sft_dir}")
    return planner


# ------------------------------------------------------------------------------------- RLTF
def train_rltf(run: Run, planner: Planner, envs: Envs) -> list[dict]:
    """RLTF (``cfg.rltf``) on the train env, scored on the validation tasks every
    ``rltf.eval_every`` steps, logged to ``cfg.logging.report_to``, checkpointed under
    ``<run_dir>/rltf/``; ``resume=true`` continues from the newest checkpoint. ``planner`` ends
    holding the weights ``rltf.select`` picks (:attr:`Run.selection` says which step). Returns the
    per-step history."""
    def validation_score(p: Planner) -> dict[str, float]:
        r = evaluate(run, ["rltf"], p, envs, envs.splits["validation"], log=False, progress=False)["rltf"]
        if not run.cfg.eval.diversity_samples:
            return {VALIDATION_SCORE: r.overall}
        with run.sharding.gathered(p.model):  # π_c's diversity on the same tasks (own seeded draws)
            run.diversity = validation_diversity(p, envs.held_out, envs.splits["validation"], run.cfg)
            if run.acc.is_main_process:  # (kept for a resume that validates no more)
                save_last_diversity(run.cfg.run_dir / "rltf", run.diversity)
        return {VALIDATION_SCORE: r.overall, **run.diversity.row()}

    return run_trainer(run, lambda tracker: RLTFTrainer(run.cfg, planner, envs.train, run.acc, tracker,
                                                        validation_score, run.sharding))


def run_trainer(run: Run, make_trainer: Callable[[Tracker], Trainer]) -> list[dict]:
    """The RLTF stage of either trainer (:class:`rltf.rl.training_state.Trainer`: the flat plans' or a
    flow's): ``make_trainer(tracker)`` builds it logging to ``cfg.logging.report_to``; ``resume=true``
    continues from the newest checkpoint; it trains until ``rltf.steps`` and the run notes the
    planner it handed on (:attr:`Run.selection`). Returns the per-step history."""
    cfg, acc = run.cfg, run.acc
    tracker = Tracker(cfg.logging.report_to, run.run_dir, cfg.run_name, yaml.safe_load(config_to_yaml(cfg)),
                      cfg.logging.wandb_project, enabled=acc.is_main_process)
    trainer = make_trainer(tracker)
    if cfg.resume and trainer.resume():
        run.log(f"resumed RLTF at step {trainer.step}")
    history = trainer.train()
    tracker.finish()
    note_selection(run, trainer.selection, trainer.state.validation_rows())
    return history


def note_selection(run: Run, selection: Selection | None, validation: list[dict]) -> None:
    """Keep what RLTF handed on (``rltf.select``) and its validation curve for :func:`report`, and say it."""
    run.selection, run.validation = selection, validation
    if selection is None:
        return
    if selection.note:
        run.log(f"rltf.select={selection.select}: {selection.note}")
    elif selection.select == "best_validation":
        run.log(f"RLTF planner: step {selection.step}, the best validation score ({selection.score:.4f}) of "
                f"{len(validation)} validation(s) from step 0")


# --------------------------------------------------------------------------------- evaluate
def evaluate(run: Run, schemas: Iterable[str], planner: Planner | None, envs: Envs, tasks: Sequence[Task], *,
             log: bool = True, progress: bool = True) -> dict[str, ev.SchemaResult]:
    """The requested learning schemas (``rltf.config.sections.EVAL_SCHEMAS``) on ``tasks``, each plan scored
    on all of a task's samples by the held-out env:

    * ``zero`` / ``few``: the untrained ``planner`` prompted with the env's plan instructions, zero-shot
      or with :func:`few_shot_examples` (:func:`rltf.evaluation.schemas.untrained_schema`: free text,
      or constrained beam search for a chat planner);
    * ``finetuned`` / ``rltf``: ``planner``'s best plan by constrained beam search (the two names
      are the same evaluation of whatever planner is passed: it runs once);
    * ``reference`` / ``oracle``: the reference plans / exhaustive search (no planner).

    The planner's rows decode in chunks of ``eval.chunk_tasks`` tasks; ``progress``: a bar (or plain
    lines, ``logging.progress_bar``) per row counting them (off: the validation under the RLTF bar).
    """
    cfg, env = run.cfg, envs.held_out
    wanted = [s for s in EVAL_SCHEMAS if s in set(schemas)]
    needs_planner = [s for s in wanted if s in UNTRAINED + CONSTRAINED]
    if needs_planner and planner is None:
        raise ValueError(f"schemas {needs_planner} evaluate a planner; none was given")
    results: dict[str, ev.SchemaResult] = {}
    decoding = {"chunk": cfg.eval.chunk_tasks, "progress": cfg.logging.progress_bar if progress else None}
    gathered = run.sharding.gathered(planner.model) if needs_planner else contextlib.nullcontext()
    with gathered:  # decoding needs every parameter
        for s in wanted:
            if s in UNTRAINED and no_language_pretraining(planner):
                results[s] = NotApplicable(s, reason=no_language_pretraining(planner))
            elif s in UNTRAINED:
                shots = few_shot_examples(cfg, envs) if s == "few" else []
                results[s] = ev.untrained_schema(s, planner, env, tasks, shots, num_beams=cfg.eval.num_beams,
                                                 max_new_tokens=cfg.planner.max_plan_tokens, **decoding)
            elif s in CONSTRAINED:
                done = next((results[c] for c in CONSTRAINED if c in results), None)
                results[s] = (ev.SchemaResult(s, dict(done.plans), dict(done.scores)) if done is not None else
                              ev.constrained_schema(s, planner, env, tasks, cfg.eval.num_beams, **decoding))
            elif s == "reference":
                results[s] = ev.reference_schema(env, tasks)
            else:  # the env's oracle; n/a for an env without one
                found = ev.oracle_schema(env, tasks)
                results[s] = found if found is not None else NotApplicable(s, reason="the env has no oracle")
            if log:
                run.log(f"{_LABELS.get(s, s)} {_overall(results[s])}")
    return results


def _overall(r: ev.SchemaResult) -> str:
    return f"n/a ({r.reason})" if isinstance(r, NotApplicable) else f"{r.overall:.4f}"


def evaluate_untrained(run: Run, planner: Planner, envs: Envs, tasks: Sequence[Task]) -> dict[str, ev.SchemaResult]:
    """The zero- and few-shot schemas of ``cfg.eval.schemas`` for the planner before any training,
    written to ``<run_dir>/eval_initial.json``; a resumed run reads them back from there."""
    cfg = run.cfg
    wanted = [s for s in UNTRAINED if s in cfg.eval.schemas]
    initial_file = run.run_dir / "eval_initial.json"
    if not wanted:
        return {}
    if cfg.resume and initial_file.exists():
        results = {name: NotApplicable(name, reason=d["n/a"]) if "n/a" in d else
                   ev.SchemaResult(name, {int(k): v for k, v in d["plans"].items()},
                                   {int(k): v for k, v in d["scores"].items()},
                                   {int(k): v for k, v in d.get("valid", {}).items()},
                                   failed={int(k): v for k, v in d.get("failed", {}).items()},
                                   executed={int(k): v for k, v in d.get("executed", {}).items()},
                                   failure_notes=list(d.get("failure_notes", [])))
                   for name, d in read_json(initial_file, "the zero/few-shot results").items()}
        for name, r in results.items():
            run.log(f"{_LABELS[name]} {_overall(r)}")
        return results
    results = evaluate(run, wanted, planner, envs, tasks)
    if run.acc.is_main_process:
        write_json(initial_file, {k: {"plans": v.plans, "scores": v.scores, "valid": v.valid, "failed": v.failed,
                                      "executed": v.executed, "failure_notes": v.failure_notes} |
                                  ({"n/a": v.reason} if isinstance(v, NotApplicable) else {})
                                  for k, v in results.items()})
    return results


# ----------------------------------------------------------------------------------- report
def report(run: Run, results: dict[str, ev.SchemaResult], tasks: Sequence[Task], *, title: str,
           stem: str = "results", history: list[dict] | None = None, env: Env | None = None,
           labels: dict[str, str] | None = None, out_dir: Path | None = None, extra: dict | None = None) -> dict:
    """The table of ``results`` (per metric family and overall, schemas in table order), written to
    ``<run_dir>/<stem>.md`` / ``<stem>.json``; with an RLTF ``history`` also
    ``rltf_history.json`` and ``rewards.png``, the rltf row named after the step :func:`train_rltf`
    selected (``rltf (best validation, step 150)``; ``rltf_selection`` in ``<stem>.json``: that step,
    its score and the validation curve from step 0). Prints the table, the run folder and, as the last
    line, ``held-out overall: zero=… few=… finetuned=… rltf=… oracle=…`` (the schemas run; on an
    env with its own headline metric, e.g. travel's ``held-out final pass: finetuned=… rltf=…
    solver=…``). ``env`` (the held-out env) gives the table's columns; ``labels`` rename rows.
    ``out_dir`` (``train/evaluate.py``: beside the evaluated planner) replaces the run folder as the
    place of ``<stem>.md`` / ``<stem>.json``; ``extra`` adds its keys to ``<stem>.json``, after
    ``environment`` (the machine and every installed version: :mod:`rltf.run.environment`). On the travel
    env, ``data`` in ``<stem>.json`` and a line under the title name the database, flights, queries and
    split (:mod:`rltf.evaluation.data_source`). Returns the summary written to ``<stem>.json``."""
    cfg, acc = run.cfg, run.acc
    ordered = [results[s] for s in ROW_ORDER if s in results]
    if env is None and run.envs is not None:
        env = run.envs.held_out
    na = {r.schema: r.reason for r in ordered if isinstance(r, NotApplicable)}
    table = ev.results_table([r for r in ordered if r.schema not in na], tasks, env)
    oracle_name = env.oracle_name if env is not None else "oracle"
    selected = run.selection if history is not None else None  # the RLTF row's step (rltf.select)
    labels = {"oracle": oracle_name, **({"rltf": selected.label} if selected else {}), **(labels or {})}
    data = data_source(cfg.env, env, cfg.eval.splits, roles=True)  # travel: the database, flights, queries
    md = with_data_line(_with_na_rows(ev.table_markdown(table, title, labels), ev.markdown_columns(table),
                                      [r.schema for r in ordered], na, labels), data)
    if na:  # n/a rows hold no numbers (null in the JSON), in table order, and say why
        table["rows"] = {r.schema: {c: None for c in table["columns"]} if r.schema in na else table["rows"][r.schema]
                         for r in ordered}
        table["n/a"] = na
    summary = {"table": table, **({"data": data} if data else {}), "plans": {r.schema: r.plans for r in ordered},
               "scores": {r.schema: r.scores for r in ordered}, "seconds": time.perf_counter() - run.started}
    if selected is not None:
        summary["rltf_selection"] = {**selected.as_dict(), "validation": run.validation or []}
        last = run.diversity or load_last_diversity(run.run_dir / "rltf", diversity_curve(run.validation))
        diversity, diversity_md = diversity_results(run.validation, last, cfg.eval.diversity_samples)
        summary, md = summary | diversity, md + diversity_md
    summary["environment"] = environment()  # the machine and every installed version (figures move with both)
    summary |= extra or {}
    folder = run.run_dir if out_dir is None else Path(out_dir)
    if acc.is_main_process:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / f"{stem}.md", md)
        write_json(folder / f"{stem}.json", summary)
        if history is not None:
            write_json(run.run_dir / "rltf_history.json", history)
            plot_rewards(history, run.run_dir / "rewards.png", title=f"RLTF {cfg.run_name} (seed {cfg.seed})",
                         validation=run.validation, selected_step=selected.step if selected else None,
                         diversity=diversity_curve(run.validation))
    rows, column = table["rows"], ev.headline(env)
    run.log("\n" + md)
    run.log(f"{'run folder' if out_dir is None else f'{stem}.md / {stem}.json written to'}: {folder}  "
            f"({summary['seconds']:.0f}s)")
    run.log(f"held-out {column}: " + " ".join(
        f"{oracle_name if s == 'oracle' else s}={'n/a' if s in na else format(rows[s][column], '.4f')}"
        for s in LAST_LINE_SCHEMAS if s in rows))
    return summary


def _with_na_rows(md: str, columns: Sequence[str], schemas: Sequence[str], na: dict[str, str],
                  labels: dict[str, str]) -> str:
    """The markdown table with a row of ``n/a`` per not-applicable schema, in its place among
    ``schemas`` (table order: zero / few of a planner without language pretraining, the oracle of
    an env without one), and a line with each one's reason."""
    if not na:
        return md
    lines = md.rstrip("\n").split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("|---")) + 1
    scored = iter(lines[at:at + len(schemas) - len(na)])  # the table's rows: the other schemas, in order
    rows = [f"| {labels.get(s, s)} | " + " | ".join("n/a" for _ in columns) + " |" if s in na else next(scored)
            for s in schemas]
    rest = lines[at + len(schemas) - len(na):]
    notes = [f"{', '.join(s for s, r in na.items() if r == reason)}: {reason}" for reason in dict.fromkeys(na.values())]
    return "\n".join(lines[:at] + rows + rest + ["", *notes]) + "\n"
