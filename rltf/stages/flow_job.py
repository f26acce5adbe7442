"""The main job on an agent flow (``flow.enabled``): warm start on the solver's decisions -> RLTF on
the flow -> held-out evaluation of the flow, fine-tuned vs RL-trained vs the solver.

    accelerate launch train/rltf.py config=configs/travel-mtp.yaml
    accelerate launch train/rltf.py config=configs/travel-okr.yaml flow.credit=global

The stages, each a function (the envs, planner, SFT handoff and tracker are :mod:`rltf.stages.plan_job`'):

* :func:`warm_start` -- the flow of ``flow.methods[0]`` run on every train query with the solver
  answering each choice (:mod:`rltf.flows.training.teacher`); the planner is fine-tuned on those
  decisions under their choice grammars (``sft:`` epochs, lr, batch size), saved to ``<run>/sft``;
* :func:`train_flow` -- :class:`rltf.flows.training.trainer.FlowRLTFTrainer` (``rltf:`` hyperparameters,
  ``flow.credit``, ``flow.roles``), checkpointed and resumable like the flat trainer; with
  ``rltf.eval_every > 0`` the flow with greedy decisions is validated (:func:`flow_validation`:
  ``flow.validation_queries`` queries of the validation split; final pass, ties broken by the mean
  reward) at step 0 and every ``eval_every`` steps, and ``rltf.select: best_validation`` hands on
  the best step's planner (and says which);
* :func:`evaluate_flow` -- the flow with greedy decisions on the held-out queries (``flow.splits``,
  ``flow.limit``), scored by the evaluator; the solver's row beside it;
* :func:`report` -- ``flow_results.md`` / ``.json``, ``rltf_history.json``, ``rewards.png`` (the train
  reward, and the validation curve from step 0 with the selected step marked) and
  ``role_rewards.png`` (the reward credited to each role's decisions per step) in the run
  folder, the rltf row named after the selected step (``rltf (best validation, step 20)``); last
  line ``held-out final pass: finetuned=<x> rltf=<x> solver=<x>``.
"""

from __future__ import annotations

import functools
import json
import time
import warnings
from pathlib import Path
from typing import Any

from common.atomic import atomic_path, write_atomic
from constrained_decoding.prompts import PromptTruncationWarning
from rltf.algorithms.choice import draws_distinct_plans, objective_label
from rltf.config.loading import ConfigError, RunConfig
from rltf.evaluation.data_source import data_source, with_data_line
from rltf.flows.agents.domain import FlowDomain, check_methods, flow_domain_of
from rltf.flows.backends.base import Sampling
from rltf.flows.backends.planner import PlannerBackend
from rltf.flows.evaluate import describe_flows
from rltf.flows.evaluation import (
    evaluate_method,
    held_out_ids,
    select_queries,
    solver_row,
    table_markdown,
    validation_ids,
)
from rltf.flows.training.roles import RoleAdapters
from rltf.flows.training.teacher import DemonstrationGrammars, collect_demonstrations, plain_describe
from rltf.flows.training.trainer import FlowRLTFTrainer
from rltf.planners.source import SourceKind, resolve_planner_source
from rltf.rl.sft import supervised_finetune
from rltf.rl.training_state import VALIDATION_SCORE, VALIDATION_TIEBREAK
from rltf.run.tracking import plot_rewards, write_json
from rltf.stages import plan_job as stages

__all__ = ["check_flow_job", "describe_flow_job", "evaluate_flow", "flow_validation", "report", "run_flow_job",
           "train_flow", "warm_start"]

def check_flow_job(cfg: RunConfig, domain: FlowDomain | None = None) -> str:
    """The method the flow job trains; a clear error for settings it cannot train. With the env's flow
    ``domain`` (:func:`rltf.flows.agents.domain.flow_domain_of`) also that the domain offers the method,
    trainable, and that its settings train (without it, checked once the envs are built)."""
    flow = cfg.flow
    if len(flow.methods) != 1:
        raise ConfigError(f"bad value for 'flow.methods': {list(flow.methods)!r}; the main job trains one flow: "
                          "expected one method")
    if domain is not None:
        check_methods(domain, flow.methods, cfg.env.name, trainable=True)
    if flow.backend.kind != "planner":
        raise ConfigError(f"'flow.backend.kind' is {flow.backend.kind!r}: RLTF trains rltf's planner (kind: planner)")
    if draws_distinct_plans(cfg.rltf):
        raise ConfigError(f"'rltf.objective' {objective_label(cfg.rltf)!r} (rltf.baseline={cfg.rltf.baseline}) draws "
                          "distinct plans without replacement; a flow's trajectories are sampled decision by decision: "
                          "expected an objective that samples independently and another baseline than unordered_set")
    entry = domain.methods.lookup(flow.methods[0]) if domain is not None else None
    why = entry.untrainable(flow) if entry is not None else None
    if why:
        raise ConfigError(why)
    if flow.roles == "lora" and not cfg.planner.lora.enabled:
        raise ConfigError("'flow.roles: lora' puts one LoRA adapter per role on the planner: set "
                          "planner.lora.enabled=true")
    if flow.credit == "local+global" and entry is not None and not entry.local_credit:
        raise ConfigError(f"'flow.credit: local+global' needs decisions with local constraints (the "
                          f"{cfg.env.name} env's {', '.join(n for n, m in domain.methods.items() if m.local_credit)}), "
                          f"not {flow.methods[0]}; use flow.credit=global")
    return flow.methods[0]


