"""Comparisons of training recipes over seeds (issue #15): run, read back, aggregate, tabulate, plot.

A **suite** (``configs/compare/<name>.yaml``, or any YAML file) is data, not code:

* ``arms``: the runs, each a ``name``, an entry-point ``script`` (``train/rltf.py``,
  ``train/grpo.py``, ...) and its ``overrides`` (``key=value`` arguments); optionally the
  ``results`` file it writes (``results.json``), its per-step ``history`` file
  (``rltf_history.json``; null: none), the history keys of the train reward / valid-plan rate /
  periodic held-out score, the config keys whose product is the number of plans sampled per step,
  the ``loader`` that checks its arguments (``module:function``, default
  ``rltf.config.loading:load_config``), ``seeds`` (run only the first n seeds: a deterministic arm,
  e.g. the reference plans and the oracle, needs one) and a ``reader`` (``module:function``, ``reader(run_dir, arm)``
  -> ``{"rows": {schema: {column: value}}, "scores": {schema: {task: score}}, "seconds": s}``,
  optionally ``"task_values": {schema: {column: {task: value}}}`` for an interval on another column)
  for an entry point whose results file is not the ``{"table": {"rows": ...}, "scores": ...}``
  of ``rltf.stages.plan_job.report``;
* ``rows``: the comparison table's lines, each a ``label``, the ``arm`` it comes from and the
  ``schema`` (row of that arm's results table) and ``column`` (``overall``) it reads; ``trained``
  marks the arm's trained policy (it gets the train reward vs plans sampled, the training
  valid-plan rate, the wall time and a curve in the plot); ``valid`` is the held-out valid-plan
  rate when the results table has no ``valid`` column (1.0 for constrained decoding);
* ``common``: overrides for every arm; ``seeds``: how many (seeds ``0 .. seeds-1``);
* ``metrics``: optional further columns of the arms' results tables (e.g. every metric of the
  travel evaluator) tabulated for every row, mean ± std over seeds, in a second table.

:func:`run_suite` runs every arm for every seed, one subprocess each (``python <script>
<common> <overrides> <extra> seed=<k> output_dir=<root>/<arm> run_name=seed<k> overwrite=true``),
into ``<output_dir>/<name>/<arm>/seed<k>/`` with its log beside it (``seed<k>.log``) and
``seed<k>.run.json`` (the arguments, wall time, exit status). It is resumable: a run whose results
file exists is not run again (its recorded arguments must be the same: a changed suite refuses
rather than mixing runs). Seeds go in the outer loop, so an interrupted comparison has every arm
for the first seeds. A failed run is reported and the others go on.

:func:`aggregate` reads every finished run back: per row the value of each seed, mean ± std over
seeds (std with ddof=1), the bootstrap interval over tasks of the seed-averaged per-task scores
(:func:`rltf.evaluation.schemas.bootstrap_interval`), the valid-plan rates, the train reward against the
number of plans sampled (first and last tenth of training) and the wall time; per trained arm the
curves (periodic held-out score and train reward vs plans sampled, mean and std over seeds).
:func:`write_report` writes ``compare.md``, ``compare.json`` and ``compare.png``.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rltf.config.loading import CONFIG_DIR, REPO_ROOT, ConfigError
from rltf.evaluation.schemas import BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, bootstrap_interval, format_interval

SUITE_DIR = CONFIG_DIR / "compare"


def _print(msg: str) -> None:
    print(msg, flush=True)


# ------------------------------------------------------------------------------------ the suite
@dataclass(frozen=True)
class Arm:
    """One recipe of a comparison: an entry point and its arguments (run once per seed)."""

    name: str
    script: str
    overrides: tuple[str, ...] = ()
    results: str = "results.json"
    history: str | None = "rltf_history.json"
    reward_key: str = "train/reward"
    valid_key: str = "train/valid"
    score_key: str = "eval/validation/score"  # the periodic held-out score (RLTF's rltf.eval_every)
    plans_per_step: tuple[str, ...] = ("rltf.tasks_per_batch", "rltf.k_samples")  # config keys, multiplied
    loader: str = "rltf.config.loading:load_config"
    reader: str | None = None
    seeds: int | None = None  # run only seeds below this (e.g. 1 for a deterministic arm); None: every seed

    def command(self, common: Sequence[str], extra: Sequence[str], seed: int, arm_dir: Path) -> list[str]:
        """The arguments after the interpreter (the run folder is ``arm_dir/seed<k>``)."""
        return [self.script, *common, *self.overrides, *extra, f"seed={seed}", f"output_dir={arm_dir}",
                f"run_name=seed{seed}", "overwrite=true"]


@dataclass(frozen=True)
class Row:
    """One line of the comparison table: ``schema``'s ``column`` in ``arm``'s results."""

    label: str
    arm: str
    schema: str
    column: str = "overall"
    trained: bool = False
    valid: float | None = None


@dataclass(frozen=True)
class Suite:
    name: str
    arms: tuple[Arm, ...]
    rows: tuple[Row, ...]
    seeds: int = 3
    common: tuple[str, ...] = ()
    description: str = ""
    metrics: tuple[str, ...] = ()

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)


def _build(cls, data: Any, where: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {data!r}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(names)}")
    missing = [n for n, f in names.items() if f.default is dataclasses.MISSING and
               f.default_factory is dataclasses.MISSING and n not in data]
    if missing:
        raise ConfigError(f"{where}: missing key(s) {', '.join(missing)}")
    kw = {k: tuple(str(x) for x in v) if isinstance(v, list) else v for k, v in data.items()}
    return cls(**kw)


def suite_from_dict(data: dict, where: str = "suite") -> Suite:
    """A :class:`Suite` from its YAML mapping, checked: known keys, unique arm names, rows naming
    arms of the suite, at least one seed."""
    data = dict(data)
    arms = tuple(_build(Arm, a, f"{where}: arms[{i}]") for i, a in enumerate(data.pop("arms", None) or []))
    rows = tuple(_build(Row, r, f"{where}: rows[{i}]") for i, r in enumerate(data.pop("rows", None) or []))
    suite = _build(Suite, {**data, "arms": [], "rows": []}, where)
    suite = dataclasses.replace(suite, arms=arms, rows=rows)
    names = [a.name for a in arms]
    if not arms:
        raise ConfigError(f"{where}: no arms")
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: arm names repeat: {names}")
    bad = [r.label for r in rows if r.arm not in names]
    if bad:
        raise ConfigError(f"{where}: rows {bad} name an arm that is not in the suite ({', '.join(names)})")
    if not isinstance(suite.seeds, int) or suite.seeds < 1:
        raise ConfigError(f"{where}: seeds={suite.seeds!r}: expected a positive integer")
    return suite


def suite_path(name: str | os.PathLike) -> Path:
    """A suite by name (``configs/compare/<name>.yaml``) or as a YAML file."""
    p = Path(name).expanduser()
    for c in (p, REPO_ROOT / p, SUITE_DIR / p, SUITE_DIR / f"{p}.yaml"):
        if c.is_file():
            return c
    known = sorted(x.stem for x in SUITE_DIR.glob("*.yaml"))
    raise ConfigError(f"suite={name}: no such suite; known suites: {', '.join(known) or 'none'} "
                      f"(configs/compare/<name>.yaml), or pass a YAML file")


def load_suite(name: str | os.PathLike) -> Suite:
    path = suite_path(name)
    data = yaml.safe_load(path.read_text())
    return suite_from_dict(data, str(path))


def resolve(spec: str) -> Callable:
    """``module:function`` -> the function."""
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{spec!r}: cannot import ({e}); expected module:function") from None


def check_arms(suite: Suite, extra: Sequence[str] = (), arms: Sequence[str] | None = None) -> dict[str, Any]:
    """Every arm's arguments through its ``loader`` (what its entry point parses them with),
    before anything runs: a bad key fails here naming the arm. Returns the loaded configs."""
    loaded = {}
    for arm in suite.arms:
        if arms is not None and arm.name not in arms:
            continue
        args = [*suite.common, *arm.overrides, *extra, "seed=0"]
        try:
            loaded[arm.name] = resolve(arm.loader)(args)
        except ConfigError as e:
            raise ConfigError(f"arm {arm.name} ({arm.script} {' '.join(args)}): {e}") from None
    return loaded


# --------------------------------------------------------------------------------------- running
@dataclass
class RunRecord:
    """One (arm, seed) run: where it is and how it went."""

    arm: str
    seed: int
    run_dir: str
    status: str  # done | reused | failed | missing
    wall_s: float | None = None
    returncode: int | None = None
    error: str | None = None
    cpu_s: float | None = None  # user + system CPU seconds of the run's processes (fairer on a shared machine)


def dir_arg(path: Path) -> Path:
    """A folder as an argument of a run started in the repository: relative to it when inside it
    (the recorded arguments then survive moving the checkout)."""
    path = Path(path)
    try:
        return path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        return path


def _run_file(arm_dir: Path, seed: int) -> Path:
    return arm_dir / f"seed{seed}.run.json"


def run_one(suite: Suite, arm: Arm, seed: int, root: Path, extra: Sequence[str] = (), *,
            python: str = sys.executable, log: Callable[[str], None] = _print,
            env: dict[str, str] | None = None) -> RunRecord:
    """Run ``arm`` for ``seed`` into ``root/<arm>/seed<seed>`` unless its results file is there."""
    arm_dir = root / arm.name
    run_dir = arm_dir / f"seed{seed}"
    args = arm.command(suite.common, extra, seed, dir_arg(arm_dir))
    record_file = _run_file(arm_dir, seed)
    if (run_dir / arm.results).is_file():
        recorded = json.loads(record_file.read_text()) if record_file.is_file() else None
        if recorded is not None and recorded.get("args") != args:
            raise ConfigError(
                f"{run_dir} was run with other arguments ({' '.join(recorded.get('args') or [])}) than the suite "
                f"now gives ({' '.join(args)}); compare under another name=..., or delete {run_dir} to rerun it")
        log(f"[{arm.name} seed {seed}] done already: {run_dir / arm.results}")
        return RunRecord(arm.name, seed, str(run_dir), "reused",
                         wall_s=recorded.get("wall_s") if recorded else None,
                         returncode=recorded.get("returncode") if recorded else None,
                         cpu_s=recorded.get("cpu_s") if recorded else None)
    arm_dir.mkdir(parents=True, exist_ok=True)
    log_file = arm_dir / f"seed{seed}.log"
    log(f"[{arm.name} seed {seed}] {python} {' '.join(args)}  (log: {log_file})")
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log_file, "w") as out:
        proc = subprocess.run([python, *args], cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, **(env or {})})
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    ok = proc.returncode == 0 and (run_dir / arm.results).is_file()
    record = RunRecord(arm.name, seed, str(run_dir), "done" if ok else "failed", wall, proc.returncode, cpu_s=cpu)
    if not ok:
        tail = log_file.read_text(errors="replace").strip().splitlines()[-5:]
        record.error = " | ".join(tail) or f"exit status {proc.returncode}"
        log(f"[{arm.name} seed {seed}] FAILED (exit {proc.returncode}, {wall:.0f}s): {record.error}")
    else:
        log(f"[{arm.name} seed {seed}] done in {wall:.0f}s ({cpu:.0f} CPU s)")
    record_file.write_text(json.dumps({"args": args, "wall_s": wall, "cpu_s": cpu, "returncode": proc.returncode},
                                      indent=1))
    return record


def run_suite(suite: Suite, root: Path, extra: Sequence[str] = (), *, seeds: Sequence[int] | None = None,
              arms: Sequence[str] | None = None, log: Callable[[str], None] = _print,
              env: dict[str, str] | None = None) -> list[RunRecord]:
    """Every (seed, arm) run, seeds in the outer loop; runs whose results exist are reused."""
    seeds = list(range(suite.seeds)) if seeds is None else list(seeds)
    chosen = [a for a in suite.arms if arms is None or a.name in arms]
    return [run_one(suite, a, s, root, extra, log=log, env=env) for s in seeds for a in chosen
            if a.seeds is None or s < a.seeds]


# ---------------------------------------------------------------------------------- reading back
def read_table_results(run_dir: Path, arm: Arm) -> dict:
    """The results file of ``rltf.stages.plan_job.report`` / ``train/grpo.py``: rows, per-task scores, seconds."""
    data = json.loads((run_dir / arm.results).read_text())
    return {"rows": data["table"]["rows"], "scores": data.get("scores", {}), "seconds": data.get("seconds"),
            "intervals": data["table"].get("intervals", {})}


def _config_value(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = node[part]
    return node


def plans_per_step(run_dir: Path, arm: Arm) -> int | None:
    """Plans sampled per training step: the product of the arm's ``plans_per_step`` keys in the
    run's resolved ``config.yaml`` (None without one)."""
    path = run_dir / "config.yaml"
    if not path.is_file() or not arm.plans_per_step:
        return None
    cfg = yaml.safe_load(path.read_text())
    try:
        return int(np.prod([_config_value(cfg, k) for k in arm.plans_per_step]))
    except (KeyError, TypeError):
        return None


