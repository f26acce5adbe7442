"""The scaffolds' no-model baselines (issue #51 item 2): every scaffolded travel figure in the docs
(MTP, OKR-Agent, ReAct) beside what the same scaffold scores with **no model at all** -- the ``rule``
flow backend (``rltf/flows/backends/rule.py``: the cheapest option shown of every choice, the first
action of a grammar that lists its actions, the empty answer to free text), on the same queries,
with the same scaffold settings and the same evaluator mode as the figure.

    python benchmarks/scaffold_baselines.py                 # every group; ~3-4 CPU minutes
    python benchmarks/scaffold_baselines.py --group travel-real --group flows-smollm2

Each baseline is ``python -m rltf.flows.evaluate config=<the figure's config> <its overrides>
flow.backend.kind=rule flow.oracle=false``, run once per seed of :data:`SEEDS` (the figures'
seeds vary the model; the rule and the scaffolds are deterministic, so the seeds must agree: the
table gives mean ± std over them, std 0, and the script stops if they differ). A group of a
generated results page writes ``benchmarks/results/<page>/baselines.json``, which
``benchmarks/results_pages.py`` prints under that page's table; the ``hand`` group (the figures of
the hand-written pages: ``docs/results/hand-measured.md``, ``docs/flows.md``, ``docs/envs/travel.md``)
prints its table (and writes it under ``--hand-out``) for those pages to quote with this command.
Runs write under a temporary folder, never under ``checkpoints/``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import platform
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout
RESULTS = REPO / "benchmarks" / "results"
COLUMNS = ("delivery", "commonsense micro", "commonsense macro", "hard micro", "hard macro", "final pass", "reward")
SEEDS = (0, 1)
RULE = ["flow.backend.kind=rule", "flow.oracle=false", "flow.trace_queries=0", "logging.progress_bar=false"]


@dataclass(frozen=True)
class Baseline:
    """One no-model run: the figure(s) it stands beside, the config and overrides of those figures."""

    beside: str
    config: str
    overrides: tuple[str, ...] = ()

    def argv(self, seed: int, out: str, name: str) -> list[str]:
        return [f"config={self.config}", *self.overrides, *RULE, f"seed={seed}", f"output_dir={out}",
                f"run_name={name}"]

    def command(self) -> str:
        return " ".join(["python -m rltf.flows.evaluate", f"config={self.config}", *map(shlex.quote, self.overrides),
                         "flow.backend.kind=rule", "flow.oracle=false"])


GROUPS: dict[str, tuple[Baseline, ...]] = {
    "travel-real": (
        Baseline("mtp · embedded (finetuned, rltf; seeds 0-2): all 72 test queries", "configs/travel-mtp-real.yaml"),
        Baseline("mtp · smollm2 (finetuned, rltf; seeds 0-2): 24 of the 72, evenly spaced",
                 "configs/travel-mtp-smollm2-real.yaml"),
    ),
    "flows-smollm2": (
        Baseline("MTP, SmolLM2 untrained (free-text supervisor: the rule answers it empty)",
                 "configs/travel-mtp-smollm2.yaml"),
        Baseline("MTP, SmolLM2 + LoRA and the embedded planner (template supervisor)",
                 "configs/travel-mtp.yaml", ("env.travel.days=[3]", "flow.limit=4")),
        Baseline("ReAct, SmolLM2 untrained (free-text thoughts: the rule answers them empty)",
                 "configs/travel-react-smollm2.yaml"),
        Baseline("ReAct, embedded planner untrained", "configs/travel-react.yaml",
                 ("env.travel.days=[3]", "flow.limit=4")),
    ),
    "objectives-travel": (
        Baseline("every arm (MTP, 18 evenly spaced test queries)", "configs/travel-mtp.yaml", ("flow.limit=18",)),
    ),
    "hand": (
        Baseline("hand-measured.md: untrained embedded MTP / OKR-Agent / ReAct, 72 test queries (synthetic)",
                 "configs/travel-mtp.yaml", ("flow.methods=[mtp,okr,react]", "flow.limit=null")),
        Baseline("hand-measured.md: OKR-Agent SFT / RLTF (travel-okr.yaml), 72 test queries (synthetic)",
                 "configs/travel-okr.yaml", ("flow.limit=null",)),
        Baseline("envs/travel.md: delivery of MTP / OKR / ReAct, 72 generated test queries over the real tables",
                 "configs/travel-mtp-real.yaml", ("flow.methods=[mtp,okr,react]",)),
        Baseline("envs/travel.md: OKR-Agent and ReAct with their own real-table configs, 72 test queries",
                 "configs/travel-okr-real.yaml", ("flow.limit=null",)),
        Baseline("envs/travel.md: ReAct with its own real-table config", "configs/travel-react-real.yaml",
                 ("flow.limit=null",)),
    ),
}
PAGE_GROUPS = ("travel-real", "flows-smollm2", "objectives-travel")  # groups whose JSON a generated page renders


def run_once(b: Baseline, seed: int, out: str, name: str) -> dict:
    """One evaluation's summary (its printing kept off the script's output)."""
    from rltf.flows.evaluate import main as evaluate  # deferred: torch loads only when a baseline runs

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        summary = evaluate(b.argv(seed, out, name))
    if summary is None:
        raise SystemExit(f"{b.config}: the evaluation returned nothing")
    return summary


def measure(b: Baseline, out: str, name: str) -> list[dict]:
    """One row per method of ``b``: mean ± std over :data:`SEEDS` (the seeds must give the same plans)."""
    runs = [run_once(b, s, out, f"{name}-seed{s}") for s in SEEDS]
    first = runs[0]
    def scores(r: dict) -> dict:
        return {m: {c: row[c] for c in COLUMNS} for m, row in r["table"].items()}

    for s, r in zip(SEEDS[1:], runs[1:]):
        if r["queries"] != first["queries"] or scores(r) != scores(first):
            raise SystemExit(f"{b.command()}: seed {s} gave another table than seed {SEEDS[0]}: the rule is meant "
                             "to be deterministic")
    rows = []
    for method in [m for m in first["table"] if m != "solver"]:
        arr = np.array([[float(r["table"][method][c]) for c in COLUMNS] for r in runs])
        rows.append({"method": method, "beside": b.beside, "command": b.command(), "seeds": list(SEEDS),
                     "queries": len(first["queries"]), "query ids": [int(q) for q in first["queries"]],
                     **{c: float(v) for c, v in zip(COLUMNS, arr.mean(0))},
                     **{f"{c} std": float(v) for c, v in zip(COLUMNS, arr.std(0, ddof=1))}})
    data = {k: v for k, v in (first.get("data") or {}).items() if k != "path"}  # no machine path
    for r in rows:
        r["data"] = data
    return rows


def measured() -> dict:
    """When, on which code and libraries the baselines were measured (recorded in the JSON)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True,
                               check=True).stdout.strip()
        commit += " (with uncommitted changes: the rule backend's)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {"date": datetime.date.today().isoformat(), "commit": commit,
            "versions": f"python {platform.python_version()}, numpy {version('numpy')}, pandas {version('pandas')}",
            "machine": f"CPU, one thread per run ({platform.machine()})"}


