"""GRPO baseline: fine-tuning warm start -> TRL's GRPOTrainer -> held-out evaluation (issue #15).

    python train/grpo.py                                   # configs/grpo-lite.yaml, offline, CPU
    python train/grpo.py rltf.steps=50 seed=1 grpo.loss_type=grpo
    python train/grpo.py planner.model=checkpoints/<run>/sft sft.enabled=false   # start from a saved SFT

The same config as the main job (``python train/rltf.py config=configs/grpo-lite.yaml`` is the RLTF
run it is compared with): the causal planner of ``planner`` (``planner.arch=causal``: the embedded
LLaMA), rltf's SFT stage (``sft``), then GRPO (:mod:`rltf.comparison.grpo`) with RLTF's budget and
hyperparameters (``rltf.steps``, ``tasks_per_batch``, ``k_samples`` = ``num_generations``, ``lr``,
``temperature``, ...) and the train env's score of each sampled text as its reward. GRPO's own
settings (the config's ``grpo`` section, :class:`rltf.config.sections.GrpoSettings`) are ``grpo.<name>=<value>``
arguments or a ``grpo:`` section in the YAML file. The warm start is the unconstrained NLL of the reference plan text
(``grpo.warm_start=text``, the default: how GRPO is normally warm-started, from which unconstrained
sampling finds valid plans); ``grpo.warm_start=constrained`` starts from rltf's own SFT stage
instead, whose unconstrained text stays near-random (see :mod:`rltf.comparison.grpo`).
``grpo.sampling=constrained`` samples GRPO's completions under rltf's plan grammar (every one a
valid plan) while TRL's loss keeps the unconstrained log-probabilities (what vLLM structured outputs
give a TRL user: :mod:`rltf.comparison.grpo_trainer`). Prompts are the RLTF planner's (the chat
template of an instruct LLM such as SmolLM2, ``planner.model=smollm2``).

Any env of the env interface trains here (``env.name=openagi``, ``travel``, ``pddl``, a plug-in), decided by what
the env declares, never by its name. An env whose plans are few enough to enumerate (its spec's
``enumerable_plans``: OpenAGI) samples constrained completions over one automaton of every plan's text; any other
(travel's itineraries, a pddl problem's plans; grammars built lazily too, such as pddl's ``legal`` grammar) follows
the task's grammar lazily, its rows (travel: route, then each day's slots; pddl: the one action row) one after the
other as one sequence with a separator token between them (:mod:`rltf.comparison.lazy_grammar`, states expanded
as the sampler reaches them); the reward judges the plan the completion's rows assemble (its canonical text, what
the env parses). Two more held-out rows then decode greedily in that sequence format, the one GRPO trains in
(``finetuned_seq``, ``grpo_seq``). ``grpo.warm_start=text`` fine-tunes on the text of the train tasks' reference
plans (travel: the solver plans' JSON; pddl: the optimal plan's actions ``(unstack b a) (put-down b)``), what
``grpo.sampling=free`` must write, up to ``planner.max_plan_tokens``: free text is parsed and scored by the env
(pddl: simulated action by action). An env with its own table columns (``table_columns``: travel's evaluator,
pddl's goal rate and executable share) gets them and the mean reward; the last line then reads
``held-out reward: ...``. Agent flows are refused.

Evaluation on the held-out tasks (``eval.splits``): the fine-tuned and the GRPO planner by the main
job's constrained beam search (``finetuned`` / ``grpo``, the evaluation RLTF gets) and by
unconstrained greedy decoding parsed as written (``*_free``), with the fraction of valid plans;
plus ``reference`` / ``oracle`` when in ``eval.schemas``; the overall scores with their bootstrap
intervals over tasks (:func:`rltf.evaluation.schemas.bootstrap_interval`). Every ``rltf.eval_every`` steps
(0: never) the GRPO planner is scored on the validation tasks by the same beam search, as RLTF's
trainer does (``eval/validation/score``). Writes ``<run_dir>/results.md`` / ``results.json``
(table, intervals, plans, per-task scores) / ``grpo_history.json`` (TRL's log and every reward
call) / ``train_history.json`` (per step: ``train/reward``, ``train/valid``, and the validation
score at the evaluation steps: the rows of RLTF's ``rltf_history.json``); the last line is
``held-out overall: finetuned=<x> grpo=<x> grpo_valid=<x>`` (``grpo_valid``: the fraction of valid
plans among the GRPO planner's greedy free text). ``dry_run=true`` prints what it would load and do,
and exits.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_var, "1")  # GRPO here never needs the hub (a hub planner id: unset these)


import envs  # noqa: E402
from common.atomic import write_atomic  # noqa: E402
from rltf.comparison.grpo import (  # noqa: E402
    PeriodicEval,
    comparison_table,
    follows_rows_lazily,
    free_text_schema,
    make_grpo_trainer,
    reward_history,
    sequence_schema,
    text_finetune,
    training_curve,
)
from rltf.comparison.lazy_grammar import separator_id  # noqa: E402
from rltf.config.loading import ConfigError, RunConfig, load_config  # noqa: E402
from rltf.rl.sft import warm_start_tasks  # noqa: E402
from rltf.rl.training_state import VALIDATION_SCORE  # noqa: E402
from rltf.run.tracking import write_json  # noqa: E402
from rltf.stages import plan_job as stages  # noqa: E402
from rltf.stages.describe import check_run_folder  # noqa: E402
from rltf.stages.recipe import run_recipe  # noqa: E402

DEFAULT_CONFIG = "configs/grpo-lite.yaml"


def parse_args(argv: list[str]) -> RunConfig:
    """The run config: ``config=`` (default ``configs/grpo-lite.yaml``) and ``key=value`` overrides;
    GRPO's own settings are its ``grpo`` section (``grpo.<name>=<value>``)."""
    if not any(a.removeprefix("--").startswith("config=") for a in argv):
        argv = [f"config={DEFAULT_CONFIG}", *argv]
    return load_config(argv)


