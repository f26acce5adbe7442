"""How diverse each arm's planners are, before and after training (issue #37): distinct plans per task, the
top plan's probability and the entropy of the constrained policy pi_c, measured on the held-out tasks of
every run of a ``train/compare.py`` suite.

    OMP_NUM_THREADS=1 python benchmarks/final_diversity.py checkpoints/verdict-travel \\
        --out benchmarks/results/verdict-travel [--arms rltf grpo-constrained] [--samples 16]

A run folder is ``<suite folder>/<arm>/seed<k>/`` with the ``config.yaml`` its recipe wrote (and, the run
finished, its ``results.json``). Its planners:

* ``final``: what the run trained. An RLTF run: the planner it reported as ``rltf`` (its
  ``rltf_selection``, resolved as ``train/evaluate.py planner.model=<run>`` resolves it). A GRPO run
  (``train/grpo.py``): ``grpo/planner``.
* ``start``: the planner training began from, the run's ``sft/`` (RLTF and constrained GRPO: the
  constrained SFT; text GRPO: TRL's text SFT). Runs whose ``sft/`` weights are byte-identical (the arms
  of a suite share one start per seed) are measured once. The table says how many runs shared each.

Each planner is loaded with its run's own config (``planner.model`` pointed at the folder) and measured by
:func:`rltf.evaluation.diversity.validation_diversity` (``--samples`` and ``--max-plans`` as its ``eval.``
keys) on the run's held-out tasks (``eval.splits``), as a validation measures it: ``--samples`` draws
per task from pi_c at ``rltf.temperature`` (every arm the same
temperature: the policy RLTF samples from), seeded by the run's seed and each task's id; the entropy exact
where a task has at most ``--max-plans`` plans, else estimated, and the top plan exact there, else the
best of a beam search of ``eval.num_beams`` and the samples (a lower bound). Writes ``diversity.json``
(per planner, per task, and per arm: mean ± std over seeds) and ``diversity.md``; ``--out`` defaults
to the suite folder. Nothing in the run folders is written. Resumable: a planner already in the
``diversity.json`` being replaced (same weights by sha256, same seed, same settings) is not measured
again, so a later call after more arms ran measures only those; the file is rewritten after each
planner measured.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from rltf.config.loading import ConfigError, load_config  # noqa: E402
from rltf.evaluation.diversity import validation_diversity  # noqa: E402
from rltf.planners.source import resolve_planner_source  # noqa: E402
from rltf.run.cli import run_cli  # noqa: E402
from rltf.stages import plan_job as stages  # noqa: E402

KEYS = ("distinct_plans", "top_plan_prob", "entropy", "entropy_exact_share")
STAGES = ("start", "final")


def run_folders(suite_dir: Path, arms: list[str] | None = None) -> list[tuple[str, int, Path]]:
    """``(arm, seed, folder)`` of every finished run under ``suite_dir`` (a ``seed<k>/`` in an arm's folder
    holding the ``config.yaml`` its recipe writes first and the ``results.json`` it writes last: a run still
    going is left out), arms in the suite's order (its ``compare.json``; else by name), seeds in number order;
    ``arms`` keeps only those."""
    found = []
    for config in sorted(suite_dir.glob("*/seed*/config.yaml")):
        folder = config.parent
        arm, name = folder.parent.name, folder.name
        if name[4:].isdigit() and (folder / "results.json").is_file() and (arms is None or arm in arms):
            found.append((arm, int(name[4:]), folder))
    missing = sorted(set(arms or ()) - {a for a, _, _ in found})
    if missing:
        raise ConfigError(f"--arms {' '.join(missing)}: no finished run (<arm>/seed<k>/ with config.yaml and "
                          f"results.json) under {suite_dir}")
    order = list(json.loads((suite_dir / "compare.json").read_text()).get("runs", {})) \
        if (suite_dir / "compare.json").is_file() else []
    return sorted(found, key=lambda r: (order.index(r[0]) if r[0] in order else len(order), r[0], r[1]))


def planner_folders(run: Path) -> dict[str, Path]:
    """The run's ``start`` and ``final`` planner folders (those it has: a bounds run has none)."""
    found = {}
    if (run / "sft" / "config.json").is_file() or (run / "sft" / "adapter_config.json").is_file():
        found["start"] = run / "sft"
    if (run / "grpo" / "planner").is_dir():
        found["final"] = run / "grpo" / "planner"
    elif (run / "rltf").is_dir() and (run / "results.json").is_file():
        found["final"] = Path(resolve_planner_source(str(run)).location)
    return found


