"""Check the README's main-job figures against fresh runs (issue 25, item 10).

The README states the main job's held-out line as mean ± std over seeds in one table, right after
the marker ``<!-- readme_figures: main job -->``::

    | seeds 0, 1, 2 | zero | few | finetuned | rltf | oracle |
    |---|---|---|---|---|---|
    | mean ± std | 0.0000 ± 0.0000 | ... |

This script runs the main job exactly as the README says (``accelerate launch train/rltf.py
seed=<k>``, one run folder per seed under ``--runs-dir``; a seed whose ``results.json`` is there is
read, not run again), takes each run's ``held-out overall`` scores from its ``results.json``, and
checks that the fresh mean of every column lies within the README's stated spread (|fresh mean −
stated mean| ≤ stated std, and equal to 4 decimals where the stated std is 0). It prints one line
per column and exits 1 when any column is outside::

    python benchmarks/readme_figures.py                        # 3 main jobs, ~25 CPU min on 2 cores
    python benchmarks/readme_figures.py --runs-dir /tmp/readme # reuse runs made earlier

Library versions move floats (see the README), so a run with other versions may land outside and
still be a correct run: the script prints the versions next to the verdict.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER = "<!-- readme_figures: main job -->"
_SEEDS_HEAD = re.compile(r"^\|\s*seeds?\s+([\d,\s]+)\|")
_CELL = re.compile(r"^\s*(\d+\.\d+)\s*±\s*(\d+\.\d+)\s*$")


class FiguresError(ValueError):
    """The README's figures table is missing or malformed, or a run's results cannot be read."""


@dataclass(frozen=True)
class Stated:
    """The README's figures: the seeds they were measured on and, per schema, (mean, std)."""

    seeds: tuple[int, ...]
    figures: dict[str, tuple[float, float]]


def read_stated(readme: str) -> Stated:
    """The table after :data:`MARKER` in the README's text."""
    at = readme.find(MARKER)
    if at < 0:
        raise FiguresError(f"the README has no {MARKER!r} marker before its main-job figures table")
    lines = [ln.strip() for ln in readme[at + len(MARKER):].lstrip().splitlines()[:3]]
    if len(lines) < 3 or not all(ln.startswith("|") for ln in lines):
        raise FiguresError(f"expected a 3-line table (header, rule, mean ± std) after {MARKER!r}, found {lines!r}")
    head = _SEEDS_HEAD.match(lines[0])
    if not head:
        raise FiguresError(f"the table's first header cell should name the seeds ('| seeds 0, 1, 2 |'): {lines[0]!r}")
    seeds = tuple(int(s) for s in re.findall(r"\d+", head.group(1)))
    names = [c.strip() for c in lines[0].strip("|").split("|")][1:]
    cells = [c.strip() for c in lines[2].strip("|").split("|")][1:]
    if len(cells) != len(names):
        raise FiguresError(f"{len(names)} schema columns but {len(cells)} figures: {lines[2]!r}")
    figures = {}
    for name, cell in zip(names, cells):
        m = _CELL.match(cell)
        if not m:
            raise FiguresError(f"figure for {name!r} is {cell!r}: expected 'mean ± std' (e.g. 0.7222 ± 0.0100)")
        figures[name] = (float(m.group(1)), float(m.group(2)))
    return Stated(seeds, figures)


def held_out(results_json: Path) -> dict[str, float]:
    """A run's ``held-out overall`` scores by schema, from its ``results.json``."""
    try:
        rows = json.loads(results_json.read_text())["table"]["rows"]
        return {schema: float(row["overall"]) for schema, row in rows.items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FiguresError(f"cannot read the held-out scores of {results_json}: {type(e).__name__}: {e}") from None


def schema_of(name: str, scores: dict[str, float]) -> str:
    """The results row a README column names (the rltf row may be named for its selection)."""
    if name in scores:
        return name
    matches = [k for k in scores if k.split(" (")[0] == name]
    if len(matches) != 1:
        raise FiguresError(f"column {name!r}: expected one results row named so, found {sorted(scores)}")
    return matches[0]


def compare(stated: Stated, runs: dict[int, dict[str, float]]) -> list[tuple[str, bool, str]]:
    """Per column: (name, within the stated spread, a line saying so)."""
    out = []
    for name, (mean, std) in stated.figures.items():
        values = [runs[s][schema_of(name, runs[s])] for s in stated.seeds]
        fresh = statistics.fmean(values)
        fresh_std = statistics.stdev(values) if len(values) > 1 else 0.0
        ok = abs(fresh - mean) <= std + 5e-5  # the stated figures are rounded to 4 decimals
        per_seed = " / ".join(f"{v:.4f}" for v in values)
        out.append((name, ok, f"{'ok  ' if ok else 'OUT '} {name:<10} stated {mean:.4f} ± {std:.4f}   "
                              f"fresh {fresh:.4f} ± {fresh_std:.4f}  ({per_seed})"))
    return out


def run_seed(seed: int, runs_dir: Path, launcher: str) -> Path:
    """The main job for one seed as the README runs it; returns its results.json."""
    folder = runs_dir / f"readme-seed{seed}"
    results = folder / "results.json"
    if results.is_file():
        return results
    cmd = ["accelerate", "launch"] if launcher == "accelerate" else [sys.executable]
    cmd += [str(REPO / "train" / "rltf.py"), f"seed={seed}", f"run_name=readme-seed{seed}",
            f"output_dir={runs_dir}", "logging.progress_bar=false", "overwrite=true"]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=REPO, check=True)
    return results


def versions() -> str:
    names = ("torch", "transformers", "accelerate")
    return ", ".join(f"{n} {importlib.metadata.version(n)}" for n in names)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    ap.add_argument("--runs-dir", type=Path, default=REPO / "checkpoints" / "readme-figures",
                    help="one run folder per seed (readme-seed<k>/); finished runs are reused")
    ap.add_argument("--launcher", choices=("accelerate", "python"), default="accelerate",
                    help="accelerate: as the README's main job (one thread per process)")
    args = ap.parse_args(argv)
    try:
        stated = read_stated(args.readme.read_text())
        runs = {s: held_out(run_seed(s, args.runs_dir, args.launcher)) for s in stated.seeds}
        verdicts = compare(stated, runs)
    except (FiguresError, subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"README main-job figures, seeds {', '.join(map(str, stated.seeds))} ({versions()}):")
    for _, _, line in verdicts:
        print(" ", line)
    bad = [name for name, ok, _ in verdicts if not ok]
    print("all within the stated spread" if not bad else f"outside the stated spread: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
