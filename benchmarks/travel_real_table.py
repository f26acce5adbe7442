"""The real-tables TravelPlanner table (issue #36 item 8): the flat planner and the MTP flow, fine-tuned
against RLTF, every official metric, per seed and mean ± std over seeds, from the runs' own files. A row
names the method, the planner's model (from the run's ``config.yaml``) and how many queries it judged.

    # the runs (2 CPU cores: ~6 minutes each; SmolLM2 on one thread: ~25-40 minutes each)
    for s in 0 1 2; do
      python train/rltf.py config=configs/travel-flat-real.yaml seed=$s output_dir=runs/travel-real run_name=flat-seed$s
      python train/rltf.py config=configs/travel-mtp-real.yaml seed=$s output_dir=runs/travel-real run_name=mtp-seed$s
      python train/rltf.py config=configs/travel-flat-smollm2-real.yaml seed=$s output_dir=runs/travel-real \
          run_name=flat-smollm2-seed$s
      python train/rltf.py config=configs/travel-mtp-smollm2-real.yaml seed=$s output_dir=runs/travel-real \
          run_name=mtp-smollm2-seed$s
    done
    python benchmarks/travel_real_table.py runs/travel-real --out benchmarks/results/travel-real

A run folder is recognised by its file: ``results.json`` (the flat planner's held-out table) or
``flow_results.json`` (a trained flow's). Every run must name the same data (its ``data`` entry: the
real tables' fingerprint, the flights, the queries and their split); the table says which. Writes
``table.json`` (what ``benchmarks/results_pages.py`` renders) and ``table.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml

COLUMNS = ("delivery", "commonsense micro", "commonsense macro", "hard micro", "hard macro", "final pass", "reward")
SCHEMAS = ("finetuned", "rltf")


def planner_model(folder: Path) -> str | None:
    """The run's ``planner.model`` from the ``config.yaml`` every run writes (None without one)."""
    config = folder / "config.yaml"
    if not config.is_file():
        return None
    model = (yaml.safe_load(config.read_text()) or {}).get("planner", {}).get("model")
    return str(model) if model else None


def per_query(d: dict, schema: str) -> dict[str, tuple[float, float]] | None:
    """{query id: (reward, final pass)} of one schema of a run's file (None when it holds none): a flow's
    per-query results, or the flat planner's per-query rewards (final pass is a reward of 1: every
    constraint passed)."""
    results = (d.get("results") or {}).get(schema)
    if isinstance(results, list):
        return {str(r["query"]): (float(r["reward"]), float(bool(r["final_pass"]))) for r in results}
    scores = (d.get("scores") or {}).get(schema)
    if isinstance(scores, dict):
        return {str(q): (float(v), float(v == 1.0)) for q, v in scores.items()}
    return None


def read_run(folder: Path) -> dict | None:
    """One run folder's ``planner`` (the method — ``flat``, ``mtp``, ... — and, where the run wrote its
    config, the model: ``mtp · smollm2``), its ``table`` ({schema: {column: value}}), ``data`` and
    ``queries`` ({schema: {query: (reward, final pass)}}); None when it holds neither file."""
    flat, flow = folder / "results.json", folder / "flow_results.json"
    if flat.is_file():
        d = json.loads(flat.read_text())
        method, table = "flat", d["table"]["rows"]
    elif flow.is_file():
        d = json.loads(flow.read_text())
        method, table = d.get("method", "flow"), d["table"]
    else:
        return None
    model = planner_model(folder)
    queries = {s: q for s in SCHEMAS if (q := per_query(d, s)) is not None}
    return {"planner": f"{method} · {model}" if model else method, "table": table,
            "data": dict(d.get("data") or {}), "queries": queries}


