"""The main job: config -> planner + env -> fine-tuning warm start -> RLTF -> held-out evaluation.

``train/rltf.py`` is a thin wrapper around :func:`run`. Each stage writes into the run folder
(``<output_dir>/<run_name>/``) and a resumed run (``resume=true``) reuses what earlier stages
finished: the zero/few-shot results, the fine-tuned planner, the newest RLTF checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import numpy as np
from accelerate import Accelerator
from accelerate.utils import set_seed

from envs.openagi.env import OpenAGIEnv
from envs.openagi.lite import build_lite_registry
from envs.openagi.split import load_split
from rltf import evaluate as ev
from rltf.config import RunConfig, config_to_yaml, save_config
from rltf.distributed import Sharding, shard_planner, sharding_for
from rltf.planner import Planner
from rltf.planner_loading import check_kl_reference, load_planner, merges_sft_adapter, rltf_start_planner
from rltf.sft import supervised_finetune
from rltf.tracking import Tracker, plot_rewards, write_json
from rltf.trainer import RLTFTrainer


def _log(acc: Accelerator, msg: str) -> None:
    if acc.is_main_process:
        print(msg, flush=True)


def make_envs(cfg: RunConfig, accelerator: Accelerator | None = None) -> tuple[OpenAGIEnv, OpenAGIEnv]:
    """(train env scoring plans on a seeded subset of samples, eval env scoring on all samples)."""
    cache = cfg.env.cache_mib * 2**20
    e = cfg.env
    if e.suite == "full":
        from envs.openagi.hf import HFBackend
        from envs.openagi.hf.suite import build_full_suite, register_hf_metrics, split_tasks
        from rltf.dry_run import check_env, hf_backend_config

        check_env(cfg)
        hf = hf_backend_config(cfg)
        if accelerator is not None and accelerator.device.type == "cuda" and (hf.device or "cuda") == "cuda":
            hf.device = str(accelerator.device)  # one GPU per process
        backend = HFBackend(hf)
        registry = backend.registry()
        register_hf_metrics(backend.scorer)
        first = accelerator.main_process_first() if accelerator is not None else contextlib.nullcontext()
        with first:  # the main process builds the data once; the others then read it from disk
            tasks = build_full_suite(e.data_dir, e.n_samples, e.data_seed, registry, sources=e.datasets,
                                     max_image_side=e.max_image_side)
        common = dict(suite="full", registry=registry)
        train = OpenAGIEnv(split="train", tasks=split_tasks(tasks)["train"], samples_per_step=e.samples_per_step,
                           cache_bytes=cache, **common)
        held_out = OpenAGIEnv(split="all", tasks=tasks, cache_bytes=cache, **common)
        return train, held_out
    if e.backend != "lite":
        raise ValueError(f"env.suite='lite' runs on the lite backend only, got env.backend={e.backend!r}")
    registry = build_lite_registry()
    common = dict(suite=e.suite, n_samples=e.n_samples, data_seed=e.data_seed, registry=registry)
    train = OpenAGIEnv(split="train", samples_per_step=e.samples_per_step, cache_bytes=cache, **common)
    held_out = OpenAGIEnv(split="all", cache_bytes=cache, **common)
    return train, held_out


def load_planner_for(cfg: RunConfig, acc: Accelerator, sharding: Sharding) -> Planner:
    """The configured planner on this process's device, sharded as launched (every process calls it)."""
    with acc.main_process_first():  # the embedded planner is built and saved once, by the main process
        planner = load_planner(cfg.planner)
    _place(planner, acc, sharding)
    return planner


def _place(planner: Planner, acc: Accelerator, sharding: Sharding) -> None:
    planner.model.to(acc.device)
    _log(acc, f"planner: {planner.source} ({planner.arch}, "
              f"{sum(p.numel() for p in planner.model.parameters()) / 1e6:.2f}M parameters, {sharding.kind})")
    shard_planner(planner.model, sharding)


