"""Main job: zero/few-shot -> fine-tuning warm start -> RLTF -> held-out evaluation.

With ``flow.enabled`` (``configs/travel-mtp.yaml``, ``travel-okr.yaml``) it trains an agent flow
instead: warm start on the solver's decisions -> RLTF on the flow's trajectories -> held-out
evaluation of the flow (``rltf/stages/flow_job.py``).

    accelerate launch train/rltf.py [config=configs/<name>.yaml] [key=value ...]
    python train/rltf.py rltf.steps=50 seed=1

With no arguments it runs the offline embedded default (``configs/default.yaml``) on the CPU.
``dry_run=true`` validates the config and prints what the run would load (``rltf/stages/describe.py``);
a run folder that already holds a run (without ``resume`` / ``overwrite``) is the launch's refusal,
one ``error:`` line and exit status 2. Ctrl-C prints one ``error: interrupted (SIGINT)`` line saying
to resume with ``resume=true`` and exits with status 130.
Every stage is a function of ``rltf/stages/plan_job.py``. A resumed run (``resume=true``) reuses what
earlier stages finished: the zero/few-shot results, the fine-tuned planner, the newest RLTF
checkpoint.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rltf.config.loading import RunConfig, load_config  # noqa: E402
from rltf.planners.loading import check_kl_reference  # noqa: E402
from rltf.run.cli import RESUME_ADVICE, run_cli  # noqa: E402
from rltf.stages import plan_job as stages  # noqa: E402
from rltf.stages.describe import check_run_folder, describe_run  # noqa: E402
from rltf.stages.flow_job import describe_flow_job, run_flow_job  # noqa: E402
from rltf.stages.recipe import run_recipe  # noqa: E402


def run(cfg: RunConfig) -> dict:
    check_kl_reference(cfg.planner, sft=cfg.sft.enabled, kl_coef=cfg.rltf.kl_coef)  # before anything loads
    if cfg.flow.enabled:  # an agent flow (MTP, OKR-Agent) on the travel sandbox: rltf/stages/flow_job.py
        return run_flow_job(cfg)
    job = stages.start(cfg)
    envs = stages.build_envs(job)
    planner = stages.build_planner(job, envs)
    tasks = envs.tasks(cfg.eval.splits)
    results = stages.evaluate_untrained(job, planner, envs, tasks)  # zero-/few-shot

    sft_dir = job.run_dir / "sft"
    if cfg.sft.enabled:
        resumed = cfg.resume and (sft_dir / "rltf_planner.json").exists()
        if not resumed:
            stages.fine_tune(job, planner, envs, sft_dir)
        # the policy RLTF starts from and its KL reference (also what "finetuned" evaluates)
        planner = stages.start_rltf_from_sft(job, planner, sft_dir, resumed=resumed)
    results |= stages.evaluate(job, {"finetuned"} & set(cfg.eval.schemas), planner, envs, tasks)

    history = stages.train_rltf(job, planner, envs)
    results |= stages.evaluate(job, {"rltf", "reference", "oracle"} & set(cfg.eval.schemas), planner, envs, tasks)
    title = f"held-out ({'+'.join(dict.fromkeys(cfg.eval.splits))}) tasks, run {cfg.run_name}, seed {cfg.seed}"
    # without SFT the "finetuned" row is the initial planner under constrained beam search
    labels = None if cfg.sft.enabled else {"finetuned": "initial (no SFT)"}
    return stages.report(job, results, tasks, title=title, history=history, labels=labels)


def describe(cfg: RunConfig) -> str:
    if cfg.flow.enabled:
        check_run_folder(cfg)  # a folder holding a run: the launch's refusal, as one line (exit 2)
        return describe_flow_job(cfg)
    return describe_run(cfg)


def main(argv: list[str] | None = None) -> None:
    run_recipe(argv, load_config, describe, run)


if __name__ == "__main__":
    # user-facing errors: one line on stderr, exit status 2; Ctrl-C: one line saying to resume, exit status 130
    run_cli(main, interrupted=RESUME_ADVICE)