def demonstrations(run: stages.Run, envs: stages.Envs, method: str, describe=plain_describe):
    """The solver's answer to every choice of ``method``'s flow on the train queries."""
    t0 = time.perf_counter()
    ids = select_queries([t.id for t in envs.splits["train"]], run.cfg.flow.warm_start_queries)
    demos, taught = collect_demonstrations(envs.train, ids, method, describe, run.cfg.flow)
    run.log(f"warm start: {len(demos)} decisions of {taught['queries']:.0f} train queries answered by the solver "
            f"(the taught {method} flow passes {taught['final_pass']:.2%} of them; {time.perf_counter() - t0:.1f}s)")
    return demos, taught


def describe_flow_job(cfg: RunConfig) -> str:
    """What the flow main job would do (``dry_run=true``); loads nothing."""
    method = check_flow_job(cfg)
    rl, sft, flow = cfg.rltf, cfg.sft, cfg.flow
    lines = [describe_flows(cfg, flow),
             "warm start  " + ("the solver answers every choice of " + method + " on "
                               + (f"{flow.warm_start_queries} (evenly spaced) of the" if flow.warm_start_queries
                                  else "the")
                               + " train queries; SFT " + str(sft.epochs) + " epoch(s), lr " + format(sft.lr, "g")
                               if sft.enabled else "none (sft.enabled=false)"),
             f"rltf        {rl.steps} steps x {rl.tasks_per_batch} queries x {rl.k_samples} sampled passes "
             f"(T={rl.temperature:g}), "
             f"lr {rl.lr:g}, baseline {rl.baseline}, credit {flow.credit}, roles {flow.roles}, re-scoring "
             + ("every decision in one forward" if flow.score_batch is None
                else f"{flow.score_batch} decisions per forward"),
             "validation  " + (f"the flow with greedy decisions on {flow.validation_queries or 'all'} validation "
                               f"queries at step 0 and every {rl.eval_every} steps (final pass, ties: reward); "
                               f"reports the {'best-on-validation' if rl.select == 'best_validation' else 'last'} "
                               "planner" if rl.eval_every else "none (rltf.eval_every=0); reports the last planner"),
             "held-out    the flow with greedy decisions: finetuned, rltf" + (", solver" if flow.oracle else "")]
    return "\n".join(lines)


def warm_start(run: stages.Run, planner, envs: stages.Envs, method: str, out_dir: Path, demos=None,
               taught=None) -> list[dict]:
    """Fine-tune ``planner`` on the solver's answers to every choice of ``method``'s flow on the
    train queries (see the module docstring; ``demos`` rendered as the planner backend renders
    them); saved to ``out_dir``."""
    cfg, acc = run.cfg, run.acc
    if demos is None:
        demos, taught = demonstrations(run, envs, method, PlannerBackend(planner).describe)
    demos = [d for d in demos if len(d.options) > 1]  # one option: log π = 0, nothing to fit
    history = supervised_finetune(planner, DemonstrationGrammars(), demos, epochs=cfg.sft.epochs, lr=cfg.sft.lr,
                                  batch_size=cfg.sft.batch_size, seed=cfg.seed, accelerator=acc,
                                  progress=cfg.logging.progress_bar, sharding=run.sharding,
                                  on_nonfinite=cfg.sft.on_nonfinite)
    weights = run.sharding.full_state_dict(planner.model)
    if acc.is_main_process:
        planner.save_pretrained(out_dir, state_dict=weights)
        write_json(run.run_dir / "sft_history.json", {"taught": taught, "decisions": len(demos), "epochs": history})
    acc.wait_for_everyone()
    return history


def train_flow(run: stages.Run, planner, envs: stages.Envs, roles=None) -> list[dict]:
    """RLTF on the flow (``cfg.rltf``, ``cfg.flow``), validated every ``rltf.eval_every`` steps from
    step 0 (:func:`flow_validation`), logged, checkpointed under ``<run>/rltf/``; ``resume=true``
    continues from the newest checkpoint. ``planner`` ends holding the weights ``rltf.select``
    picks (:attr:`stages.Run.selection` says which step). Returns the per-step history."""
    validate = flow_validation(run, envs, run.cfg.flow.methods[0], roles)  # called only with rltf.eval_every > 0
    return stages.run_trainer(run, lambda tracker: FlowRLTFTrainer(run.cfg, planner, envs.train, run.acc, tracker,
                                                                   validate, run.sharding, roles=roles))


