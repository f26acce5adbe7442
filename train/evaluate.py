"""Held-out evaluation of one planner: the learning schemas of ``eval.schemas`` and the bounds.

    python train/evaluate.py planner.model=checkpoints/default eval.splits=[test,validation]

``planner.model`` names the planner, resolved once before anything loads
(:func:`rltf.planners.source.resolve_planner_source`, :mod:`rltf.stages.evaluated_planner`):

* a finished training run's folder (``checkpoints/default``): the planner that run reported as
  ``rltf`` in its table, ``rltf/checkpoint-<step>/planner`` of the step ``rltf.select`` picked (its
  ``results.json``: ``rltf_selection``); that checkpoint survives rotation;
* a planner folder: ``checkpoints/default/sft`` (the fine-tuned planner), a checkpoint's
  ``checkpoints/default/rltf/checkpoint-<step>/planner`` (``rltf/latest`` names the newest), an
  adapter folder, anything ``from_pretrained`` loads;
* ``embedded``, ``smollm2`` or a hub id.

It is placed on the accelerator's device and evaluated with the main job's held-out tasks and
few-shot examples (``rltf/stages/plan_job.py``), so a planner evaluated here gets the main job's
numbers. ``eval.schemas`` says which rows are computed: ``zero`` / ``few`` prompt this planner
zero- or few-shot (meaningful for a pretrained model: for the embedded planner, which has no
language pretraining, they are ``n/a``); ``finetuned`` or ``rltf`` (either, or both: the same
evaluation) is its constrained beam search; ``reference`` / ``oracle`` are the bounds (no planner).
The planner's rows are named after what was evaluated: ``planner (<folder>)`` (``planner`` in
``eval.json``), ``zero-shot (<folder>)``, ``few-shot (<folder>)``; the bounds keep their names.

It prints the table and writes ``eval.md`` / ``eval.json`` beside the planner folder, into
``<planner folder>/eval/`` (a training run's own files are never touched); for ``embedded``,
``smollm2`` or a hub id into ``<output_dir>/<run_name>/``, which must not hold a training run
(pass ``run_name=...``). The last lines say where, and ``held-out overall: planner=… oracle=…``.
``eval.json`` also records the ``planner`` evaluated (and, for a run folder, its ``selection``).

Its first line says what it evaluates and where it writes (``evaluate <planner> -> <planner>/eval``).
Each row shows its progress: the planner's beam search a bar named after the planner
(``eval rltf planner of default (step 150)``, ``eval planner default/sft``: :attr:`EvaluatedPlanner.short_name`),
the prompted rows ``eval zero`` / ``eval few``, the oracle's search ``eval oracle``; each counts the tasks,
ticked after every ``eval.chunk_tasks`` of them (with ``logging.progress_bar=false`` or in a log
file, plain lines such as ``eval planner default/sft:  50%|#####     | 8/16 ...``, at most one every 30 s).

On the pddl env, ``env.pddl.problems=<folder>`` (and ``env.pddl.domain=<file>``) scores any folder of problems
laid out like PlanBench's, one the planner never saw included; ``eval.splits=[train,validation,test]`` covers
every instance of a folder without ``split.json`` (docs/evaluation.md).

``dry_run=true`` validates the config and prints what it would load and where it would write,
loading, fetching (``smollm2`` on an empty cache) and writing nothing.

``eval.splits`` picks the held-out tasks: ``[test]`` (10 tasks on the lite suite), or
``[validation,test]`` for the union (18: one task moves the mean less); a split name other than
train / validation / test is refused naming the key. Each schema's overall score comes with its
95% bootstrap interval over the tasks (``0.7367 [0.61, 0.85]``; ``eval.json``: the table's
``intervals``, :func:`rltf.evaluation.schemas.bootstrap_interval`).

With ``flow.enabled: true`` (``configs/travel-mtp.yaml``, ``travel-okr.yaml``, ``travel-react.yaml``)
it evaluates the agent flows of ``flow.methods`` on the travel sandbox instead
(:mod:`rltf.flows.evaluate`: ``flow_eval.md`` / ``flow_eval.json`` and traces; ``dry_run=true``
lists every node and backend).
"""

import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rltf.config.loading import load_config  # noqa: E402
from rltf.config.sections import EVAL_SCHEMAS  # noqa: E402
from rltf.evaluation import schemas as ev  # noqa: E402
from rltf.flows.evaluate import main as evaluate_flows  # noqa: E402
from rltf.planners.source import resolve_planner_source  # noqa: E402
from rltf.run.cli import run_cli  # noqa: E402
from rltf.run.tracking import configure_progress_bars, kept_alive, progress_bar  # noqa: E402
from rltf.stages import plan_job as stages  # noqa: E402
from rltf.stages.describe import describe_evaluation  # noqa: E402
from rltf.stages.evaluated_planner import PLANNER_ROW, EvaluatedPlanner, evaluated_planner  # noqa: E402


