"""A comparison's curves: ``compare.png``, against plans sampled and against CPU seconds.

Top row: the periodic held-out score and the train reward against the number of plans sampled
(the budget every arm shares); second row: the same curves against the CPU seconds each run had
spent by then, so an objective that learns more per plan but costs more per step (several clipped
passes over each batch) is seen at its price; last row: each trained row's final held-out score
against the plans it sampled and its runs' CPU seconds (the verdict at equal plans and equal CPU).

The CPU clock of a run (:func:`cpu_clock`): the run's CPU seconds (user + system of its processes,
``seed<k>.run.json``; warm start and held-out evaluations included) spread over its training steps
in proportion to each step's measured duration (the history's ``train/plans_per_s``: a step took
``plans / plans_per_s`` seconds), or evenly when the history has no durations (a summary read back
from ``compare.json``, whose curves keep no durations). So the last step sits at the run's CPU
time and a step twice as long as another moves the clock twice as far.

    python -m rltf.comparison.plots benchmarks/results/objectives/compare.json docs/compare-objectives.png
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from common.atomic import atomic_path

DURATION_KEY = "train/plans_per_s"  # a step's plans per second: its duration is plans / this


def rolling_mean(values: Sequence[float], fraction: float = 0.1) -> np.ndarray:
    """The centred mean over a window of ``fraction`` of the points (shorter at the ends): unlike an
    EMA started at the first value, the first points do not carry one noisy batch's weight."""
    v = np.asarray(values, dtype=np.float64)
    half = max(1, int(len(v) * fraction)) // 2
    return np.array([v[max(0, i - half): i + half + 1].mean() for i in range(len(v))])


def cpu_clock(history: Sequence[dict], cpu_s: float | None, step_key: str = "train/reward") -> dict | None:
    """``{"steps", "cpu_s", "spread"}``: the CPU seconds a run had spent at the end of each training
    step (the rows with ``step_key``), its ``cpu_s`` spread over them by their durations when every
    step has one (``spread: "step durations"``), else evenly (``"even"``); None without a CPU time
    or steps."""
    rows = sorted((int(h["step"]), h) for h in history if h.get(step_key) is not None)
    if cpu_s is None or not rows:
        return None
    rates = [h.get(DURATION_KEY) for _, h in rows]
    timed = all(r is not None and r > 0 for r in rates)
    durations = np.array([1.0 / r for r in rates] if timed else [1.0] * len(rows), dtype=np.float64)
    clock = np.cumsum(durations) / durations.sum() * float(cpu_s)
    return {"steps": [s for s, _ in rows], "cpu_s": clock.tolist(), "spread": "step durations" if timed else "even"}


def even_clock(steps: Sequence[int], cpu_s: float | None) -> dict | None:
    """A run's CPU seconds spread evenly over steps ``1 .. max(steps)`` (no durations known)."""
    if cpu_s is None or not steps:
        return None
    n = max(steps)
    return {"steps": list(range(1, n + 1)), "cpu_s": [float(cpu_s) * s / n for s in range(1, n + 1)], "spread": "even"}


def _clock_at(clock: dict, step: int) -> float:
    """The clock at ``step`` (step 0, before training: 0 s)."""
    return float(np.interp(step, [0, *clock["steps"]], [0.0, *clock["cpu_s"]]))


def cpu_axis(curve: dict, clocks: dict[str, dict]) -> list[float] | None:
    """The curve's points in CPU seconds: at each of its steps, the mean over its seeds of their
    clocks (None when a seed of the curve has no clock)."""
    seeds = list(curve.get("seeds", {}))
    if not seeds or any(clocks.get(s) is None for s in seeds):
        return None
    return [float(np.mean([_clock_at(clocks[s], step) for s in seeds])) for step in curve["steps"]]


