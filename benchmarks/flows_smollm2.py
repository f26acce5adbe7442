r"""The agent flows on SmolLM2 (issue 23, item 6) in one table: every evaluator metric and the CPU
seconds of each run, on the same held-out travel queries.

Run the runs first (one thread each; see the README section "Agent flows on SmolLM2"), each
under ``/usr/bin/time -f %U+%S -o <run dir>/cpu_seconds.txt``; the embedded planner's runs on the
same queries (the 3-day ones, 4 spread)::

    python -m rltf.flows.evaluate config=configs/travel-mtp.yaml env.travel.days=[3] flow.limit=4 \
        run_name=travel-mtp-embedded-untrained          # travel-react.yaml: travel-react-embedded-untrained
    python train/rltf.py config=configs/travel-mtp.yaml env.travel.days=[3] flow.limit=4 flow.warm_start_queries=4 \
        rltf.steps=4 rltf.tasks_per_batch=2 rltf.k_samples=2 rltf.baseline=rloo rltf.checkpoint_every=0 \
        run_name=travel-mtp-embedded-rl                 # the SmolLM2 RL config's warm start and RLTF budget

then::

    python benchmarks/flows_smollm2.py [--checkpoints checkpoints] [--out benchmarks/results/flows-smollm2]

It copies each run's ``flow_eval.md|json`` (``flow_results.md|json`` for the trained run) to the
output folder under the run's name and writes ``table.md`` / ``table.json``. A run that has not
finished is left out and named.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

COLUMNS = ("delivery", "commonsense micro", "commonsense macro", "hard micro", "hard macro", "final pass", "reward",
           "tokens/query", "seconds/query", "nodes/query", "decisions/query")
# (label, backend, run folder, results file, the file's row)
RUNS = (
    ("MTP, SmolLM2 untrained (free-text supervisor)", "hf", "travel-mtp-smollm2", "flow_eval", "mtp"),
    ("ReAct, SmolLM2 untrained (free-text thoughts)", "hf", "travel-react-smollm2", "flow_eval", "react"),
    ("MTP, SmolLM2 + LoRA, warm start", "planner", "travel-mtp-smollm2-rl", "flow_results", "finetuned"),
    ("MTP, SmolLM2 + LoRA, warm start + RLTF", "planner", "travel-mtp-smollm2-rl", "flow_results", "rltf"),
    ("MTP, embedded planner untrained", "planner", "travel-mtp-embedded-untrained", "flow_eval", "mtp"),
    ("MTP, embedded planner, warm start", "planner", "travel-mtp-embedded-rl", "flow_results", "finetuned"),
    ("MTP, embedded planner, warm start + RLTF", "planner", "travel-mtp-embedded-rl", "flow_results", "rltf"),
    ("ReAct, embedded planner untrained", "planner", "travel-react-embedded-untrained", "flow_eval", "react"),
    ("solver (exact)", "-", "travel-mtp-smollm2", "flow_eval", "solver"),
)


def cpu_seconds(run_dir: Path) -> float | None:
    """``user+sys`` as /usr/bin/time -f %U+%S wrote it (None: not measured)."""
    f = run_dir / "cpu_seconds.txt"
    if not f.exists():
        return None
    return sum(float(x) for x in f.read_text().split()[-1].split("+"))


def collect(checkpoints: Path, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    rows, queries, missing = [], {}, []
    for label, backend, run, results, key in RUNS:
        src = checkpoints / run / f"{results}.json"
        if not src.exists():
            missing += [run] if run not in missing else []
            continue
        data = json.loads(src.read_text())
        for ext in ("json", "md"):
            shutil.copyfile(checkpoints / run / f"{results}.{ext}", out / f"{run}.{results}.{ext}")
        queries[run] = data["queries"]
        cpu = cpu_seconds(checkpoints / run)
        rows.append({"method": label, "backend": backend, "run": run, **data["table"][key],
                     "cpu seconds (run)": None if key == "solver" else cpu})
    same = len({tuple(q) for q in queries.values()}) <= 1
    lines = ["| method | backend | " + " | ".join(COLUMNS) + " | CPU s (whole run) |",
             "|---|---|" + "---:|" * (len(COLUMNS) + 1)]
    for r in rows:
        cells = [f"{r[c]:.4f}" if c not in ("tokens/query", "nodes/query", "decisions/query", "seconds/query")
                 else f"{r[c]:.1f}" for c in COLUMNS]
        cpu = r["cpu seconds (run)"]
        lines.append(f"| {r['method']} | {r['backend']} | " + " | ".join(cells)
                     + f" | {'-' if cpu is None else f'{cpu:.0f}'} |")
    summary = {"rows": rows, "queries": queries, "same_queries": same, "missing": missing}
    (out / "table.md").write_text("\n".join(lines) + "\n")
    (out / "table.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoints", default="checkpoints")
    ap.add_argument("--out", default="benchmarks/results/flows-smollm2")
    args = ap.parse_args()
    summary = collect(Path(args.checkpoints), Path(args.out))
    print(Path(args.out, "table.md").read_text())
    print(f"queries: {summary['queries']} (the same in every run: {summary['same_queries']})")
    if summary["missing"]:
        print(f"not finished (left out): {summary['missing']}")


if __name__ == "__main__":
    main()