def read_history(run_dir: Path, arm: Arm) -> list[dict]:
    if arm.history is None or not (run_dir / arm.history).is_file():
        return []
    data = json.loads((run_dir / arm.history).read_text())
    return data if isinstance(data, list) else []


@dataclass
class SeedRun:
    seed: int
    run_dir: Path
    results: dict
    history: list[dict]
    plans_per_step: int | None
    wall_s: float | None
    cpu_s: float | None = None


def read_runs(suite: Suite, root: Path, seeds: Sequence[int] | None = None) -> dict[str, list[SeedRun]]:
    """Every finished (arm, seed) run under ``root`` (a run counts when its results file exists)."""
    seeds = list(range(suite.seeds)) if seeds is None else list(seeds)
    out: dict[str, list[SeedRun]] = {}
    for arm in suite.arms:
        reader = resolve(arm.reader) if arm.reader else read_table_results
        runs = []
        for s in seeds:
            run_dir = root / arm.name / f"seed{s}"
            if not (run_dir / arm.results).is_file():
                continue
            results = reader(run_dir, arm)
            rec = _run_file(root / arm.name, s)
            recorded = json.loads(rec.read_text()) if rec.is_file() else {}
            wall = recorded.get("wall_s")
            if wall is None:  # not run by the comparison: the run's own time (from its start stage)
                wall = results.get("seconds")
            runs.append(SeedRun(s, run_dir, results, read_history(run_dir, arm), plans_per_step(run_dir, arm), wall,
                                recorded.get("cpu_s")))
        out[arm.name] = runs
    return out


