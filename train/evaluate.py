"""Held-out evaluation of a planner checkpoint: the paper's learning schemas and the bounds.

    python train/evaluate.py planner.model=checkpoints/default/rltf/checkpoint-200/planner \
        eval.splits=[test,validation] [schemas=zero,few,rltf,reference,oracle]

``planner.model`` is anything ``from_pretrained`` loads (a saved planner, an adapter folder, a
hub id). The constrained schema is reported as ``rltf`` (name it with ``name=finetuned``).
Prints the table and writes ``eval.md`` / ``eval.json`` into the run folder.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from envs.openagi.split import load_split  # noqa: E402
from rltf import evaluate as ev  # noqa: E402
from rltf.config import load_config  # noqa: E402
from rltf.pipeline import make_envs  # noqa: E402
from rltf.planner_loading import load_planner  # noqa: E402
from rltf.tracking import write_json  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    schemas, name = ["rltf", "reference", "oracle"], "rltf"
    rest = []
    for a in argv:
        if a.startswith("schemas="):
            schemas = [s for s in a.split("=", 1)[1].split(",") if s]
        elif a.startswith("name="):
            name = a.split("=", 1)[1]
        else:
            rest.append(a)
    bad = [s for s in schemas if s not in ev.SCHEMAS]
    if bad:
        raise SystemExit(f"unknown schema(s) {bad}; expected any of {', '.join(ev.SCHEMAS)}")
    cfg = load_config(rest)
    train_env, eval_env = make_envs(cfg)
    split = load_split(cfg.env.suite)
    tasks = [eval_env.get_task(i) for s in cfg.eval.splits for i in split[s]]
    planner = load_planner(cfg.planner)
    train = train_env.tasks()
    results = []
    for s in schemas:
        if s in ("zero", "few"):
            shots = train[: cfg.eval.few_shot_k] if s == "few" else []
            results.append(ev.free_form_schema(s, planner, eval_env, tasks, shots, cfg.planner.max_plan_tokens))
        elif s in ("finetuned", "rltf"):
            results.append(ev.constrained_schema(name if s == "rltf" else s, planner, eval_env, tasks,
                                                 cfg.eval.num_beams))
        elif s == "reference":
            results.append(ev.reference_schema(eval_env, tasks))
        else:
            results.append(ev.oracle_schema(eval_env, tasks))
    table = ev.results_table(results, tasks)
    md = ev.table_markdown(table, f"{cfg.planner.model} on {'+'.join(cfg.eval.splits)}")
    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    (cfg.run_dir / "eval.md").write_text(md)
    write_json(cfg.run_dir / "eval.json", {"table": table, "plans": {r.schema: r.plans for r in results}})
    print(md)
    print("overall: " + " ".join(f"{r.schema}={r.overall:.4f}" for r in results))


if __name__ == "__main__":
    main()