def check_run(cfg: RunConfig) -> None:
    """What this recipe refuses before anything loads."""
    if cfg.resume:
        raise ConfigError("train/grpo.py does not resume runs: start a new one (another run_name, or overwrite=true)")
    if cfg.flow.enabled:
        raise ConfigError("train/grpo.py trains the flat planner (one plan per query); flow.enabled=true: expected "
                          "false (agent flows train with train/rltf.py)")
    beta = cfg.rltf.kl_coef if cfg.grpo.beta is None else cfg.grpo.beta
    if cfg.grpo.warm_start == "text" and cfg.planner.lora.enabled and cfg.sft.enabled and beta > 0:
        # TRL's reference of a LoRA model is the base with the adapter off: the untuned model, not the text SFT
        raise ConfigError(f"grpo.warm_start=text with LoRA trains the text SFT into the adapter, so TRL's KL reference "
                          f"would be the base model; beta={beta:g} (grpo.beta / rltf.kl_coef): expected 0, or "
                          "grpo.warm_start=constrained (the SFT adapter merged into the base), or "
                          "planner.lora.enabled=false")


def describe(cfg: RunConfig) -> str:
    """What this recipe would load and do (``dry_run=true``); loads nothing. A folder holding a run: exit 2."""
    check_run(cfg)
    check_run_folder(cfg)
    g, r, s, p = cfg.grpo, cfg.rltf, cfg.sft, cfg.planner
    warm = ("off" if not s.enabled else
            f"{s.epochs} epochs, lr {s.lr:g}, batch {s.batch_size}, "
            f"plans of {f'{s.max_plans} train tasks' if s.max_plans else 'every train task'} (sft.max_plans), "
            + ("rltf's constrained SFT stage" if g.warm_start == "constrained" else "text NLL of the reference plans"))
    return "\n".join([
        f"dry run of train/grpo.py {cfg.run_name!r}: the configuration is valid; nothing was loaded "
        "(no weights, no datasets, no downloads)",
        f"run         {Path(cfg.run_dir).resolve()} (sft/, grpo/, results.md, results.json, grpo_history.json, "
        f"train_history.json; seed {cfg.seed})",
        *envs.describe(cfg.env),
        f"planner     {p.model} (arch {p.arch}: GRPO trains decoder-only planners; dtype {p.dtype})",
        f"warm start  {warm}",
        f"grpo        {r.steps} steps x {r.tasks_per_batch} tasks x {r.k_samples} generations ("
        + ("under the plan grammar" + (" (lazily, its rows as one sequence)" if follows_rows_lazily(cfg) else "")
           + ", TRL loss on unconstrained log-probs" if g.sampling == "constrained"
           else "free text")
        + "), "
        f"lr {r.lr:g}, "
        f"temperature {r.temperature:g}, loss {g.loss_type}, scale_rewards {g.scale_rewards}, epsilon {g.epsilon:g}, "
        f"{g.num_iterations} iteration(s), beta {r.kl_coef if g.beta is None else g.beta:g}",
        f"eval        finetuned and grpo (constrained beam search, {cfg.eval.num_beams} beams; and greedy free text) "
        f"on {'+'.join(dict.fromkeys(cfg.eval.splits))}"])