# ----------------------------------------------------------------------------------- aggregating
def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample std (ddof=1; 0 for one value) — nan for none."""
    x = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if x.size == 0:
        return float("nan"), float("nan")
    return float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else 0.0


def _curve(runs: Sequence[SeedRun], key: str) -> dict | None:
    """``key`` against plans sampled: per step present in every seed's history, mean and std over
    seeds; plus each seed's own points."""
    per_seed = []
    for r in runs:
        pts = {int(h["step"]): float(h[key]) for h in r.history if key in h and h[key] is not None}
        if pts and r.plans_per_step:
            per_seed.append((r, pts))
    if not per_seed:
        return None
    steps = sorted(set.intersection(*(set(p) for _, p in per_seed)))
    pps = per_seed[0][0].plans_per_step
    stats = [mean_std([p[s] for _, p in per_seed]) for s in steps]
    return {"key": key, "steps": steps, "plans": [s * pps for s in steps], "mean": [m for m, _ in stats],
            "std": [sd for _, sd in stats], "seeds": {str(r.seed): {"plans": [s * r.plans_per_step for s in sorted(p)],
                                                                      "values": [p[s] for s in sorted(p)]}
                                                      for r, p in per_seed}}


def _task_values(results: dict, row: Row) -> dict:
    """Per-task values of ``row``'s column: a reader's ``task_values[schema][column]`` when it gives
    them (e.g. travel's final pass per query), else the per-task ``scores`` for the ``overall`` /
    ``reward`` column (their mean); none otherwise (no interval)."""
    given = results.get("task_values", {}).get(row.schema, {}).get(row.column)
    if given is not None:
        return given
    return results.get("scores", {}).get(row.schema, {}) if row.column in ("overall", "reward") else {}


