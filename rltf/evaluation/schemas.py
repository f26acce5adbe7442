"""Held-out evaluation: the paper's four learning schemas, plus the reference plans and the oracle.

* ``zero`` / ``few`` — the planner writes free text (unconstrained greedy ``generate``; few-shot
  prompts carry ``k`` solved train tasks), mapped onto a valid plan by MiniLM sentence similarity
  (OpenAGI's method); text that maps onto no valid plan scores 0.
* ``finetuned`` / ``rltf`` — constrained beam search, best plan.
* ``reference`` — the suite's reference plans (the supervised labels); ``oracle`` — the best plan
  by exhaustive search. Both bound the planners from either side.

Any env with the trainer's interface works (OpenAGI's, the travel sandbox's): tasks with ``id``,
``description`` and ``reference_plan``, ``env.grammar`` and ``env.reward_plans``. On OpenAGI,
scores are per task (mean over the task's samples) and the table averages them per metric family
and overall (every task weighs the same), like the paper's Table 5; an env with its own metrics
(``env.table_columns``: the travel benchmark's delivery, commonsense / hard micro and macro and
final pass rates) gives those columns, plus the mean reward. The schema names and their
table order are ``rltf.config.sections.EVAL_SCHEMAS``; ``rltf.stages.plan_job.evaluate`` picks the function per
schema, the held-out tasks and the few-shot examples.

With ~10 held-out tasks one task moves a mean by several points: the table gives each schema's
overall score (an env's own table: its mean reward) with a 95% percentile-bootstrap interval over
tasks (:func:`bootstrap_interval`, seeded, so the same scores always give the same interval), e.g.
``0.7367 [0.61, 0.85]``; the interval is stored under the table's ``intervals``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from constrained_decoding.decode import beam_search_plans
from constrained_decoding.prompts import encode_formatted, format_prompt
from envs.openagi.env import OpenAGIEnv
from envs.openagi.freeform import map_free_text_to_plan
from envs.openagi.oracle import oracle_for_task
from envs.openagi.plans import PlanError, format_plan

Task = Any  # a task of any env: ``id``, ``description``, ``reference_plan`` (OpenAGI's Task, TravelTask)
Env = Any  # OpenAGIEnv, TravelPlannerEnv: ``grammar``, ``reward_plans``, ``tasks``, ``get_task``

@dataclass
class SchemaResult:
    schema: str
    plans: dict[int, str] = field(default_factory=dict)
    scores: dict[int, float] = field(default_factory=dict)

    @property
    def overall(self) -> float:
        return float(np.mean(list(self.scores.values()))) if self.scores else 0.0


def constrained_schema(name: str, planner, env: Env, tasks: Sequence[Task], num_beams: int) -> SchemaResult:
    """Best plan of a constrained beam search per task, scored on all of the task's samples."""
    best = beam_search_plans(planner.model, planner.tokenizer, [t.description for t in tasks],
                             [env.grammar(planner.tokenizer, t) for t in tasks], num_beams=num_beams, num_return=1)
    return _schema_result(name, env, tasks, [b[0].plan for b in best])


def few_shot_prompt(task: Task, examples: Sequence[Task], encoder_decoder: bool) -> str:
    shots = "".join(f"Task: {e.description}\nPlan: {plan_text(e.reference_plan)}\n\n" for e in examples)
    return format_prompt(f"{shots}Task: {task.description}", encoder_decoder) if shots else \
        format_prompt(task.description, encoder_decoder)


def plan_text(plan: Any) -> str:
    """A reference plan as the text a planner writes (travel's are text already)."""
    return plan if isinstance(plan, str) else format_plan(plan)


@torch.inference_mode()
def free_text(planner, prompts: Sequence[str], max_new_tokens: int = 64, batch_size: int = 16) -> list[str]:
    """Unconstrained greedy continuations (what a zero-/few-shot planner writes)."""
    model, tok = planner.model, planner.tokenizer
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out: list[str] = []
    try:
        for i in range(0, len(prompts), batch_size):
            ids = encode_formatted(tok, prompts[i : i + batch_size], planner.is_encoder_decoder)
            enc = tok.pad({"input_ids": ids}, return_tensors="pt").to(device)
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                 pad_token_id=tok.pad_token_id)
            if not planner.is_encoder_decoder:
                gen = gen[:, enc["input_ids"].shape[1]:]
            out.extend(tok.batch_decode(gen, skip_special_tokens=True))
    finally:
        model.train(was_training)
    return out


def free_form_schema(name: str, planner, env: Env, tasks: Sequence[Task], examples: Sequence[Task],
                     max_new_tokens: int = 64) -> SchemaResult:
    prompts = [few_shot_prompt(t, examples, planner.is_encoder_decoder) for t in tasks]
    texts = free_text(planner, prompts, max_new_tokens)
    if not isinstance(env, OpenAGIEnv):  # the text is the plan (travel: parsed by the evaluator)
        return _schema_result(name, env, tasks, texts)
    plans = []
    for t, text in zip(tasks, texts):
        try:
            plans.append(map_free_text_to_plan(text, env.registry, (t.inputs, t.target), env.limits))
        except PlanError:
            plans.append(text)  # scored as the invalid plan it is: 0
    return _schema_result(name, env, tasks, plans)


def reference_schema(env: Env, tasks: Sequence[Task]) -> SchemaResult:
    return _schema_result("reference", env, tasks, [t.reference_plan for t in tasks])


