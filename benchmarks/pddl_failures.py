"""Why held-out pddl plans miss the goal (issue 50 item 5: "failures by kind"), from a verdict's runs.

Re-executes the plans a comparison's runs wrote (``<comparison>/<arm>/seed<k>/results.json``: ``plans[schema]``)
with each run's own env (its ``config.yaml``'s ``env`` section, per split) and sorts every plan of the ``test``
and ``test-long`` splits into one kind:

* ``goal``: executable and the goal holds at the end;
* ``passed the goal``: executable, the goal held after some prefix but not at the end (the plan went on);
* ``stopped short``: executable, never reached the goal, and shorter than an optimal plan;
* ``wandered``: executable, never reached the goal, at least as long as an optimal plan (``at the cap``: as long
  as ``env.pddl.max_plan_length`` allows);
* ``not executable``: an action whose preconditions do not hold (free text: also text that names no action).

Prints, per arm and schema and split, each kind's share (mean ± std over the seeds found) and the plans' mean
length against the optimal one. A post-hoc reading of plans already scored: nothing here decodes or selects.

    RLTF_CACHE_DIR=<the runs' cache> python benchmarks/pddl_failures.py <comparison folder> \\
        [--arms legal-k300-rltf ...] [--schemas finetuned rltf grpo grpo_free]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

import yaml

import envs
from envs.pddl.simulator import final_state, plan_indices, simulate

KINDS = ("goal", "passed the goal", "stopped short", "wandered", "at the cap", "not executable")
SPLITS = ("test", "test-long")


def classify(env, task, plan) -> tuple[str, int]:
    """``(kind, length)`` of one plan of ``task`` (a task of ``env``, a pddl env)."""
    ground = env.instances[task.id].task
    plan = plan if isinstance(plan, str) else tuple(plan)
    out = simulate(ground, plan)
    if not out.valid:
        return "not executable", out.length
    if out.reached:
        return "goal", out.length
    indices, _ = plan_indices(ground, plan)
    if any(ground.goal_reached(final_state(ground, indices[:k])) for k in range(len(indices))):
        return "passed the goal", out.length
    optimal = len(task.reference.actions) if task.reference else None
    if len(indices) >= env.max_plan_length:
        return "at the cap", len(indices)
    if optimal is not None and len(indices) < optimal:
        return "stopped short", len(indices)
    return "wandered", len(indices)


def run_kinds(run_dir: Path, schemas: list[str], cache: dict) -> dict:
    """``{(schema, split): {"kinds": Counter, "n": int, "length": float, "optimal": float}}`` of one run."""
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    plans = json.loads((run_dir / "results.json").read_text())["plans"]
    key = json.dumps(cfg["env"], sort_keys=True)
    out = {}
    for split in SPLITS:
        if (key, split) not in cache:
            cache[key, split] = envs.make(cfg["env"], split)
        env = cache[key, split]
        for schema in schemas:
            if schema not in plans:
                continue
            kinds, lengths, optimal = Counter(), [], []
            for task in env.tasks():
                plan = plans[schema].get(str(task.id))
                if plan is None:
                    continue
                kind, length = classify(env, task, plan)
                kinds[kind] += 1
                lengths.append(length)
                if task.reference:
                    optimal.append(len(task.reference.actions))
            if lengths:
                out[schema, split] = {"kinds": kinds, "n": len(lengths), "length": statistics.fmean(lengths),
                                      "optimal": statistics.fmean(optimal) if optimal else float("nan")}
    return out


def _ms(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3f}" if values else "—"
    return f"{statistics.fmean(values):.3f} ± {statistics.stdev(values):.3f}"


def table(root: Path, arms: list[str] | None, schemas: list[str]) -> str:
    cache: dict = {}
    rows = defaultdict(list)  # (arm, schema, split) -> per-seed summaries
    for arm_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if arms and arm_dir.name not in arms:
            continue
        for run in sorted(arm_dir.glob("seed*/results.json")):
            for (schema, split), v in run_kinds(run.parent, schemas, cache).items():
                rows[arm_dir.name, schema, split].append(v)
    lines = ["| arm | schema | split | seeds | " + " | ".join(KINDS) + " | length / optimal |",
             "|---|---|---|---|" + "---|" * len(KINDS) + "---|"]
    for (arm, schema, split), runs in sorted(rows.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        shares = [_ms([r["kinds"][k] / r["n"] for r in runs]) for k in KINDS]
        mean_length, optimal = (statistics.fmean(r[k] for r in runs) for k in ("length", "optimal"))
        length = f"{mean_length:.1f} / {optimal:.1f}"
        lines.append(f"| {arm} | {schema} | {split} | {len(runs)} | " + " | ".join(shares) + f" | {length} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("comparison", type=Path, help="a comparison folder (<output_dir>/<suite>)")
    p.add_argument("--arms", nargs="*", default=None, help="arms to read (default: every arm with runs)")
    p.add_argument("--schemas", nargs="*", default=["finetuned", "rltf", "grpo", "finetuned_free", "grpo_free"],
                   help="results schemas to read (those a run lacks are skipped)")
    args = p.parse_args(argv)
    if not args.comparison.is_dir():
        print(f"error: comparison={args.comparison}: no such folder; expected <output_dir>/<suite>", file=sys.stderr)
        raise SystemExit(2)
    print(table(args.comparison, args.arms, args.schemas))


if __name__ == "__main__":
    main()