def _task_key(task: str) -> tuple:
    """Task ids in their natural order (``"2"`` before ``"10"``): the bootstrap resamples by position."""
    return (0, int(task), "") if task.lstrip("-").isdigit() else (1, 0, task)


def _window_means(curve: dict | None, fraction: float = 0.1) -> tuple[float | None, float | None, int | None]:
    """The curve's mean over its first and last ``fraction`` of steps (at least one step each)."""
    if not curve or not curve["mean"]:
        return None, None, None
    n = max(1, int(round(len(curve["mean"]) * fraction)))
    return float(np.mean(curve["mean"][:n])), float(np.mean(curve["mean"][-n:])), n


def aggregate(suite: Suite, runs: dict[str, list[SeedRun]], seeds: Sequence[int] | None = None) -> dict:
    """The comparison: one entry per row (values per seed, mean ± std, bootstrap interval over tasks
    of the seed-averaged per-task scores, valid-plan rates, train reward vs plans sampled, wall
    time) and the trained arms' curves."""
    rows, curves = [], {}
    for arm in suite.arms:
        ar = runs.get(arm.name, [])
        if any(r.trained and r.arm == arm.name for r in suite.rows):
            curves[arm.name] = {"score": _curve(ar, arm.score_key), "reward": _curve(ar, arm.reward_key),
                                "valid": _curve(ar, arm.valid_key)}
    for row in suite.rows:
        arm = suite.arm(row.arm)
        ar = [r for r in runs.get(row.arm, []) if row.schema in r.results["rows"]]
        values = {r.seed: float(r.results["rows"][row.schema][row.column]) for r in ar}
        mean, std = mean_std(list(values.values()))
        # per task: the mean over the seeds that scored it; the interval is over tasks
        by_task: dict[str, list[float]] = {}
        for r in ar:
            for task, score in _task_values(r.results, row).items():
                by_task.setdefault(str(task), []).append(float(score))
        pooled = [float(np.mean(v)) for _, v in sorted(by_task.items(), key=lambda kv: _task_key(kv[0]))]
        interval = list(bootstrap_interval(pooled)) if pooled else None
        valid_held_out = mean_std([r.results["rows"][row.schema].get("valid", row.valid) for r in ar])[0] \
            if ar else None
        if valid_held_out is not None and math.isnan(valid_held_out):
            valid_held_out = None
        entry: dict[str, Any] = {
            "label": row.label, "arm": row.arm, "schema": row.schema, "column": row.column, "trained": row.trained,
            "n_seeds": len(values), "values": {str(k): v for k, v in sorted(values.items())}, "mean": mean,
            "std": std, "n_tasks": len(pooled), "interval": interval,
            "seed_intervals": {str(r.seed): r.results.get("intervals", {}).get(row.schema) for r in ar},
            "valid_held_out": valid_held_out,
            "metrics": {m: dict(zip(("mean", "std"), mean_std(vals))) | {"n_seeds": len(vals)}
                        for m in suite.metrics
                        if (vals := [float(r.results["rows"][row.schema][m]) for r in ar
                                     if m in r.results["rows"][row.schema]])}}
        if row.trained:
            c = curves.get(row.arm, {})
            first, last, n = _window_means(c.get("reward"))
            steps = [len([h for h in r.history if arm.reward_key in h]) for r in ar]
            entry |= {"train_reward_first": first, "train_reward_last": last, "train_reward_window_steps": n,
                      "plans_sampled": int(max(steps) * (ar[0].plans_per_step or 0)) if ar and steps else None,
                      "valid_train": mean_std([float(np.mean([h[arm.valid_key] for h in r.history
                                                              if arm.valid_key in h]))
                                               for r in ar if any(arm.valid_key in h for h in r.history)])[0],
                      "wall_s": dict(zip(("mean", "std"), mean_std([r.wall_s for r in ar]))),
                      "cpu_s": dict(zip(("mean", "std"), mean_std([r.cpu_s for r in ar])))}
            if entry["valid_train"] is not None and math.isnan(entry["valid_train"]):
                entry["valid_train"] = None
        rows.append(entry)
    seeds = list(range(suite.seeds)) if seeds is None else list(seeds)
    return {"suite": suite.name, "description": suite.description, "seeds": seeds, "metrics": list(suite.metrics),
            "interval": {"level": BOOTSTRAP_LEVEL, "resamples": BOOTSTRAP_RESAMPLES,
                         "over": "tasks, per-task scores averaged over seeds"},
            "runs": {a: [{"seed": r.seed, "run_dir": str(r.run_dir), "wall_s": r.wall_s, "cpu_s": r.cpu_s,
                          "plans_per_step": r.plans_per_step} for r in rs] for a, rs in runs.items()},
            "rows": rows, "curves": curves}