def oracle_schema(env: Env, tasks: Sequence[Task]) -> SchemaResult:
    res = SchemaResult("oracle")
    for t in tasks:
        if isinstance(env, OpenAGIEnv):
            e = oracle_for_task(env, t)
            res.plans[t.id], res.scores[t.id] = e.oracle_plan, e.oracle_score
        else:  # the env's own oracle (travel: the exact solver)
            res.plans[t.id], res.scores[t.id] = env.oracle(t)
    return res


def _schema_result(name: str, env: Env, tasks: Sequence[Task], plans) -> SchemaResult:
    res = SchemaResult(name)
    for t, r in zip(tasks, env.reward_plans(list(zip(tasks, plans)))):
        res.plans[t.id], res.scores[t.id] = r.plan_text, r.reward
    return res


BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_LEVEL = 0.95
BOOTSTRAP_SEED = 0


def bootstrap_interval(scores: Sequence[float] | np.ndarray, *, resamples: int = BOOTSTRAP_RESAMPLES,
                       level: float = BOOTSTRAP_LEVEL, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``scores`` (one per task): the ``(1 - level) / 2``
    and ``(1 + level) / 2`` quantiles of the means of ``resamples`` resamples of the tasks drawn with
    replacement, from a generator seeded by ``seed`` (same scores, same interval). The spread over
    *tasks* (which tasks happened to be held out), not over training seeds. No scores: ``(nan, nan)``."""
    x = np.asarray(scores, dtype=np.float64).ravel()
    if not 0 < level < 1:
        raise ValueError(f"level={level}: expected a number in (0, 1)")
    if resamples < 1:
        raise ValueError(f"resamples={resamples}: expected at least 1")
    if x.size == 0:
        return float("nan"), float("nan")
    idx = np.random.default_rng(seed).integers(0, x.size, size=(resamples, x.size))
    means = x[idx].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def format_interval(value: float, interval: Sequence[float] | None) -> str:
    """``0.7367 [0.61, 0.85]`` (the value alone without an interval)."""
    if interval is None or any(v is None or not np.isfinite(v) for v in interval):
        return f"{value:.4f}"
    return f"{value:.4f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def headline(env: Env) -> str:
    """The table column the main job's last line reports: ``overall`` on OpenAGI, the env's
    own headline metric otherwise (travel: ``final pass``)."""
    return getattr(env, "headline", "overall")


def results_table(results: Sequence[SchemaResult], tasks: Sequence[Task], env: Env | None = None) -> dict:
    """``{"columns": [...], "n_tasks": {column: n}, "rows": {schema: {column: value}},
    "intervals": {schema: [low, high]}, "interval": {...}}``: per metric family and overall
    (OpenAGI), or the env's own metrics (``env.table_columns``) plus the mean reward. ``intervals``
    are the bootstrap intervals over tasks (:func:`bootstrap_interval`) of the mean of each
    schema's per-task scores, i.e. of the ``interval["column"]`` column (``overall``; an env's own
    table: ``reward``)."""
    if env is not None and hasattr(env, "table_columns"):
        rows = {r.schema: {**env.table_columns(tasks, r.plans), "reward": r.overall} for r in results}
        columns = list(next(iter(rows.values()))) if rows else ["reward"]
        return {"columns": columns, "n_tasks": {c: len(tasks) for c in columns}, "rows": rows,
                **_intervals(results, tasks, "reward")}
    by_metric: dict[str, list[int]] = defaultdict(list)
    for t in tasks:
        by_metric[t.metric].append(t.id)
    columns = [*sorted(by_metric), "overall"]
    rows = {}
    for r in results:
        row = {m: float(np.mean([r.scores[i] for i in ids])) for m, ids in sorted(by_metric.items())}
        row["overall"] = r.overall
        rows[r.schema] = row
    return {"columns": columns, "n_tasks": {m: len(v) for m, v in by_metric.items()} | {"overall": len(tasks)},
            "rows": rows, **_intervals(results, tasks, "overall")}


def _intervals(results: Sequence[SchemaResult], tasks: Sequence[Task], column: str) -> dict:
    intervals = {r.schema: list(bootstrap_interval([r.scores[t.id] for t in tasks if t.id in r.scores]))
                 for r in results}
    return {"intervals": intervals, "interval": {"column": column, "level": BOOTSTRAP_LEVEL,
                                                 "resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED,
                                                 "over": "tasks"}}


def table_markdown(table: dict, title: str, labels: dict[str, str] | None = None) -> str:
    """The table as markdown; ``labels`` rename schema rows (e.g. travel's oracle is the solver).
    The interval column (``overall``; an env's own table: ``reward``) shows each schema's
    bootstrap interval: ``0.7367 [0.61, 0.85]``."""
    labels = labels or {}
    cols = table["columns"]
    intervals = table.get("intervals", {})
    icol = table.get("interval", {}).get("column")

    def cell(schema: str, row: dict, c: str) -> str:
        return format_interval(row[c], intervals.get(schema)) if c == icol else f"{row[c]:.4f}"

    head = "| schema | " + " | ".join(f"{c} ({table['n_tasks'][c]})" for c in cols) + " |"
    lines = [f"### {title}", "", head, "|" + "---|" * (len(cols) + 1)]
    for schema, row in table["rows"].items():
        lines.append(f"| {labels.get(schema, schema)} | " + " | ".join(cell(schema, row, c) for c in cols) + " |")
    if icol in cols and intervals:
        info = table["interval"]
        lines += ["", f"{icol}: mean over the {table['n_tasks'][icol]} tasks [{info['level']:.0%} bootstrap interval "
                      f"over tasks, {info['resamples']} resamples]"]
    return "\n".join(lines) + "\n"