def start_rltf_from_sft(cfg: RunConfig, acc: Accelerator, sharding: Sharding, planner: Planner, sft_dir: Path, *,
                        resumed: bool) -> Planner:
    """The SFT -> RLTF handoff of the main job (every process calls it, after the SFT stage).

    ``planner`` was fine-tuned in this run, or (``resumed``) still holds the weights from before
    SFT while ``sft_dir`` holds the fine-tuned planner. Returns the planner RLTF starts from, on
    this process's device and sharded as launched, such that the trainer's KL reference is
    exactly that policy: with LoRA the SFT adapter is merged into the base and a fresh adapter
    trains on top (:func:`rltf.planner.rltf_start_planner`, rebuilt from ``sft_dir``, the same
    planner as a run started from ``planner.model=<sft_dir>``); a full model (reference: the
    trainer's frozen copy) and a still-trained adapter keep the fine-tuned weights."""
    if merges_sft_adapter(cfg.planner):
        rltf_start_planner(planner, cfg.planner, sft_dir)  # releases the fine-tuned model first
        _place(planner, acc, sharding)
        _log(acc, f"RLTF starts from {sft_dir} with the SFT adapter merged into the base and a fresh adapter")
    elif resumed:
        sharding.load_full_state_dict(planner.model, Planner.from_pretrained(sft_dir).model.state_dict())
        _log(acc, f"fine-tuned planner reloaded from {sft_dir}")
    return planner