def flow_validation(run: stages.Run, envs: stages.Envs, method: str, roles=None):
    """``validate(planner)`` for :class:`~rltf.rl.training_state.TrainingState`: ``method``'s flow
    with greedy decisions of the planner on the validation queries
    (:func:`~rltf.flows.evaluation.validation_ids`, chosen at the first call and fixed for the run),
    as ``{VALIDATION_SCORE: final pass, VALIDATION_TIEBREAK: mean reward}``. Every process runs it
    on every query (the flat job's way: the same weights and greedy decisions give every process the
    same score, so they agree on the best step and its collective checkpoint); no traces are written."""
    @functools.cache
    def ids() -> list[int]:
        return validation_ids(run.cfg, run.cfg.flow, envs.held_out)

    def validate(planner) -> dict[str, float]:
        with run.sharding.gathered(planner.model):
            row, _ = evaluate_method(method, envs.held_out, ids(), _greedy_backend(run, planner, roles), run.cfg.flow)
        return {VALIDATION_SCORE: row["final pass"], VALIDATION_TIEBREAK: row["reward"]}

    return validate


def _greedy_backend(run: stages.Run, planner, roles=None) -> PlannerBackend:
    """The planner backend with greedy decisions (per role's adapter with ``roles``)."""
    backend = PlannerBackend(planner, sampling=Sampling(max_new_tokens=run.cfg.flow.backend.max_new_tokens),
                             batch_size=run.cfg.flow.backend.batch_size)
    return roles.backend(backend) if roles is not None else backend


def evaluate_flow(run: stages.Run, planner, envs: stages.Envs, method: str, ids: list[int], name: str,
                  roles=None) -> tuple[dict[str, float], list[dict]]:
    """``method``'s flow with greedy decisions of ``planner`` on the held-out queries ``ids``."""
    with run.sharding.gathered(planner.model):
        row, records = evaluate_method(method, envs.held_out, ids, _greedy_backend(run, planner, roles), run.cfg.flow,
                                       trace_dir=run.run_dir / "traces" / name, progress=run.cfg.logging.progress_bar)
    run.log(f"{name}: {method} final pass {row['final pass']:.4f}, reward {row['reward']:.4f} "
            f"({row['seconds/query']:.2f} s per query)")
    return row, records


def report(run: stages.Run, rows: dict[str, dict[str, float]], records: dict[str, list[dict]], ids: list[int],
           method: str, history: list[dict] | None) -> dict[str, Any]:
    """The table, results, history and plots in the run folder; the last line. With an RLTF
    ``history`` the rltf row is named after the step :func:`train_flow` selected (the ``rltf`` key
    of the JSON and the last line keep their name; ``rltf_selection`` in ``flow_results.json``:
    that step, its score and the validation curve from step 0, as the flat job's report)."""
    cfg, acc = run.cfg, run.acc
    title = (f"{method} on {len(ids)} held-out ({'+'.join(cfg.flow.splits)}) queries, run {cfg.run_name}, "
             f"seed {cfg.seed}, credit {cfg.flow.credit}, roles {cfg.flow.roles}")
    selected = run.selection if history is not None else None
    data = data_source(cfg.env, run.envs.held_out if run.envs else None, cfg.flow.splits)  # database, queries
    md = with_data_line(table_markdown({selected.label if selected and name == "rltf" else name: r
                                        for name, r in rows.items()}, title), data)
    columns = list(next(iter(rows.values())))  # every row's (rltf.flows.evaluation.table_columns)
    summary = {"table": rows, "data": data, "columns": columns, "queries": ids, "method": method,
               "results": records, "seconds": time.perf_counter() - run.started}
    if selected is not None:
        summary["rltf_selection"] = {**selected.as_dict(), "validation": run.validation or []}
    if acc.is_main_process:
        run.run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run.run_dir / "flow_results.md", md)
        write_json(run.run_dir / "flow_results.json", summary)
        if history is not None:
            write_json(run.run_dir / "rltf_history.json", history)
            plot_rewards(history, run.run_dir / "rewards.png", title=f"RLTF {method} {cfg.run_name} (seed {cfg.seed})",
                         validation=run.validation, selected_step=selected.step if selected else None)
            plot_role_rewards(history, run.run_dir / "role_rewards.png",
                              title=f"reward credited per role, {method} ({cfg.flow.credit})")
    run.log("\n" + md)
    run.log(f"run folder: {run.run_dir}  ({summary['seconds']:.0f}s)")
    run.log("held-out final pass: " + " ".join(f"{k}={r['final pass']:.4f}" for k, r in rows.items()))
    return summary


