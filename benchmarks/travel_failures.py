"""Which official TravelPlanner constraints the plans of benchmark-track runs fail (issue 51).

Re-scores the held-out plans a run wrote (``results.json``: ``plans[schema][task id]``; or the
``eval.json`` of ``train/evaluate.py``, whose one schema is ``planner``) with the run's own env (its
``config.yaml``'s ``env.travel`` section, the evaluator's mode included: the benchmark track's is the
official one) and prints, per constraint by its official name, how many
plans fail it: per run, then the mean ± std over runs (seeds), for each label and schema. Also the
official metrics recomputed from the same verdicts (they must equal the run's ``results.md``) and
what the default shaped reward pays for fixing one failure of each constraint.

    python benchmarks/travel_failures.py base=/tmp/x/base/seed0,/tmp/x/base/seed1,/tmp/x/base/seed2 \\
        steps40=/tmp/x/s40/seed0,... [--schemas finetuned rltf]
    python benchmarks/travel_failures.py train=/tmp/x/base/seed0/sft/eval    # train/evaluate.py's eval.json
    python benchmarks/travel_failures.py --sample 16 base=/tmp/x/base/seed0,...  # what RLTF's samples fail

Run it from the project root (a config's ``queries_source`` is relative to it). A hard constraint
counts for a plan when the query sets it (the budget always); a hard constraint that was not judged
(the plan lacks information or leaves the sandbox) counts as failed; commonsense constraints count
for every plan (an undelivered plan fails all).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml

from envs.travel.config import RewardSettings
from envs.travel.factory import make_env
from envs.travel.official_metrics import LOCAL_VERDICT, METRICS, metrics
from envs.travel.verdicts import COMMONSENSE, CONSTRAINTS, HARD, OFFICIAL_KEYS, PAPER_NAMES

LOCAL_KEY = {"budget": None} | {verdict: key for key, verdict in LOCAL_VERDICT.items()}
"""A hard verdict's name -> the query's local-constraint key that sets it (None: every query)."""


def _files(folder: Path) -> tuple[dict, Path]:
    """The plans file of ``folder`` (a run's ``results.json``, or ``eval.json`` of ``train/evaluate.py``) and
    the run config that made them (the nearest ``config.yaml`` at or above the folder)."""
    name = "results.json" if (folder / "results.json").is_file() else "eval.json"
    config = next(p / "config.yaml" for p in (folder, *folder.parents) if (p / "config.yaml").is_file())
    return json.loads((folder / name).read_text()), config


def env_of(config: Path, split: str):
    """The env of the split named ``split`` (``train:re-split:test``) as the run's config built it."""
    cfg = yaml.safe_load(config.read_text())["env"]["travel"]
    cfg["reward"] = RewardSettings(**(cfg.get("reward") or {}))
    return make_env(cfg, split=split)


def tally(split: str, queries: list, evs: list, k: int = 1) -> dict:
    """``{"fail": {constraint: plans failing}, "applies": {constraint: plans it counts for}, "varies":
    {constraint: queries whose k plans disagree on it}, "metrics": the official metrics (k == 1), "n": plans,
    "failed_per_plan": [count per plan], "hard_set": [each plan's hard set]}`` (plans query-major, k a query)."""
    fail, applies, varies = (dict.fromkeys(CONSTRAINTS, 0) for _ in range(3))
    per_plan, seen = [], {}
    for i, (q, ev) in enumerate(zip(queries, evs)):
        failed = 0
        for c in CONSTRAINTS:
            if c in HARD and LOCAL_KEY[c] is not None and q.local_constraint.get(LOCAL_KEY[c]) is None:
                continue
            if c in COMMONSENSE:
                ok = ev.delivered and ev.commonsense.get(c) is not None and ev.commonsense[c].passed is True
            else:
                ok = ev.hard is not None and ev.hard[c].passed is True
            applies[c] += 1
            fail[c] += not ok
            failed += not ok
            seen.setdefault((i // k, c), set()).add(ok)
        per_plan.append(failed)
    for (_, c), oks in seen.items():
        varies[c] += len(oks) > 1
    return {"split": split, "fail": fail, "applies": applies, "varies": varies,
            "metrics": metrics(queries, evs) if k == 1 else None, "n": len(evs), "failed_per_plan": per_plan,
            "hard_set": [q.hard_constraint_count for q in queries]}


def score_run(run: Path, schemas: list[str]) -> dict[str, dict]:
    """``{schema: tally(...)}`` of the plans a run's ``results.json`` (or ``eval.json``) holds, on the split
    the file evaluated (its ``data.evaluated``); an ``eval.json`` has one schema, ``planner``."""
    results, config = _files(run)
    (split,) = results["data"]["evaluated"]
    env = env_of(config, split)
    plans = results["plans"]
    out = {}
    for schema in [s for s in schemas if s in plans] or list(plans):
        queries = [env.get_query(int(task_id)) for task_id in plans[schema]]
        evs = [env.evaluator.evaluate(q, text) for q, text in zip(queries, plans[schema].values())]
        out[schema] = tally(split, queries, evs)
    return out


def sample_run(run: Path, k: int) -> dict[str, dict]:
    """``{"sampled": tally(...)}`` of ``k`` plans per train-part query drawn at temperature 1 from the run's
    fine-tuned planner (``<run>/sft``, the start RLTF samples from; prompts cut to planner.max_prompt_tokens
    from the left, as the run does): what the training reward sees."""
    import torch  # deferred: torch and the planner load only for --sample

    from constrained_decoding.decode import sample_plans  # deferred: needs torch (--sample only)
    from rltf.planners.hf_models import load_model, load_tokenizer  # deferred: needs torch (--sample only)

    torch.set_num_threads(1)
    config = yaml.safe_load((run / "config.yaml").read_text())
    split = f"{config['env']['travel']['queries_split']}:re-split:train"
    env = env_of(run / "config.yaml", split)
    model, encoder_decoder = load_model(str(run / "sft"), "float32", "auto", False)
    tokenizer = load_tokenizer(str(run / "sft"), encoder_decoder)
    tokenizer.model_max_length, tokenizer.truncation_side = config["planner"]["max_prompt_tokens"], "left"
    tasks = env.tasks()
    grammars = [env.grammar(tokenizer, t.id) for t in tasks]
    drawn = sample_plans(model, tokenizer, [t.description for t in tasks], grammars, k=k, temperature=1.0,
                         seed=int(config["seed"]))
    queries = [env.get_query(t.id) for t in tasks for _ in range(k)]
    evs = [env.evaluator.evaluate(q, d.plan if isinstance(d.plan, str) else env.format_plan(d.plan))
           for q, d in zip(queries, (d for plans in drawn for d in plans))]
    return {"sampled": tally(split, queries, evs, k)}


def mean_std(values: list[float], digits: int = 1) -> str:
    m = statistics.fmean(values)
    s = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def reward_per_fix(constraint: str, scored: list[dict], weights: RewardSettings) -> float:
    """What the default shaped reward gains when one failing plan passes this constraint (all else
    equal, final pass not reached): commonsense w_c / 8, hard w_h / the query's hard set, over the sum."""
    total = weights.final_pass + weights.commonsense + weights.hard + weights.constraints
    if constraint in COMMONSENSE:
        return weights.commonsense / len(COMMONSENSE) / total
    sets = [h for s in scored for h in s["hard_set"]]
    return weights.hard / statistics.fmean(sets) / total if sets else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("groups", nargs="+", help="LABEL=RUN_DIR[,RUN_DIR...]: the runs (seeds) of one variant")
    ap.add_argument("--schemas", nargs="+", default=["finetuned", "rltf"])
    ap.add_argument("--sample", type=int, default=0, metavar="K",
                    help="instead of the written plans: K plans per train-part query sampled at temperature 1 from "
                         "each run's fine-tuned planner (what RLTF's reward sees)")
    args = ap.parse_args(argv)
    columns: list[tuple[str, str, list[dict]]] = []
    for group in args.groups:
        label, _, dirs = group.partition("=")
        runs = [sample_run(Path(d), args.sample) if args.sample else score_run(Path(d), args.schemas)
                for d in dirs.split(",") if d]
        for schema in runs[0]:
            columns.append((label, schema, [r[schema] for r in runs]))
    n = columns[0][2][0]["n"]
    splits = sorted({r["split"] for _, _, runs in columns for r in runs})
    print(f"Plans failing each official constraint, of {n} plans a run on {', '.join(splits)} (mean ± std over "
          "runs; a hard constraint: of the plans whose query sets it)\n")
    head = " | ".join(f"{label} {schema} (n={len(runs)})" for label, schema, runs in columns)
    print(f"| constraint (eval.py key) | kind | {head} | default reward per fix |")
    print("|---|---|" + "---|" * len(columns) + "---|")
    weights = RewardSettings()
    for c in CONSTRAINTS:
        kind = "commonsense" if c in COMMONSENSE else "hard"
        cells = " | ".join(f"{mean_std([r['fail'][c] for r in runs])} of {runs[0]['applies'][c]}"
                           for _, _, runs in columns)
        per_fix = reward_per_fix(c, columns[0][2], weights)
        print(f"| {PAPER_NAMES[c]} (`{OFFICIAL_KEYS[c]}`) | {kind} | {cells} | {per_fix:.3f} |")
    cells = " | ".join(mean_std([statistics.fmean(r["failed_per_plan"]) for r in runs], 2) for _, _, runs in columns)
    print(f"| failed constraints per plan | | {cells} | |")
    cells = " | ".join(mean_std([sum(f == 1 for f in r["failed_per_plan"]) for r in runs]) for _, _, runs in columns)
    print(f"| plans one constraint short of final pass | | {cells} | |")
    if args.sample:
        print(f"\nQueries (of {len(columns[0][2][0]['hard_set']) // args.sample}) whose {args.sample} samples disagree "
              "on the constraint: where the reward has a gradient on it (mean ± std over runs)\n")
        print("| constraint | " + " | ".join(f"{label} {schema}" for label, schema, _ in columns) + " |")
        print("|---|" + "---|" * len(columns))
        for c in CONSTRAINTS:
            print(f"| {PAPER_NAMES[c]} | " + " | ".join(mean_std([r["varies"][c] for r in runs])
                                                     for _, _, runs in columns) + " |")
        cells = " | ".join(mean_std([statistics.fmean(f == 0 for f in r["failed_per_plan"]) for r in runs], 3)
                           for _, _, runs in columns)
        print(f"| sampled plans passing every constraint (final pass) | {cells} |")
        return 0
    print("\nOfficial metrics recomputed from the same verdicts (mean ± std over runs)\n")
    print("| variant | schema | " + " | ".join(METRICS) + " |")
    print("|---|---|" + "---|" * len(METRICS))
    for label, schema, runs in columns:
        cells = " | ".join(mean_std([r["metrics"][m] for r in runs], 3) for m in METRICS)
        print(f"| {label} | {schema} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