def run(cfg: RunConfig) -> dict:
    t_start = time.perf_counter()
    check_kl_reference(cfg.planner, sft=cfg.sft.enabled, kl_coef=cfg.rltf.kl_coef)  # before anything loads
    acc = Accelerator()
    sharding = sharding_for(acc)
    set_seed(cfg.seed)
    run_dir = cfg.run_dir
    if acc.is_main_process:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir / "config.yaml")
    _log(acc, f"run {cfg.run_name} -> {run_dir}  ({acc.num_processes} process(es), device {acc.device})")

    train_env, eval_env = make_envs(cfg, acc)
    split = load_split(cfg.env.suite)
    held = {s: [eval_env.get_task(i) for i in split[s]] for s in ("validation", "test")}
    eval_splits = list(dict.fromkeys(cfg.eval.splits))
    train_tasks = train_env.tasks()
    examples = [train_tasks[i] for i in np.random.default_rng(cfg.seed).permutation(len(train_tasks))[:cfg.eval.few_shot_k]]

    planner = load_planner_for(cfg, acc, sharding)

    def gathered():  # decoding needs every parameter (of planner.model now: the SFT->RLTF handoff replaces it)
        return sharding.gathered(planner.model)

    tracker = Tracker(cfg.logging.report_to, run_dir, cfg.run_name, json.loads(json.dumps(_plain(cfg))),
                      cfg.logging.wandb_project, enabled=acc.is_main_process)

    def tasks_of(splits):
        return [t for s in splits for t in (train_tasks if s == "train" else held[s])]

    eval_tasks = tasks_of(eval_splits)

    # -- zero-/few-shot: the planner before any training
    results: dict[str, ev.SchemaResult] = {}
    initial_file = run_dir / "eval_initial.json"
    want = set(cfg.eval.schemas)
    free_form = want & {"zero", "few"}
    if free_form and cfg.resume and initial_file.exists():
        for name, d in json.loads(initial_file.read_text()).items():
            results[name] = ev.SchemaResult(name, {int(k): v for k, v in d["plans"].items()},
                                            {int(k): v for k, v in d["scores"].items()})
    elif free_form:
        with gathered():
            free = {k: ev.free_form_schema(k, planner, eval_env, eval_tasks, [] if k == "zero" else examples,
                                           cfg.planner.max_plan_tokens) for k in ("zero", "few") if k in want}
        results.update(free)
        if acc.is_main_process:
            write_json(initial_file, {k: {"plans": v.plans, "scores": v.scores} for k, v in results.items()})
    for k in ("zero", "few"):
        if k in results:
            _log(acc, f"{k}-shot {results[k].overall:.4f}")

    # -- supervised warm start on the reference plans of the train tasks
    sft_dir = run_dir / "sft"
    if cfg.sft.enabled:
        resumed = cfg.resume and (sft_dir / "rltf_planner.json").exists()
        if not resumed:
            hist = supervised_finetune(planner, train_env, train_tasks, epochs=cfg.sft.epochs, lr=cfg.sft.lr,
                                       batch_size=cfg.sft.batch_size, seed=cfg.seed, accelerator=acc,
                                       progress=cfg.logging.progress_bar, sharding=sharding)
            weights = sharding.full_state_dict(planner.model)  # every process takes part when sharded
            if acc.is_main_process:
                planner.save_pretrained(sft_dir, state_dict=weights)
                write_json(run_dir / "sft_history.json", hist)
            acc.wait_for_everyone()
        # the policy RLTF starts from and its KL reference (also what "finetuned" evaluates)
        planner = start_rltf_from_sft(cfg, acc, sharding, planner, sft_dir, resumed=resumed)
    if "finetuned" in want:
        with gathered():
            results["finetuned"] = ev.constrained_schema("finetuned", planner, eval_env, eval_tasks,
                                                         cfg.eval.num_beams)
        _log(acc, f"fine-tuned {results['finetuned'].overall:.4f}")

    # -- RLTF
    def periodic_eval(p: Planner) -> dict[str, float]:
        with gathered():
            r = ev.constrained_schema("rltf", p, eval_env, held["validation"], cfg.eval.num_beams)
        return {"eval/validation/score": r.overall}

    trainer = RLTFTrainer(cfg, planner, train_env, acc, tracker, periodic_eval, sharding)
    if cfg.resume and trainer.resume():
        _log(acc, f"resumed RLTF at step {trainer.step}")
    history = trainer.train()
    if "rltf" in want:
        with gathered():
            results["rltf"] = ev.constrained_schema("rltf", planner, eval_env, eval_tasks, cfg.eval.num_beams)

    # -- bounds and the table
    if "reference" in want:
        results["reference"] = ev.reference_schema(eval_env, eval_tasks)
    if "oracle" in want:
        results["oracle"] = ev.oracle_schema(eval_env, eval_tasks)
    ordered = [results[s] for s in ev.SCHEMAS if s in results]
    table = ev.results_table(ordered, eval_tasks)
    title = f"held-out ({'+'.join(eval_splits)}) tasks, run {cfg.run_name}, seed {cfg.seed}"
    md = ev.table_markdown(table, title)
    summary = {"table": table, "plans": {r.schema: r.plans for r in ordered},
               "scores": {r.schema: r.scores for r in ordered},
               "seconds": time.perf_counter() - t_start}
    if acc.is_main_process:
        (run_dir / "results.md").write_text(md)
        write_json(run_dir / "results.json", summary)
        write_json(run_dir / "rltf_history.json", history)
        plot_rewards(history, run_dir / "rewards.png", title=f"RLTF {cfg.run_name} (seed {cfg.seed})")
    tracker.finish()
    o = table["rows"]
    _log(acc, "\n" + md)
    _log(acc, f"run folder: {run_dir}  ({summary['seconds']:.0f}s)")
    _log(acc, "held-out overall: " + " ".join(
        f"{s}={o[s]['overall']:.4f}" for s in ("zero", "few", "finetuned", "rltf", "oracle") if s in o))
    return summary


def _plain(cfg: RunConfig) -> dict:
    import yaml

    return yaml.safe_load(config_to_yaml(cfg))


def dry_run(cfg: RunConfig) -> None:
    """Validate the config and print what a run would load, loading nothing heavy."""
    from rltf.dry_run import describe_run

    check_kl_reference(cfg.planner, sft=cfg.sft.enabled, kl_coef=cfg.rltf.kl_coef)
    print(describe_run(cfg))