def main(argv: list[str] | None = None) -> dict | None:
    argv = sys.argv[1:] if argv is None else argv
    cfg = load_config(argv)
    configure_progress_bars(cfg.logging.progress_bar)
    if cfg.flow.enabled:  # agent flows (MTP, OKR-Agent, ReAct, flat) on the travel sandbox
        return evaluate_flows(argv)
    source = resolve_planner_source(cfg.planner.model)  # before anything loads; cfg stays as given
    target = evaluated_planner(source, cfg.run_dir)  # refuses a run_dir that holds a training run
    if cfg.dry_run:  # what it would load and write; loads, fetches and writes nothing
        print(describe_evaluation(cfg, source, target.out_dir, str(target.model)))
        return None
    run = stages.start(cfg, write_config=False,  # writes nothing into the run folder
                       first_line=f"evaluate {target.model} -> {target.out_dir}")
    if target.run is not None:
        run.log(f"planner.model={target.run}: the run's rltf planner (rltf.select={target.selection['select']}, "
                f"step {target.selection['step']}): {target.model}")
    envs = stages.build_envs(run)
    planner = stages.build_planner(run, envs, source=source)
    tasks = envs.tasks(cfg.eval.splits)
    results = evaluate_rows(run, cfg.eval.schemas, planner, envs, tasks, target)
    title = f"{target.model} on {'+'.join(dict.fromkeys(cfg.eval.splits))}"
    return stages.report(run, results, tasks, title=title, stem="eval", labels=target.row_labels(),
                         out_dir=target.out_dir, extra={"planner": target.as_dict()})


def evaluate_rows(run: stages.Run, schemas, planner, envs: stages.Envs, tasks,
                  target: EvaluatedPlanner) -> dict:
    """The rows of ``schemas`` (table order), each logged as it finishes: ``finetuned`` / ``rltf``
    are one row, ``planner``, the constrained beam search of the planner evaluated."""
    wanted = [s for s in EVAL_SCHEMAS if s in set(schemas)]
    constrained = [s for s in wanted if s in stages.CONSTRAINED][:1]  # (both: the same evaluation)
    labels = {"oracle": envs.held_out.oracle_name, **target.row_labels()}
    results = {}
    for s in [s for s in wanted if s not in stages.CONSTRAINED or s in constrained]:
        if s in stages.CONSTRAINED:  # its bar names the planner: "eval rltf planner of default (step 150)"
            result = planner_row(run, planner, envs, tasks, target)
        elif s == "oracle":
            result = oracle_row(run, envs, tasks)
        else:
            result = stages.evaluate(run, [s], planner, envs, tasks, log=False)[s]
        row = PLANNER_ROW if s in stages.CONSTRAINED else s
        results[row] = dataclasses.replace(result, schema=row)
        score = "n/a" if isinstance(result, stages.NotApplicable) else f"{result.overall:.4f}"
        run.log(f"{labels.get(row, row)} {score}")
    return results


def planner_row(run: stages.Run, planner, envs: stages.Envs, tasks, target: EvaluatedPlanner) -> ev.SchemaResult:
    """The planner's constrained beam search (the ``finetuned`` / ``rltf`` schemas: one evaluation), its
    progress bar named after the planner evaluated (``eval planner default/sft``:
    :attr:`EvaluatedPlanner.short_name`)."""
    cfg = run.cfg
    with run.sharding.gathered(planner.model):  # decoding needs every parameter
        return ev.constrained_schema(target.short_name, planner, envs.held_out, tasks,
                                     cfg.eval.num_beams, chunk=cfg.eval.chunk_tasks,
                                     progress=cfg.logging.progress_bar)


def oracle_row(run: stages.Run, envs: stages.Envs, tasks) -> ev.SchemaResult:
    """The env's oracle on ``tasks`` in chunks of ``eval.chunk_tasks``, a progress bar ``eval <oracle name>``
    ticked after each (an exhaustive search or a solver can take a minute); n/a for an env without one."""
    cfg, env = run.cfg, envs.held_out
    size = cfg.eval.chunk_tasks or max(1, len(tasks))
    merged = ev.SchemaResult("oracle")
    with progress_bar(total=len(tasks), desc=f"eval {env.oracle_name}", enabled=cfg.logging.progress_bar,
                      main=run.acc.is_main_process, unit="task", mininterval=0) as bar, kept_alive(bar):
        for start in range(0, len(tasks), size):
            part = ev.oracle_schema(env, tasks[start:start + size])  # a collective: every process, every chunk
            if part is None:
                return stages.NotApplicable("oracle", reason="the env has no oracle")
            for what in ("plans", "scores", "valid"):
                getattr(merged, what).update(getattr(part, what))
            bar.update(len(tasks[start:start + size]))
    return merged


if __name__ == "__main__":
    run_cli(main)  # user-facing errors: one line on stderr, exit status 2
