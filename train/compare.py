"""Comparison of training recipes over seeds: run every arm of a suite, then tabulate and plot.

    OMP_NUM_THREADS=1 nice -n 10 python train/compare.py suite=openagi-grpo
    OMP_NUM_THREADS=1 nice -n 10 python train/compare.py suite=smollm2           # RLTF vs TRL GRPO on SmolLM2
    python train/compare.py suite=openagi-grpo seeds=1 arms=[grpo,rltf-causal]   # a part of it
    python train/compare.py suite=openagi-grpo report_only=true                   # tabulate what ran
    python train/compare.py suite=openagi-grpo dry_run=true                       # the commands; runs nothing
    python train/compare.py suite=openagi-grpo name=quick rltf.steps=10           # extra key=value: every arm

A suite is a YAML file (``configs/compare/<suite>.yaml``, or a path): its arms (entry point +
overrides), its table rows and its number of seeds (:mod:`rltf.comparison.suites`). Each (arm, seed) runs
as its own process into ``<output_dir>/<name>/<arm>/seed<k>/`` (``name`` defaults to the suite's
name); a run whose results exist is not run again, so a killed comparison continues where it
stopped. Writes ``compare.md``, ``compare.json`` and ``compare.png`` (held-out score and train
reward vs plans sampled) into ``<output_dir>/<name>/``.

Ctrl-C (SIGINT) stops the run in progress first (:mod:`rltf.comparison.runs`), then prints one
``error: interrupted`` line and exits with status 130.

Recipe arguments: ``suite``, ``name``, ``output_dir`` (``checkpoints``), ``seeds`` (a count, or a
list ``[0,2]``), ``arms`` (a list of arm names), ``report_only``, ``dry_run``; any other
``key=value`` is passed to every arm.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import yaml  # noqa: E402

from rltf.comparison.report import write_report  # noqa: E402
from rltf.comparison.runs import RunRecord, dir_arg, planned_runs, run_suite  # noqa: E402
from rltf.comparison.suites import SUITE_DIR, Suite, check_arms, load_suite  # noqa: E402
from rltf.config.loading import REPO_ROOT, ConfigError  # noqa: E402
from rltf.run.cli import run_cli  # noqa: E402

RECIPE_KEYS = ("suite", "name", "output_dir", "seeds", "arms", "report_only", "dry_run")


def parse_args(argv: list[str]) -> tuple[dict, list[str]]:
    """The recipe's own arguments and the ``key=value`` arguments passed on to every arm."""
    opts: dict = {"suite": None, "name": None, "output_dir": "checkpoints", "seeds": None, "arms": None,
                  "report_only": False, "dry_run": False}
    extra = []
    for raw in argv:
        arg = raw.removeprefix("--")
        key, eq, value = arg.partition("=")
        if not eq:
            raise ConfigError(f"argument {raw!r}: expected key=value")
        if key in RECIPE_KEYS:
            try:
                opts[key] = yaml.safe_load(value) if key not in ("suite", "name", "output_dir") else value
            except yaml.YAMLError as e:  # a control character...
                raise ConfigError(f"cannot parse argument {raw!r}: {' '.join(str(e).split())}") from None
        else:
            extra.append(arg)
    if not opts["suite"]:
        known = sorted(p.stem for p in SUITE_DIR.glob("*.yaml"))
        raise ConfigError(f"suite=<name> is required; known suites: {', '.join(known)}")
    for key in ("report_only", "dry_run"):
        if not isinstance(opts[key], bool):
            raise ConfigError(f"bad value for '{key}': {opts[key]!r}; expected true or false")
    arms = opts["arms"] = [opts["arms"]] if isinstance(opts["arms"], str) else opts["arms"]
    if arms is not None and not (isinstance(arms, list) and all(isinstance(a, str) for a in arms)):
        raise ConfigError(f"bad value for 'arms': {opts['arms']!r}; expected a list of arm names")
    return opts, extra


def seed_list(value, suite: Suite) -> list[int]:
    if value is None:
        return list(range(suite.seeds))
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return list(range(value))
    if isinstance(value, list) and value and all(isinstance(s, int) and s >= 0 for s in value):
        return list(dict.fromkeys(value))
    raise ConfigError(f"bad value for 'seeds': {value!r}; expected a count (3) or a list of seeds ([0,2])")


def main(argv: list[str] | None = None) -> dict:
    opts, extra = parse_args(sys.argv[1:] if argv is None else argv)
    suite = load_suite(opts["suite"])
    seeds = seed_list(opts["seeds"], suite)
    names = [a.name for a in suite.arms]
    if opts["arms"] is not None and (bad := [a for a in opts["arms"] if a not in names]):
        raise ConfigError(f"arms={bad}: not in suite {suite.name} (arms: {', '.join(names)})")
    root = Path(opts["output_dir"]) / (opts["name"] or suite.name)
    if not root.is_absolute():
        root = REPO_ROOT / root
    records: list[RunRecord] = []
    if not opts["report_only"]:
        check_arms(suite, extra, opts["arms"])  # a bad key fails now, not after an hour
        if opts["dry_run"]:
            for s, a in planned_runs(suite, seeds, opts["arms"]):
                print(f"{sys.executable} " + " ".join(a.command(suite.common, extra, s, dir_arg(root / a.name))))
            return {}
        records = run_suite(suite, root, extra, seeds=seeds, arms=opts["arms"])
    summary = write_report(suite, root, records, seeds)
    if any(r.status == "failed" for r in records):
        raise SystemExit(1)
    return summary


INTERRUPTED_ADVICE = "the run in progress was stopped first; run the same command again to continue where it stopped"


if __name__ == "__main__":
    # user-facing errors: one line on stderr, exit status 2; Ctrl-C (rltf.comparison.runs ended the run in
    # progress before raising it): one "error: interrupted (SIGINT); ..." line, exit status 130
    run_cli(main, interrupted=INTERRUPTED_ADVICE)
