"""The real-tables TravelPlanner table (issue #36 item 8): the flat planner and the MTP flow, fine-tuned
against RLTF, every official metric, per seed and mean ± std over seeds, from the runs' own files.

    # the runs (2 CPU cores: ~6 minutes each)
    for s in 0 1 2; do
      python train/rltf.py config=configs/travel-flat-real.yaml seed=$s output_dir=runs/travel-real run_name=flat-seed$s
      python train/rltf.py config=configs/travel-mtp-real.yaml seed=$s output_dir=runs/travel-real run_name=mtp-seed$s
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

COLUMNS = ("delivery", "commonsense micro", "commonsense macro", "hard micro", "hard macro", "final pass", "reward")
SCHEMAS = ("finetuned", "rltf")


def read_run(folder: Path) -> tuple[str, dict[str, dict[str, float]], dict] | None:
    """(planner, {schema: {column: value}}, data) of one run folder, None when it holds neither file."""
    flat, flow = folder / "results.json", folder / "flow_results.json"
    if flat.is_file():
        d = json.loads(flat.read_text())
        return "flat", d["table"]["rows"], d.get("data") or {}
    if flow.is_file():
        d = json.loads(flow.read_text())
        return d.get("method", "flow"), d["table"], d.get("data") or {}
    return None


def collect(root: Path) -> dict:
    rows, data = [], None
    per: dict[tuple[str, str], list[dict[str, float]]] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        got = read_run(folder)
        if got is None:
            continue
        planner, table, run_data = got
        if data is None:
            data = run_data
        elif {k: v for k, v in run_data.items() if k != "evaluated"} != \
                {k: v for k, v in data.items() if k != "evaluated"}:
            raise SystemExit(f"{folder}: its data differs from the other runs' ({run_data} vs {data})")
        for schema in SCHEMAS:
            if schema in table:
                values = {c: float(table[schema][c]) for c in COLUMNS}
                per.setdefault((planner, schema), []).append(values)
                rows.append({"method": f"{planner} · {schema} · {folder.name}", "run": folder.name, **values})
    for (planner, schema), runs in sorted(per.items()):
        arr = np.array([[r[c] for c in COLUMNS] for r in runs])
        mean = {c: float(v) for c, v in zip(COLUMNS, arr.mean(0))}
        rows.append({"method": f"**{planner} · {schema}: mean over {len(runs)} seed(s)**", "run": "mean", **mean})
        if len(runs) > 1:  # (one seed has no spread to show)
            rows.append({"method": f"{planner} · {schema}: std (ddof=1)", "run": "std",
                         **{c: float(v) for c, v in zip(COLUMNS, arr.std(0, ddof=1))}})
    if not rows:
        raise SystemExit(f"{root}: no run folder with results.json or flow_results.json")
    return {"rows": rows, "data": data, "runs": sorted({r["run"] for r in rows} - {"mean", "std"})}


def markdown(table: dict) -> str:
    lines = [f"data: {json.dumps(table['data'])}", "", "| method | " + " | ".join(COLUMNS) + " |",
             "|---|" + "---|" * len(COLUMNS)]
    lines += [f"| {r['method']} | " + " | ".join(f"{r[c]:.4f}" for c in COLUMNS) + " |" for r in table["rows"]]
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
