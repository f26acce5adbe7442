"""Fine-tuning schema: supervised training on the train tasks' reference plans.

    python train/sft.py [config=...] [key=value ...]

Writes the fine-tuned planner (``save_pretrained``) to ``<run_dir>/sft`` — the checkpoint RLTF
starts from (``planner.model=<run_dir>/sft``) — and prints its held-out score. The same stages
(``rltf/stages/plan_job.py``) as the main job's fine-tuning. ``dry_run=true`` prints what it would
load and do, and exits.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import envs  # noqa: E402
from rltf.config.loading import RunConfig, load_config  # noqa: E402
from rltf.run.cli import run_cli  # noqa: E402
from rltf.stages import plan_job as stages  # noqa: E402
from rltf.stages.describe import check_run_folder  # noqa: E402
from rltf.stages.recipe import run_recipe  # noqa: E402


def describe(cfg: RunConfig) -> str:
    """What this recipe would load and do (``dry_run=true``); loads nothing. A folder holding a run: exit 2."""
    check_run_folder(cfg)
    s, p = cfg.sft, cfg.planner
    return "\n".join([
        f"dry run of train/sft.py {cfg.run_name!r}: the configuration is valid; nothing was loaded "
        "(no weights, no datasets, no downloads)",
        f"run         {Path(cfg.run_dir).resolve()} (sft/, sft_history.json, config.yaml; seed {cfg.seed})",
        *envs.describe(cfg.env),
        f"planner     {p.model} (arch {p.arch}, dtype {p.dtype}{', LoRA' if p.lora.enabled else ''})",
        f"sft         {s.epochs} epochs on the train tasks' reference plans, lr {s.lr:g}, batch {s.batch_size}; "
        "the fine-tuned planner saved to sft/",
        f"eval        finetuned (constrained beam search, {cfg.eval.num_beams} beams) on "
        f"{'+'.join(dict.fromkeys(cfg.eval.splits))}"])


def main(argv: list[str] | None = None) -> None:
    run_recipe(argv, load_config, describe, sft_job)


def sft_job(cfg) -> None:
    """Fine-tune the configured planner on the train tasks' reference plans, save it to sft/, evaluate it."""
    run = stages.start(cfg)
    envs = stages.build_envs(run)
    planner = stages.build_planner(run, envs)
    history = stages.fine_tune(run, planner, envs, run.run_dir / "sft")
    res = stages.evaluate(run, ["finetuned"], planner, envs, envs.tasks(cfg.eval.splits), log=False)["finetuned"]
    run.log(f"final nll {history[-1]['sft/nll'] if history else float('nan'):.4f}; saved to {run.run_dir / 'sft'}")
    run.log(f"held-out ({'+'.join(dict.fromkeys(cfg.eval.splits))}) finetuned={res.overall:.4f}")


INTERRUPTED_ADVICE = "the fine-tuned planner was not saved; run again with overwrite=true to start over"


if __name__ == "__main__":
    # user-facing errors: one line on stderr, exit status 2; Ctrl-C: one line, exit status 130
    run_cli(main, interrupted=INTERRUPTED_ADVICE)