def summary_clocks(summary: dict) -> dict[str, dict[str, dict]]:
    """Per arm, per seed: the clock the report recorded (``runs[arm][i]["clock"]``), else the run's
    CPU time spread evenly over the steps of the arm's train reward curve (a ``compare.json``
    written before the clocks were)."""
    out: dict[str, dict[str, dict]] = {}
    for arm, runs in summary.get("runs", {}).items():
        reward = (summary.get("curves", {}).get(arm) or {}).get("reward") or {}
        out[arm] = {}
        for r in runs:
            clock = r.get("clock")
            if clock is None:
                seen = reward.get("seeds", {}).get(str(r["seed"]))
                pps = r.get("plans_per_step")
                steps = [round(p / pps) for p in seen["plans"]] if seen and pps else reward.get("steps", [])
                clock = even_clock(steps, r.get("cpu_s"))
            out[arm][str(r["seed"])] = clock
    return out


def _spread_note(clocks: dict[str, dict[str, dict]]) -> str:
    kinds = {c["spread"] for arm in clocks.values() for c in arm.values() if c}
    return "by step durations" if kinds == {"step durations"} else "evenly" if kinds == {"even"} else \
        "by step durations where recorded, else evenly"


def final_points(summary: dict) -> list[dict]:
    """The trained rows' held-out scores at the end of their runs: ``{"arm", "label", "mean", "std", "n",
    "plans", "cpu_s", "cpu_std"}`` (``cpu_s`` None where the runs' CPU times are unknown)."""
    out = []
    for r in summary.get("rows", []):
        if not r.get("trained") or r.get("mean") is None or not r.get("plans_sampled"):
            continue
        cpu = r.get("cpu_s") or {}
        label = f"{r['label']} ({r['split']})" if r.get("split") else r["label"]
        out.append({"arm": r["arm"], "label": label, "mean": r["mean"], "std": r.get("std") or 0.0,
                    "n": r.get("n_seeds"), "plans": r["plans_sampled"], "cpu_s": cpu.get("mean"),
                    "cpu_std": cpu.get("std") or 0.0})
    return out


def _drawn(summary: dict) -> tuple[dict, list[str], dict, dict, list[dict]]:
    """What the figure draws: the arms' curves, their keys (the held-out panel only when some arm
    evaluated periodically: the flow arms do not), the runs' clocks, the curves' CPU axes, the final points."""
    curves = {a: c for a, c in summary["curves"].items() if c.get("score") or c.get("reward")}
    keys = [k for k in ("score", "reward") if any(c.get(k) for c in curves.values())]
    clocks = summary_clocks(summary)
    timed = {(a, k): x for a, c in curves.items() for k in keys
             if c.get(k) and (x := cpu_axis(c[k], clocks.get(a, {}))) is not None}
    return curves, keys, clocks, timed, final_points(summary)


def panels_of(summary: dict) -> list[tuple[str, str]]:
    """The figure's panels in reading order, two a row: ``(axis, key)`` with axis ``plans`` / ``cpu``
    (the curves: key ``score`` or ``reward``; ``cpu`` where the runs' CPU times are known) and
    ``("final", "plans")`` / ``("final", "cpu")`` (the trained rows' final held-out scores)."""
    _, keys, _, timed, finals = _drawn(summary)
    return _panels(keys, timed, finals)


def _panels(keys: list[str], timed: dict, finals: list[dict]) -> list[tuple[str, str]]:
    panels = [(axis, key) for axis in ("plans", "cpu") for key in keys if axis == "plans" or timed]
    final_axes = ["plans"] + (["cpu"] if any(f["cpu_s"] is not None for f in finals) else [])
    return panels + ([("final", a) for a in final_axes] if finals else [])


