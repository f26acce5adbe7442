"""Robustness to wording: a saved planner's held-out score on the original task descriptions vs on
hand-written rewordings of them (``envs/openagi/task_data/rewordings.json``, :mod:`rltf.evaluation.rewordings`).

    python benchmarks/rewordings.py planner.model=checkpoints/default/rltf/checkpoint-300/planner
    python benchmarks/rewordings.py planner.model=checkpoints/default/sft eval.splits=[test,validation]

Takes the run config's keys like ``train/evaluate.py`` (``planner.model``: any planner
``from_pretrained`` loads; ``eval.splits``: the held-out tasks; ``eval.num_beams``; ``env.*``), runs
the constrained beam search of the main job's ``finetuned`` / ``rltf`` rows on every task as
written and on each of its rewordings (same inputs, target, samples and metric), prints one row per
task, and writes ``rewordings.json`` into ``<output_dir>/<run_name>/``. Last line:
``held-out rewordings: original=<x> reworded=<x> same_plan=<x>`` (mean scores; the fraction of
rewordings planned exactly as the original).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from envs.openagi.task_data import REWORDINGS_FILE  # noqa: E402
from rltf.config.loading import load_config  # noqa: E402
from rltf.evaluation.rewordings import evaluate_rewordings, load_rewordings  # noqa: E402
from rltf.run.cli import run_cli  # noqa: E402
from rltf.run.tracking import write_json  # noqa: E402
from rltf.stages import plan_job as stages  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    cfg = load_config(sys.argv[1:] if argv is None else argv)
    run = stages.start(cfg, write_config=False)
    envs = stages.build_envs(run)
    planner = stages.build_planner(run, envs)
    tasks = envs.tasks(cfg.eval.splits)
    with run.sharding.gathered(planner.model):
        out = evaluate_rewordings(planner, envs.held_out, tasks, cfg.eval.num_beams, load_rewordings(REWORDINGS_FILE))
    splits = "+".join(dict.fromkeys(cfg.eval.splits))
    lines = [f"### rewordings: {cfg.planner.model} on the {out['n_tasks']} held-out ({splits}) tasks, "
             f"{out['n_rewordings']} rewordings", "",
             "| task | original | reworded (mean) | same plan |", "|---|---|---|---|"]
    for p in out["per_task"]:
        scores = [r["score"] for r in p["reworded"]]
        same = sum(r["plan"] == p["original"]["plan"] for r in p["reworded"])
        lines.append(f"| {p['id']}: {p['description']} | {p['original']['score']:.4f} | "
                     f"{sum(scores) / len(scores):.4f} | {same}/{len(scores)} |")
    run.log("\n".join(lines) + "\n")
    if run.acc.is_main_process:
        write_json(run.run_dir / "rewordings.json", out)
    run.log(f"held-out rewordings: original={out['original']:.4f} reworded={out['reworded']:.4f} "
            f"same_plan={out['same_plan']:.4f}")
    return out


if __name__ == "__main__":
    run_cli(main)