def cell(r: dict, c: str) -> str:
    return f"{r[c]:.4f} ± {r[c + ' std']:.4f}"


def markdown(rows: list[dict], at: dict | None = None) -> list[str]:
    """The baselines as a table: what each stands beside, its rows, the command that measured it
    (``at``: the JSON's ``measured``: when and at which commit)."""
    when = f"{at['date']} at commit {at['commit']} " if at and at.get("date") and at.get("commit") else ""
    lines = ["| beside | no-model run | queries | " + " | ".join(COLUMNS) + " |",
             "|---|---|---|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append(f"| {r['beside']} | {r['method']} · rule (no model) | {r['queries']} | "
                     + " | ".join(cell(r, c) for c in COLUMNS) + " |")
    commands = list(dict.fromkeys(r["command"] for r in rows))
    modes = sorted({f"{r['data'].get('evaluator')} evaluator, {r['data'].get('track')} track" for r in rows})
    lines += ["", f"Mean ± std (ddof=1) over seeds {', '.join(map(str, rows[0]['seeds']))} (the rule and the scaffold "
                  f"are deterministic: the seeds agree); {'; '.join(modes)}; the same queries as the figures "
                  f"beside them. Measured {when}by "
                  "`python benchmarks/scaffold_baselines.py`, i.e. "
                  + "; ".join(f"`{c}`" for c in commands) + "."]
    return lines


def page_section(folder: Path) -> tuple[list[Path], list[str]]:
    """What a generated results page prints under its table (``benchmarks/results_pages.py``): the
    ``baselines.json`` of its folder as a table, with what the rule is; ``([], [])`` when the folder
    has none."""
    path = folder / "baselines.json" if folder.is_dir() else None
    if path is None or not path.is_file():
        return [], []
    data = json.loads(path.read_text())
    lines = ["", "**Beside the scaffolded figures: the same scaffold with no model.** The `rule` flow backend "
                 "(`rltf/flows/backends/rule.py`) answers every choice with the cheapest option its line shows (the "
                 "first when none shows a price), a grammar with its first action, free text with the empty answer; "
                 "it reads no evaluator and no plan. A figure at or below its row measures the scaffold, not the "
                 "model:", "", *markdown(data["rows"], data.get("measured"))]
    return [path], lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--group", action="append", choices=list(GROUPS), help="the groups to measure (default: all)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="where the pages' folders are")
    ap.add_argument("--hand-out", type=Path, default=Path(tempfile.gettempdir()) / "scaffold-baselines",
                    help="where the hand group's baselines.json goes")
    args = ap.parse_args(argv)
    for group in args.group or list(GROUPS):
        with tempfile.TemporaryDirectory(prefix="rule-") as out:
            rows = [row for i, b in enumerate(GROUPS[group]) for row in measure(b, out, f"{group}-{i}")]
        summary = {"group": group, "backend": "rule: no model, the cheapest option shown of every choice",
                   "measured": measured(), "columns": list(COLUMNS), "rows": rows}
        folder = args.results / group if group in PAGE_GROUPS else args.hand_out
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "baselines.json").write_text(json.dumps(summary, indent=1) + "\n")
        print(f"## {group} ({folder / 'baselines.json'})\n")
        print("\n".join(markdown(rows, summary["measured"])) + "\n", flush=True)


if __name__ == "__main__":
    main()