# -------------------------------------------------------------------------------------- report
def _f(v: float | None, fmt: str = ".4f") -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def comparison_markdown(summary: dict, records: Sequence[RunRecord] = ()) -> str:
    """``compare.md``: the table (one line per row) and what each column is."""
    n = len(summary["seeds"])
    lines = [f"### Comparison `{summary['suite']}`", ""]
    if summary.get("description"):
        lines += [summary["description"].strip(), ""]
    lines += ["| | held-out score (mean ± std over seeds) | 95% bootstrap interval (tasks) | per seed | "
              "valid plans: held-out / training samples | train reward: first → last 10% of steps | "
              "plans sampled | wall time (s) | CPU time (s) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in summary["rows"]:
        if not r["n_seeds"]:
            lines.append(f"| {r['label']} | not run | | | | | | | |")
            continue
        seeds = " / ".join(f"{v:.4f}" for v in r["values"].values())
        score = f"{r['mean']:.4f} ± {r['std']:.4f} (n={r['n_seeds']})" if r["n_seeds"] > 1 else f"{r['mean']:.4f} (n=1)"
        interval = format_interval(r["mean"], r["interval"]).split(" ", 1)[1] if r["interval"] else "—"
        valid = f"{_f(r['valid_held_out'], '.2f')} / {_f(r.get('valid_train'), '.2f') if r['trained'] else '—'}"
        if r["trained"]:
            reward = f"{_f(r['train_reward_first'], '.3f')} → {_f(r['train_reward_last'], '.3f')}"
            plans = _f(r["plans_sampled"], "d") if r["plans_sampled"] is not None else "—"
            wall, cpu = (f"{t['mean']:.0f} ± {t['std']:.0f}" if not math.isnan(t["mean"]) else "—"
                         for t in (r["wall_s"], r["cpu_s"]))
        else:
            reward = plans = wall = cpu = "—"
        cells = [r["label"], score, interval, seeds, valid, reward, plans, wall, cpu]
        lines.append("| " + " | ".join(cells) + " |")
    n_tasks = max((r["n_tasks"] for r in summary["rows"]), default=0)
    lines += ["", f"Held-out score: each seed's overall score on its {n_tasks} held-out tasks, mean ± std "
                  f"(ddof=1) over seeds (of {n}); interval: 95% percentile bootstrap over tasks "
                  f"({BOOTSTRAP_RESAMPLES} resamples) of the per-task scores averaged over seeds. Wall and CPU "
                  "(user + system) time: the whole run (warm start, training, evaluations), per seed."]
    if summary.get("metrics"):
        lines += ["", "Every metric (mean ± std over seeds; — where an arm's results have no such column):", "",
                  "| | " + " | ".join(summary["metrics"]) + " |", "|---|" + "---|" * len(summary["metrics"])]
        for r in summary["rows"]:
            cells = [(f"{m['mean']:.4f} ± {m['std']:.4f}" if m["n_seeds"] > 1 else f"{m['mean']:.4f}")
                     if (m := r.get("metrics", {}).get(name)) else "—" for name in summary["metrics"]]
            lines.append(f"| {r['label']} | " + " | ".join(cells) + " |")
    failed = [r for r in records if r.status == "failed"]
    if failed:
        lines += ["", "Failed runs: " + "; ".join(f"{r.arm} seed {r.seed} ({r.error})" for r in failed)]
    return "\n".join(lines) + "\n"


def rolling_mean(values: Sequence[float], fraction: float = 0.1) -> np.ndarray:
    """The centred mean over a window of ``fraction`` of the points (shorter at the ends): unlike an
    EMA started at the first value, the first points do not carry one noisy batch's weight."""
    v = np.asarray(values, dtype=np.float64)
    half = max(1, int(len(v) * fraction)) // 2
    return np.array([v[max(0, i - half): i + half + 1].mean() for i in range(len(v))])


def plot_comparison(summary: dict, labels: dict[str, str], path: Path) -> Path | None:
    """``compare.png``: the periodic held-out score (left) and the train reward (right) against the
    number of plans sampled, mean over seeds with a ±std band, one line per trained arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = {a: c for a, c in summary["curves"].items() if c.get("score") or c.get("reward")}
    if not curves:
        return None
    # the held-out panel only when some arm evaluated periodically (the flow arms do not)
    keys = [k for k in ("score", "reward") if any(c.get(k) for c in curves.values())]
    fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4.5), squeeze=False)
    axes = dict(zip(keys, axes[0]))
    for i, (arm, c) in enumerate(curves.items()):
        color, style = f"C{i}", ("-", "--", "-.", ":")[i % 4]  # styles: arms whose curves overlap stay visible
        for key, ax in axes.items():
            cur = c.get(key)
            if not cur:
                continue
            x, m, s = np.array(cur["plans"]), np.array(cur["mean"]), np.array(cur["std"])
            if key == "reward" and len(m) > 1:  # batch rewards are noisy: a centred rolling mean
                ax.plot(x, m, color=color, alpha=0.2)
                m, s = rolling_mean(m), rolling_mean(s)
            ax.plot(x, m, ("o" if key == "score" else "") + style, color=color, ms=3,
                    label=f"{labels.get(arm, arm)} (n={len(cur['seeds'])})")
            ax.fill_between(x, m - s, m + s, color=color, alpha=0.12)
    if "score" in axes:
        axes["score"].set_title("held-out (validation) score vs plans sampled")
        axes["score"].set_ylabel("score (constrained beam search)")
    if "reward" in axes:
        axes["reward"].set_title("train reward vs plans sampled (rolling mean over 10% of steps)")
        axes["reward"].set_ylabel("train reward (seed mean)")
    for ax in axes.values():
        ax.set_xlabel("plans sampled")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.suptitle(f"{summary['suite']}: mean ± std over seeds")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_report(suite: Suite, root: Path, records: Sequence[RunRecord] = (), seeds: Sequence[int] | None = None,
                 log: Callable[[str], None] = _print) -> dict:
    """Read every finished run under ``root``, aggregate, write ``compare.md`` / ``compare.json`` /
    ``compare.png`` there; prints the table. Returns the summary."""
    summary = aggregate(suite, read_runs(suite, root, seeds), seeds)
    summary["failed"] = [dataclasses.asdict(r) for r in records if r.status == "failed"]
    root.mkdir(parents=True, exist_ok=True)
    md = comparison_markdown(summary, records)
    (root / "compare.md").write_text(md)
    labels = {r.arm: r.label for r in suite.rows if r.trained}
    png = plot_comparison(summary, labels, root / "compare.png")
    summary["plot"] = str(png) if png else None
    (root / "compare.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    log("\n" + md)
    log(f"comparison folder: {root}" + (f"  (plot: {png.name})" if png else ""))
    return summary


__all__ = ["Arm", "Row", "Suite", "RunRecord", "SeedRun", "aggregate", "check_arms", "comparison_markdown",
           "load_suite", "mean_std", "plot_comparison", "read_runs", "read_table_results", "run_one", "run_suite",
           "suite_from_dict", "write_report"]