def weights_digest(folder: Path) -> str:
    """sha256 over the folder's weight files (safetensors / bin), in name order."""
    h = hashlib.sha256()
    files = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin"))
    if not files:
        raise ConfigError(f"{folder}: no weight files (*.safetensors, *.bin); expected a saved planner folder")
    for p in files:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def measure(run: Path, folder: Path, samples: int, max_plans: int, top_plans: bool = False) -> dict:
    """One planner's diversity on its run's held-out tasks (see the module docstring); each task's most
    likely plan's text only with ``top_plans``."""
    cfg = load_config([f"config={run / 'config.yaml'}", f"planner.model={folder}", "logging.progress_bar=false",
                       f"eval.diversity_samples={samples}", f"eval.diversity_max_plans={max_plans}"])
    started = time.process_time()
    job = stages.start(cfg, write_config=False)
    envs = stages.build_envs(job)
    planner = stages.build_planner(job, envs)
    tasks = envs.tasks(cfg.eval.splits)
    found = validation_diversity(planner, envs.held_out, tasks, cfg)  # as a validation measures it
    return {"folder": str(folder), "splits": list(cfg.eval.splits), "n_tasks": len(tasks), "seed": cfg.seed,
            "temperature": cfg.rltf.temperature, "cpu_s": time.process_time() - started,
            **without_plans(found.as_dict(), keep=top_plans)}


def without_plans(entry: dict, keep: bool = False) -> dict:
    """``entry`` with its per-task most likely plans' text dropped (unless ``keep``)."""
    if keep or "tasks" not in entry:
        return entry
    return {**entry, "tasks": [{k: v for k, v in t.items() if k != "top_plan"} for t in entry["tasks"]]}


def earlier(path: Path, samples: int, max_plans: int) -> dict[tuple[int, str], dict]:
    """``{(seed, digest): entry}`` of the planners an earlier call measured into ``path`` with the same
    ``samples`` and ``max_plans`` (a later call measures only what is new: a suite's later arms, or a
    run retrained since; the same weights under the same seed give the same figures); empty when there
    is no such file."""
    if not path.is_file():
        return {}
    try:
        before = json.loads(path.read_text())
    except ValueError as e:
        raise ConfigError(f"{path}: not JSON ({e}); expected an earlier diversity.json (delete it to start over)") \
            from None
    if (before.get("samples"), before.get("max_plans")) != (samples, max_plans):
        return {}
    found = [*before.get("planners", []), *before.get("kept", [])]
    return {(p["seed"], p["digest"]): {k: v for k, v in p.items() if k not in ("arm", "stage", "run")}
            for p in found if "digest" in p and "seed" in p and "same_as" not in p}


def summarise(planners: list[dict]) -> dict:
    """``{arm: {stage: {key: {"mean", "std", "n"}}}}``: each key's per-run means, mean ± std over seeds."""
    out: dict = {}
    for p in planners:
        out.setdefault(p["arm"], {}).setdefault(p["stage"], []).append(p["means"])
    for arm, by_stage in out.items():
        for stage, rows in by_stage.items():
            by_stage[stage] = {k: {"mean": float(np.mean([r[k] for r in rows])),
                                   "std": float(np.std([r[k] for r in rows], ddof=1)) if len(rows) > 1 else 0.0,
                                   "n": len(rows)} for k in KEYS}
    return out


def _fmt(value: float, key: str) -> str:
    """Two decimals; a probability to 3, or in powers of ten below 0.01 (travel itineraries: ~1e-3)."""
    if key != "top_plan_prob":
        return f"{value:.2f}"
    return f"{value:.3f}" if value >= 0.01 or value == 0 else f"{value:.1e}"