def plot_role_rewards(history: list[dict], path: Path, title: str) -> Path:
    """PNG: per role, the mean reward credited to its decisions at each step (EMA 0.9)."""
    import matplotlib  # plotting only, at the end of a run (Agg backend set first)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # plotting only, at the end of a run (Agg backend set first)

    keys = sorted({k for r in history for k in r if k.startswith("role/") and k.endswith("/reward")})
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, key in enumerate(keys):
        pts = [(r["step"], r[key]) for r in history if key in r]
        xs, ys = zip(*pts)
        smooth, acc = [], None
        for y in ys:
            acc = y if acc is None else 0.9 * acc + 0.1 * y
            smooth.append(acc)
        ax.plot(xs, ys, alpha=0.25, color=f"C{i}")
        ax.plot(xs, smooth, color=f"C{i}", label=key.split("/")[1])
    ax.set_xlabel("RLTF step")
    ax.set_ylabel("credited reward")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if keys:
        ax.legend(loc="lower right")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    return Path(path)


def run_flow_job(cfg: RunConfig) -> dict[str, Any]:
    """The flow main job (see the module docstring). A flow's prompts (the query, then the options)
    are cut to ``planner.max_prompt_tokens`` by design, keeping their end: the run says so in one
    line instead of a raw :class:`PromptTruncationWarning` (as ``rltf.flows.evaluate`` filters it)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=PromptTruncationWarning)
        return _run_flow_job(cfg)


def _run_flow_job(cfg: RunConfig) -> dict[str, Any]:
    method = check_flow_job(cfg)
    job = stages.start(cfg)
    job.log(f"prompts longer than planner.max_prompt_tokens={cfg.planner.max_prompt_tokens} tokens keep their end "
            "(the options), as the flows are built to")
    envs = stages.build_envs(job)
    check_flow_job(cfg, flow_domain_of(envs.train, cfg.env.name))  # the env offers the method, trainable
    # the solver's decisions: the warm start's data, and (embedded planner) its tokenizer learns the flow's prompts
    demos, taught = demonstrations(job, envs, method)
    source = resolve_planner_source(cfg.planner.model)
    texts = sorted({d.description for d in demos}) if source.kind is SourceKind.EMBEDDED else []
    planner = stages.build_planner(job, envs, texts, source=source)
    if PlannerBackend(planner).use_chat_template:  # rendered otherwise than plain_describe: collect again
        demos, taught = demonstrations(job, envs, method, PlannerBackend(planner).describe)
    ids = held_out_ids(cfg, cfg.flow, envs.held_out)
    sft_dir = job.run_dir / "sft"
    rows: dict[str, dict[str, float]] = {}
    records: dict[str, list[dict]] = {}
    if cfg.sft.enabled:
        resumed = cfg.resume and (sft_dir / "rltf_planner.json").exists()
        if not resumed:
            warm_start(job, planner, envs, method, sft_dir, demos, taught)
        planner = stages.start_rltf_from_sft(job, planner, sft_dir, resumed=resumed)
    roles = None
    if cfg.flow.roles == "lora":  # on the warm-started planner: every role starts from it

        roles = RoleAdapters.attach(planner, flow_domain_of(envs.train).methods.lookup(method))
        job.log(f"per-role LoRA adapters: {', '.join(roles.names)}")
    label = "finetuned" if cfg.sft.enabled else "initial"
    rows[label], records[label] = evaluate_flow(job, planner, envs, method, ids, label, roles)
    history = train_flow(job, planner, envs, roles)
    rows["rltf"], records["rltf"] = evaluate_flow(job, planner, envs, method, ids, "rltf", roles)
    if cfg.flow.oracle:
        rows["solver"], records["solver"] = solver_row(envs.held_out, ids)
    return report(job, rows, records, ids, method, history)


def read_flow_results(run_dir: Path, arm) -> dict[str, Any]:
    """``flow_results.json`` for :mod:`rltf.comparison.results` (an arm's ``reader``): the table's rows, each
    row's per-query final pass (what the bootstrap resamples) and the run's seconds."""
    data = json.loads((Path(run_dir) / arm.results).read_text())
    passed = {name: {str(r["query"]): float(bool(r.get("final_pass"))) for r in recs}
              for name, recs in data["results"].items()}
    rewards = {name: {str(r["query"]): float(r.get("reward", 0.0)) for r in recs}
               for name, recs in data["results"].items()}
    return {"rows": data["table"], "scores": rewards, "seconds": data.get("seconds"),
            "task_values": {name: {"final pass": passed[name], "reward": rewards[name]} for name in passed}}