def collect(root: Path) -> dict:
    rows, data = [], None
    per: dict[tuple[str, str], list[dict[str, float]]] = {}
    judged: dict[tuple[str, str], list[dict[str, tuple[float, float]]]] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        run = read_run(folder)
        if run is None:
            continue
        planner, table, run_data = run["planner"], run["table"], run["data"]
        if data is None:
            data = run_data
        elif {k: v for k, v in run_data.items() if k != "evaluated"} != \
                {k: v for k, v in data.items() if k != "evaluated"}:
            raise SystemExit(f"{folder}: its data differs from the other runs' ({run_data} vs {data})")
        for schema in SCHEMAS:
            if schema in table:
                values = {c: float(table[schema][c]) for c in COLUMNS}
                per.setdefault((planner, schema), []).append(values)
                queries = run["queries"].get(schema)
                if queries is not None:
                    judged.setdefault((planner, schema), []).append(queries)
                rows.append({"method": f"{planner} · {schema} · {folder.name}", "run": folder.name, **values,
                             **({"queries": len(queries)} if queries is not None else {})})
    for (planner, schema), runs in sorted(per.items()):
        arr = np.array([[r[c] for c in COLUMNS] for r in runs])
        mean = {c: float(v) for c, v in zip(COLUMNS, arr.mean(0))}
        counts = {len(q) for q in judged.get((planner, schema), [])}
        rows.append({"method": f"**{planner} · {schema}: mean over {len(runs)} seed(s)**", "run": "mean", **mean,
                     **({"queries": counts.pop()} if len(counts) == 1 else {})})
        if len(runs) > 1:  # (one seed has no spread to show)
            rows.append({"method": f"{planner} · {schema}: std (ddof=1)", "run": "std",
                         **{c: float(v) for c, v in zip(COLUMNS, arr.std(0, ddof=1))}})
    if not rows:
        raise SystemExit(f"{root}: no run folder with results.json or flow_results.json")
    return {"rows": rows, "data": data, "runs": sorted({r["run"] for r in rows} - {"mean", "std"}),
            "same_queries": same_queries(judged)}


def same_queries(judged: dict[tuple[str, str], list[dict[str, tuple[float, float]]]]) -> list[dict]:
    """Planners of one method judged on different queries (a CPU budget's subset), compared on the
    queries every run of the smaller set judged: per planner and schema, the mean over its seeds of the
    mean reward and final pass on those queries, ± the spread (std, ddof=1) over seeds."""
    out = []
    methods = sorted({planner.split(" · ")[0] for planner, _ in judged})
    for method in methods:
        groups = {k: v for k, v in judged.items() if k[0].split(" · ")[0] == method}
        sets = {k: set.intersection(*(set(q) for q in v)) for k, v in groups.items()}
        if len({frozenset(s) for s in sets.values()}) < 2:
            continue  # every planner of this method judged the same queries: the main table compares them
        common = set.intersection(*sets.values())
        if not common:
            continue
        for (planner, schema), runs in sorted(groups.items()):
            per_seed = np.array([[np.mean([r[q][i] for q in common]) for i in (0, 1)] for r in runs])
            spread = [float(x) for x in per_seed.std(0, ddof=1)] if len(runs) > 1 else [None, None]
            out.append({"method": method, "planner": planner, "schema": schema, "seeds": len(runs),
                        "queries": len(common), "reward": float(per_seed[:, 0].mean()), "reward std": spread[0],
                        "final pass": float(per_seed[:, 1].mean()), "final pass std": spread[1]})
    return out


def mean_spread(row: dict, key: str) -> str:
    """``mean ± std`` of a same-queries row's ``key`` (the mean alone for one seed)."""
    spread = row.get(f"{key} std")
    return f"{row[key]:.4f}" + (f" ± {spread:.4f}" if spread is not None else "")


def markdown(table: dict) -> str:
    lines = [f"data: {json.dumps(table['data'])}", "", "| method | " + " | ".join(COLUMNS) + " | queries |",
             "|---|" + "---|" * (len(COLUMNS) + 1)]
    lines += [f"| {r['method']} | " + " | ".join(f"{r[c]:.4f}" for c in COLUMNS) + f" | {r.get('queries', '')} |"
              for r in table["rows"]]
    if table.get("same_queries"):
        lines += ["", "On the same queries (the queries every run of each planner judged):", "",
                  "| planner · schema | seeds | queries | reward (mean ± std over seeds) | final pass |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['planner']} · {r['schema']} | {r['seeds']} | {r['queries']} | {mean_spread(r, 'reward')} | "
                  f"{mean_spread(r, 'final pass')} |" for r in table["same_queries"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path, help="the folder holding one sub-folder per run")
    ap.add_argument("--out", type=Path, help="write table.json and table.md here")
    args = ap.parse_args(argv)
    if not args.runs.is_dir():
        print(f"bad value for runs: {str(args.runs)!r}; expected a folder of run folders", file=sys.stderr)
        raise SystemExit(2)
    table = collect(args.runs)
    text = markdown(table)
    print(text, end="")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "table.json").write_text(json.dumps(table, indent=1) + "\n")
        (args.out / "table.md").write_text(text)


if __name__ == "__main__":
    main()
