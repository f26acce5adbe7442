"""A comparison's report: ``compare.md`` (the table), ``compare.png`` (the curves), ``compare.json``.

:func:`write_report` reads every finished run back (:mod:`rltf.comparison.results`), aggregates
(:mod:`rltf.comparison.aggregate`) and writes the three files into the comparison folder.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rltf.comparison.aggregate import aggregate
from rltf.comparison.results import read_runs
from rltf.comparison.runs import RunRecord, print_flushed
from rltf.comparison.suites import Suite
from rltf.evaluation.schemas import BOOTSTRAP_RESAMPLES, format_interval


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
                 log: Callable[[str], None] = print_flushed) -> dict:
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