def markdown(result: dict) -> str:
    samples = result["samples"]
    lines = [f"### Policy diversity of each arm's planners on the held-out tasks ({samples} draws per task)", "",
             "`python benchmarks/final_diversity.py <suite folder>`: pi_c at the runs' sampling temperature "
             f"({', '.join(map(str, result['temperatures']))}), each run's seed and held-out tasks; per arm, "
             "mean ± std over seeds of the per-run means over tasks. Start: the planner the run trained from "
             "(runs with byte-identical starts measured once); final: the planner it reported. Top plan "
             "probability: exact where the task's plans were enumerated (share in the last column), else the best "
             "of a beam search and the samples (a lower bound).", "",
             "| arm | planner | seeds | distinct plans | top plan π_c | entropy (nats) | exact share |",
             "|---|---|---|---|---|---|---|"]
    for arm, by_stage in result["arms"].items():
        for stage in STAGES:
            if stage not in by_stage:
                continue
            s = by_stage[stage]
            lines.append(f"| {arm} | {stage} | {s['distinct_plans']['n']} | "
                         + " | ".join(f"{_fmt(s[k]['mean'], k)} ± {_fmt(s[k]['std'], k)}" for k in KEYS[:3])
                         + f" | {s['entropy_exact_share']['mean']:.2f} |")
    shared = [p for p in result["planners"] if p.get("same_as")]
    if shared:
        lines += ["", f"Starts shared: {len(shared)} runs' starts are byte-identical to a start measured for another "
                      "arm's run of the same seed (listed in diversity.json, `same_as`)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite_dir", type=Path, help="a train/compare.py suite's output folder")
    ap.add_argument("--arms", nargs="+", default=None, help="only these arms (default: every arm with runs)")
    ap.add_argument("--samples", type=int, default=16, help="draws from pi_c per task (default 16)")
    ap.add_argument("--max-plans", type=int, default=100,
                    help="enumerate a task's plans for the exact entropy when it has at most this many (default 100)")
    ap.add_argument("--out", type=Path, default=None, help="where diversity.json / .md go (default: the suite folder)")
    ap.add_argument("--top-plans", action="store_true",
                    help="keep each task's most likely plan's text in diversity.json (a travel itinerary: ~3 KB)")
    args = ap.parse_args(argv)
    if not args.suite_dir.is_dir():
        raise ConfigError(f"suite folder {str(args.suite_dir)!r}: no such directory; expected a train/compare.py "
                          "output folder (checkpoints/<suite>)")
    if args.samples < 1:  # before anything loads
        raise ConfigError(f"--samples {args.samples}: expected at least 1 draw per task")
    out = args.out or args.suite_dir
    done = earlier(out / "diversity.json", args.samples, args.max_plans)
    planners, measured = [], {}
    for arm, seed, run in run_folders(args.suite_dir, args.arms):
        for stage, folder in planner_folders(run).items():
            entry = {"arm": arm, "seed": seed, "stage": stage, "run": str(run), "digest": weights_digest(folder)}
            key = (seed, entry["digest"]) if stage == "start" else None
            if key in measured:
                first = measured[key]
                entry.update({k: v for k, v in first.items() if k not in entry and k != "tasks"},
                             same_as=f"{first['arm']} seed {seed}")
            elif (seed, entry["digest"]) in done:  # measured by an earlier call: the same weights and seed
                reused = without_plans(done.pop((seed, entry["digest"])), keep=args.top_plans)
                entry.update({k: v for k, v in reused.items() if k not in entry})
            else:
                print(f"{arm} seed {seed} {stage}: {folder}", flush=True)
                entry.update(measure(run, folder, args.samples, args.max_plans, args.top_plans))
                print(f"  {entry['means']}  ({entry['cpu_s']:.0f} CPU s)", flush=True)
                write(out, args, planners + [entry], done)  # a killed call loses at most the planner it measured
            if key is not None and key not in measured:
                measured[key] = entry
            planners.append(entry)
    if not planners:
        raise ConfigError(f"{args.suite_dir}: no run with a planner folder (sft/, grpo/planner, rltf/)")
    result = write(out, args, planners, done)
    print(markdown(result))
    print(f"wrote {out / 'diversity.json'} and {out / 'diversity.md'}")
    return 0


def write(out: Path, args: argparse.Namespace, planners: list[dict], unused: dict[tuple[int, str], dict]) -> dict:
    """``diversity.json`` (written whole, then renamed over the old one) and ``diversity.md``: the table of
    ``planners``; ``kept``: an earlier call's measurements this call has not used (another arm's), kept
    for a later call to reuse."""
    result = {"suite_dir": str(args.suite_dir), "samples": args.samples, "max_plans": args.max_plans,
              "temperatures": sorted({p["temperature"] for p in planners}), "arms": summarise(planners),
              "planners": planners, "kept": list(unused.values())}
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "diversity.json.tmp"
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(out / "diversity.json")
    (out / "diversity.md").write_text(markdown(result))
    return result

if __name__ == "__main__":
    run_cli(main)
