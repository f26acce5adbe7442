"""A comparison's report: ``compare.md`` (the table, the held-out set, the paired differences
against the reference arm), ``compare.png`` (the curves: :mod:`rltf.comparison.plots`, against
plans sampled and CPU seconds), ``compare.json`` (all of it, with every row's per-task scores per
seed).

:func:`write_report` reads every finished run back (:mod:`rltf.comparison.results`), aggregates
(:mod:`rltf.comparison.aggregate`) and writes the three files into the comparison folder.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from common.atomic import write_atomic
from rltf.comparison.aggregate import aggregate
from rltf.comparison.plots import cpu_clock, plot_comparison
from rltf.comparison.results import read_runs
from rltf.comparison.runs import RunRecord, print_flushed
from rltf.comparison.suites import Suite
from rltf.evaluation.intervals import BOOTSTRAP_RESAMPLES, format_interval


def _f(v: float | None, fmt: str = ".4f") -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def _score_table(rows: Sequence[dict]) -> list[str]:
    lines = ["| | held-out score (mean ± std over seeds) | 95% bootstrap interval (tasks) | per seed | "
             "valid plans: held-out / training samples | train reward: first → last 10% of steps | "
             "plans sampled | wall time (s) | CPU time (s) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
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
    return lines


def _metrics_table(summary: dict, rows: Sequence[dict]) -> list[str]:
    if not summary.get("metrics"):
        return []
    lines = ["", "Every metric (mean ± std over seeds; — where an arm's results have no such column):", "",
             "| | " + " | ".join(summary["metrics"]) + " |", "|---|" + "---|" * len(summary["metrics"])]
    for r in rows:
        cells = [(f"{m['mean']:.4f} ± {m['std']:.4f}" if m["n_seeds"] > 1 else f"{m['mean']:.4f}")
                 if (m := r.get("metrics", {}).get(name)) else "—" for name in summary["metrics"]]
        lines.append(f"| {r['label']} | " + " | ".join(cells) + " |")
    return lines


def _score_note(summary: dict, n_tasks: int, where: str) -> str:
    n = len(summary["seeds"])
    headline = (f"Held-out score: the env's headline metric (`{summary['headline']}`, as the env scores each "
                "task's plan, whatever the training reward's shaping); "
                if summary.get("headline") else "Held-out score: ")
    return (f"{headline}each seed's overall score on its {n_tasks} {where}tasks, mean ± std "
            f"(ddof=1) over seeds (of {n}); interval: 95% percentile bootstrap over tasks "
            f"({BOOTSTRAP_RESAMPLES} resamples) of the per-task scores averaged over seeds. Wall and CPU "
            "(user + system) time: the whole run (warm start, training, evaluations), per seed.")


def comparison_markdown(summary: dict, records: Sequence[RunRecord] = ()) -> str:
    """``compare.md``: the table (one line per row; a suite with ``splits``: one table per split, each
    with its paired differences and metrics) and what each column is."""
    lines = [f"### Comparison `{summary['suite']}`", ""]
    if summary.get("description"):
        lines += [summary["description"].strip(), ""]
    if summary.get("splits"):
        held = f"the runs evaluated `{summary['held_out']}`; " if summary.get("held_out") else ""
        lines += [f"Held-out splits, reported apart ({held}each split's tasks as the env names them): "
                  + ", ".join(f"`{s}`" for s in summary["splits"]) + "."]
        for split in summary["splits"]:
            rows = [r for r in summary["rows"] if r.get("split") == split]
            n_tasks = max((r["n_tasks"] for r in rows), default=0)
            lines += ["", f"#### Split `{split}`", "", *_score_table(rows), "",
                      _score_note(summary, n_tasks, f"`{split}` ")]
            lines += paired_markdown((summary.get("paired_by_split") or {}).get(split))
            lines += _metrics_table(summary, rows)
    else:
        lines += _score_table(summary["rows"])
        n_tasks = max((r["n_tasks"] for r in summary["rows"]), default=0)
        held_out = (f"Held-out set: `{summary['held_out']}` ({n_tasks} tasks), the same for every arm. "
                    if summary.get("held_out") else "")
        lines += ["", held_out + _score_note(summary, n_tasks, "held-out ")]
        lines += paired_markdown(summary.get("paired"))
        lines += _metrics_table(summary, summary["rows"])
    failed = [r for r in records if r.status == "failed"]
    if failed:
        lines += ["", "Failed runs: " + "; ".join(f"{r.arm} seed {r.seed} ({r.error})" for r in failed)]
    return "\n".join(lines) + "\n"


def paired_markdown(paired: dict | None) -> list[str]:
    """The paired differences' table (:func:`rltf.comparison.aggregate.paired_summary`): one line per
    arm, or the error that kept it from being paired."""
    if not paired or not paired.get("comparisons"):
        return []
    ref = paired["reference"]
    lines = ["", f"Paired differences against **{ref['label']}** (arm `{ref['arm']}`): per (task, seed), the arm's "
                 f"score minus the reference's on the same task and seed; interval: {paired['level']:.0%} "
                 f"{paired['method']} ({paired['resamples']} resamples, seed {paired['seed']}).", "",
             "| | mean difference (arm − reference) | 95% interval (tasks × seeds) | tasks × seeds | "
             "tasks better / worse / tied (seed mean) |", "|---|---|---|---|---|"]
    for c in paired["comparisons"]:
        if "error" in c:
            lines.append(f"| {c['label']} | not paired: {c['error']} | | | |")
            continue
        lo, hi = c["interval"]
        lines.append(f"| {c['label']} | {c['mean']:+.4f} | [{lo:+.4f}, {hi:+.4f}] | {c['n_tasks']} × {c['n_seeds']} | "
                     f"{c['tasks_better']} / {c['tasks_worse']} / {c['tasks_tied']} |")
    return lines


def write_report(suite: Suite, root: Path, records: Sequence[RunRecord] = (), seeds: Sequence[int] | None = None,
                 log: Callable[[str], None] = print_flushed) -> dict:
    """Read every finished run under ``root``, aggregate, write ``compare.md`` / ``compare.json`` /
    ``compare.png`` there; prints the table. Returns the summary."""
    runs = read_runs(suite, root, seeds)
    summary = aggregate(suite, runs, seeds)
    for arm in suite.arms:  # each run's CPU seconds at the end of each step: the plot's time axis
        for entry, run in zip(summary["runs"].get(arm.name, []), runs.get(arm.name, [])):
            entry["clock"] = cpu_clock(run.history, run.cpu_s, arm.reward_key)
    summary["failed"] = [dataclasses.asdict(r) for r in records if r.status == "failed"]
    for entry in [e for arm_runs in summary["runs"].values() for e in arm_runs] + summary["failed"]:
        entry["run_dir"] = Path(os.path.relpath(entry["run_dir"], root)).as_posix()  # no machine's path in it
    root.mkdir(parents=True, exist_ok=True)
    md = comparison_markdown(summary, records)
    write_atomic(root / "compare.md", md)
    labels = {r.arm: r.label for r in suite.rows if r.trained}
    png = plot_comparison(summary, labels, root / "compare.png")
    summary["plot"] = png.name if png else None  # beside compare.json; no machine's path in it
    write_atomic(root / "compare.json", json.dumps(summary, indent=1, default=str) + "\n")
    log("\n" + md)
    log(f"comparison folder: {root}" + (f"  (plot: {png.name})" if png else ""))
    return summary