def plot_comparison(summary: dict, labels: dict[str, str], path: Path) -> Path | None:
    """``compare.png``: the periodic held-out score and the train reward, mean over seeds with a
    ±std band, one line per trained arm, against plans sampled and CPU seconds (where the runs' CPU
    times are known); last row: each trained row's final held-out score (mean ± std over seeds)
    against the plans it sampled and the CPU seconds of its runs. One legend under the panels."""
    import matplotlib  # plotting only, after the runs (Agg backend set first)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # plotting only, after the runs (Agg backend set first)

    curves, keys, clocks, timed, finals = _drawn(summary)
    panels = _panels(keys, timed, finals)
    if not panels:
        return None
    ncols = 2 if len(panels) > 1 else 1  # panels in reading order, two a row
    nrows = -(-len(panels) // ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(6.5 * ncols, 4.2 * nrows), squeeze=False)
    placed = dict(zip(panels, grid.flat))
    for ax in list(grid.flat)[len(panels):]:
        ax.axis("off")
    axes = {p: ax for p, ax in placed.items() if p[0] != "final"}
    arms = list(dict.fromkeys([*curves, *(f["arm"] for f in finals)]))
    color = {a: f"C{i % 10}" for i, a in enumerate(arms)}
    style = {a: ("-", "--", "-.", ":")[i % 4] for i, a in enumerate(arms)}  # overlapping curves stay visible
    handles: dict[str, object] = {}
    for arm, c in curves.items():
        for (axis, key), ax in axes.items():
            cur = c.get(key)
            x = np.array(cur["plans"]) if cur and axis == "plans" else timed.get((arm, key))
            if not cur or x is None:
                continue
            x, m, s = np.asarray(x, dtype=np.float64), np.array(cur["mean"]), np.array(cur["std"])
            if key == "reward" and len(m) > 1:  # batch rewards are noisy: a centred rolling mean
                ax.plot(x, m, color=color[arm], alpha=0.2)
                m, s = rolling_mean(m), rolling_mean(s)
            line, = ax.plot(x, m, ("o" if key == "score" else "") + style[arm], color=color[arm], ms=3)
            handles.setdefault(f"{labels.get(arm, arm)} (n={len(cur['seeds'])})", line)
            ax.fill_between(x, m - s, m + s, color=color[arm], alpha=0.12)
    titles = {"score": "held-out (validation) score", "reward": "train reward (rolling mean, 10% of steps)"}
    cpu_label = f"CPU seconds of the run\n(its CPU time spread over its steps {_spread_note(clocks)})"
    for (axis, key), ax in axes.items():
        ax.set_title(f"{titles[key]}\nvs " + ("plans sampled" if axis == "plans" else "CPU seconds"), fontsize=10)
        ax.set_ylabel("score (constrained beam search)" if key == "score" else "train reward (seed mean)")
        ax.set_xlabel("plans sampled" if axis == "plans" else cpu_label)
        ax.grid(alpha=0.3)
    for x_key, x_err, xlabel in (("plans", None, "plans sampled per run"),
                                 ("cpu_s", "cpu_std", "CPU seconds per run (mean ± std)")):
        ax = placed.get(("final", "plans" if x_key == "plans" else "cpu"))
        if ax is None:
            continue
        for f in finals:
            if f[x_key] is None:
                continue
            bar = ax.errorbar(f[x_key], f["mean"], yerr=f["std"], xerr=f[x_err] if x_err else None,
                              fmt="o", color=color[f["arm"]], capsize=3, ms=5)
            handles.setdefault(f"{f['label']} (n={f['n']})", bar)
        ax.set_title(f"final held-out score (mean ± std over seeds)\nvs {xlabel.split(' (')[0]}", fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"held-out {summary.get('held_out') or 'score'}")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{summary['suite']}: mean ± std over seeds")
    fig.tight_layout()
    if handles:  # one legend for every panel, under them (long labels never cover a curve)
        fig.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   fontsize=8, ncol=1, frameon=False)
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, bbox_inches="tight", format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> Path | None:
    """``python -m rltf.comparison.plots <compare.json> <out.png>``: the plot redrawn from a summary
    (no run folders needed; the labels are the trained rows' labels)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        raise SystemExit(f"expected <compare.json> <out.png>, got {args!r}")
    summary = json.loads(Path(args[0]).read_text())
    labels = {r["arm"]: r["label"] for r in summary["rows"] if r.get("trained")}
    return plot_comparison(summary, labels, Path(args[1]))


if __name__ == "__main__":
    main()
