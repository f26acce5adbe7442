"""Held-out evaluation of a planner: the learning schemas of ``eval.schemas`` and the bounds.

    python train/evaluate.py planner.model=checkpoints/default/rltf/checkpoint-200/planner \
        eval.splits=[test,validation] eval.schemas=[rltf,reference,oracle]

``planner.model`` is anything ``from_pretrained`` loads (a saved planner, an adapter folder, a
hub id), placed on the accelerator's device. Every schema in ``eval.schemas`` evaluates that one
planner (``finetuned`` and ``rltf`` are the same constrained beam search; name the row you mean),
with the main job's held-out tasks and few-shot examples (``rltf/stages/plan_job.py``), so a planner
evaluated here gets the main job's numbers. Prints the table and writes ``eval.md`` /
``eval.json`` into the run folder.

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

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rltf.stages import plan_job as stages  # noqa: E402
from rltf.run.cli import run_cli  # noqa: E402
from rltf.config.loading import load_config  # noqa: E402
from rltf.run.tracking import configure_progress_bars  # noqa: E402


def main(argv: list[str] | None = None) -> dict | None:
    argv = sys.argv[1:] if argv is None else argv
    cfg = load_config(argv)
    configure_progress_bars(cfg.logging.progress_bar)
    if cfg.flow.enabled:  # agent flows (MTP, OKR-Agent, ReAct, flat) on the travel sandbox
        from rltf.flows.evaluate import main as evaluate_flows

        return evaluate_flows(argv)
    run = stages.start(cfg, write_config=False)  # the run folder may hold a training run's config
    envs = stages.build_envs(run)
    planner = stages.build_planner(run, envs)
    tasks = envs.tasks(cfg.eval.splits)
    results = stages.evaluate(run, cfg.eval.schemas, planner, envs, tasks)
    title = f"{cfg.planner.model} on {'+'.join(dict.fromkeys(cfg.eval.splits))}"
    return stages.report(run, results, tasks, title=title, stem="eval")


if __name__ == "__main__":
    run_cli(main)  # user-facing errors: one line on stderr, exit status 2