def run(cfg: RunConfig) -> dict:
    grpo = cfg.grpo
    check_run(cfg)
    job = stages.start(cfg)
    if job.acc.num_processes != 1:
        raise ConfigError("train/grpo.py runs in one process (python train/grpo.py)")
    envs = stages.build_envs(job)
    planner = stages.build_planner(job, envs)
    if planner.is_encoder_decoder:
        raise ConfigError(f"GRPO (TRL) trains decoder-only planners; {planner.source} is a seq2seq model: "
                          "set planner.arch=causal (the embedded planner is then a LLaMA)")
    tasks = envs.tasks(cfg.eval.splits)
    max_tokens = cfg.planner.max_plan_tokens

    start_dir = Path(planner.source)
    if cfg.sft.enabled:
        start_dir = job.run_dir / "sft"
        if grpo.warm_start == "constrained":  # rltf's SFT stage: the planner RLTF starts from
            stages.fine_tune(job, planner, envs, start_dir)
            planner = stages.start_rltf_from_sft(job, planner, start_dir, resumed=False)
        else:  # unconstrained NLL of the reference plan text
            sft_tasks, plan_text = _text_sft_data(cfg, envs.splits["train"])
            history = text_finetune(planner, sft_tasks, epochs=cfg.sft.epochs, lr=cfg.sft.lr,
                                    batch_size=cfg.sft.batch_size, seed=cfg.seed, plan_text=plan_text)
            planner.save_pretrained(start_dir)
            write_json(job.run_dir / "sft_history.json", history)
            job.log(f"text SFT: nll {history[0]['sft/nll']:.3f} -> {history[-1]['sft/nll']:.3f}" if history else "")
    constrained = {"finetuned": stages.evaluate(job, ["finetuned"], planner, envs, tasks)["finetuned"]}
    separator = None
    if grpo.sampling == "constrained" and follows_rows_lazily(cfg):  # sampled lazily: scored that way too
        separator = separator_id(planner.tokenizer, [e.grammar(planner.tokenizer, t) for e, split in
                                                     ((envs.train, envs.splits["train"]), (envs.held_out, tasks))
                                                     for t in split])
        constrained["finetuned_seq"] = sequence_schema("finetuned_seq", planner, envs.held_out, tasks, separator,
                                                    lazy_limit=max_tokens)
        job.log(f"fine-tuned, greedy lazy sequence {constrained['finetuned_seq'].overall:.4f}")
    free = {"finetuned_free": free_text_schema("finetuned_free", planner, envs.held_out, tasks, max_tokens)}
    job.log(f"fine-tuned, free text {free['finetuned_free'].result.overall:.4f} "
            f"(valid {free['finetuned_free'].valid_fraction:.2f})")

    def validation_score() -> dict[str, float]:  # what RLTF's trainer logs every rltf.eval_every steps
        r = stages.evaluate(job, ["rltf"], planner, envs, envs.splits["validation"], log=False)["rltf"]
        return {VALIDATION_SCORE: r.overall}

    periodic = PeriodicEval(cfg.rltf.eval_every, validation_score)
    t0 = time.perf_counter()
    trainer, reward = make_grpo_trainer(cfg, planner, envs.train, envs.splits["train"], job.run_dir / "grpo", grpo,
                                        reference_dir=start_dir, callbacks=[periodic], separator=separator)
    trainer.train()
    history = reward_history(trainer)
    job.log(f"GRPO ({grpo.sampling} sampling): {cfg.rltf.steps} steps in {time.perf_counter() - t0:.0f}s; train reward "
            f"{history[0]['reward']:.4f} -> {history[-1]['reward']:.4f}" if history else "GRPO: no steps")
    planner.model.eval()

    r = stages.evaluate(job, ["rltf"], planner, envs, tasks, log=False)["rltf"]
    constrained["grpo"] = dataclasses.replace(r, schema="grpo")
    job.log(f"grpo {constrained['grpo'].overall:.4f}")
    if separator is not None:
        constrained["grpo_seq"] = sequence_schema("grpo_seq", planner, envs.held_out, tasks, separator,
                                                   lazy_limit=max_tokens)
        job.log(f"grpo, greedy lazy sequence {constrained['grpo_seq'].overall:.4f}")
    free["grpo_free"] = free_text_schema("grpo_free", planner, envs.held_out, tasks, max_tokens)
    job.log(f"grpo, free text {free['grpo_free'].result.overall:.4f} (valid {free['grpo_free'].valid_fraction:.2f})")
    constrained |= stages.evaluate(job, {"reference", "oracle"} & set(cfg.eval.schemas), None, envs, tasks,
                                   log=False)
    planner.save_pretrained(job.run_dir / "grpo" / "planner")

    title = (f"held-out ({'+'.join(dict.fromkeys(cfg.eval.splits))}) tasks, GRPO run {cfg.run_name}, "
             f"seed {cfg.seed}, {cfg.rltf.steps} steps")
    table, md = comparison_table(constrained, free, tasks, title, envs.held_out)  # the env's own columns, if any
    summary = {"table": table, "grpo": dataclasses.asdict(grpo),
               "plans": {k: v.plans for k, v in constrained.items()} | {k: v.result.plans for k, v in free.items()},
               "scores": {k: v.scores for k, v in constrained.items()} | {k: v.result.scores for k, v in free.items()},
               "free_text": {k: v.texts for k, v in free.items()},
               "seconds": time.perf_counter() - job.started}
    job.run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(job.run_dir / "results.md", md)
    write_json(job.run_dir / "results.json", summary)
    write_json(job.run_dir / "grpo_history.json", {"log_history": trainer.state.log_history,
                                                   "reward_calls": [dataclasses.asdict(c) for c in reward.calls],
                                                   "evals": periodic.rows})
    write_json(job.run_dir / "train_history.json", training_curve(trainer, periodic.rows))
    rows = table["rows"]
    job.log("\n" + md)
    job.log(f"run folder: {job.run_dir}  ({summary['seconds']:.0f}s)")
    col = "overall" if "overall" in rows["grpo"] else "reward"  # travel's table: its metrics and the mean reward
    job.log(f"held-out {col}: finetuned={rows['finetuned'][col]:.4f} grpo={rows['grpo'][col]:.4f} "
            f"grpo_valid={rows['grpo_free']['valid']:.4f}")
    return summary


def _text_sft_data(cfg: RunConfig, tasks: list) -> tuple[list, object]:
    """The text warm start's tasks and its ``plan_text``: the tasks with a reference plan (a travel query the solver
    found no plan for is left out), ``sft.max_plans`` of them when set (the same k tasks as rltf's SFT stage:
    :func:`rltf.rl.sft.warm_start_tasks`), and the plan's text, what the env's parser reads (``str``:
    OpenAGI's canonical plan text, travel's solver plan JSON, a pddl plan's actions)."""
    solved = [t for t in tasks if t.reference_plan is not None and str(t.reference_plan)]
    return warm_start_tasks(solved, cfg.sft.max_plans, cfg.seed), lambda t: str(t.reference_plan)


def main(argv: list[str] | None = None) -> None:
    run_recipe(argv, parse_args, describe, run)


if __name__ == "__main__":
    from rltf.run.cli import run_cli

    run_cli(main)  # user-facing errors: one line on stderr, exit status 2
