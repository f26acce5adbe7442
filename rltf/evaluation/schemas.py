"""Held-out evaluation: the paper's four learning schemas, plus the reference plans and the oracle.

* ``zero`` / ``few`` — the untrained planner, prompted the way OpenAGI prompts an LLM (few-shot
  prompts carry ``k`` solved train tasks; :func:`task_prompt`). A planner whose tokenizer has a
  chat template (an instruct LLM, e.g. SmolLM2) is asked in its chat format with the env's
  :meth:`~envs.protocol.RLTFEnv.plan_instructions` (OpenAGI: every tool with a one-line
  description, and the plan syntax) as the system message and the examples as earlier turns, and
  answers by **constrained** beam search (:func:`instructed_schema`): measured on SmolLM2-135M
  (10 test tasks), its free text is never a plan (0/10 valid zero-shot: it answers in prose or
  code; 0/10 few-shot: it lists tools regardless of the task), so a free-text row would only
  report that it does not keep the format, while the constrained row measures what the untrained
  model knows about planning, through the same decoding the fine-tuned and RLTF rows use. Other
  planners (no chat template: the embedded planners, T5, base LLaMA) keep OpenAGI's free text
  (:func:`free_form_schema`: greedy ``generate``, the text cut at the first blank line, mapped onto
  a valid plan by ``env.parse_free_text``: MiniLM sentence similarity; text that maps onto no
  valid plan scores 0), in the plain prompt format they always had.
* ``finetuned`` / ``rltf`` — constrained beam search from the task description, best plan (a chat
  planner reads it in its chat template: ``constrained_decoding.prompts.encode_prompts``, the same
  text SFT and RLTF train on).

Every result carries its plans' validity per task (``SchemaResult.valid``, ``valid_rate``: free
text that maps onto no valid plan is invalid; constrained plans always are valid) and the table a
``valid`` column.
* ``reference`` — the suite's reference plans (the supervised labels); ``oracle`` — the best plan
  by exhaustive search. Both bound the planners from either side.

Any env works through the env protocol (:class:`envs.protocol.RLTFEnv`): ``env.grammar``,
``env.reward_plans``, ``env.parse_free_text`` (free text -> the action it stands for: OpenAGI's
MiniLM mapping), ``env.format_plan``, ``env.oracle_plans`` and ``env.table_columns``. Scores are
per task (OpenAGI: the mean over the task's samples) and the table averages them per
``task.metric`` and overall (every task weighs the same), like the paper's Table 5; an env with
metrics of its own (``env.table_columns`` not empty: the travel benchmark's delivery, commonsense /
hard micro and macro and final pass rates) gives those columns, plus the mean reward. The schema names and their
table order are ``rltf.config.sections.EVAL_SCHEMAS``; ``rltf.stages.plan_job.evaluate`` picks the function per
schema, the held-out tasks and the few-shot examples.

With ~10 held-out tasks one task moves a mean by several points: the table gives each schema's
overall score (an env's own table: its mean reward) with a 95% percentile-bootstrap interval over
tasks (:func:`bootstrap_interval`, seeded, so the same scores always give the same interval), e.g.
``0.7367 [0.61, 0.85]``; the interval is stored under the table's ``intervals``.

Launched on several processes, every schema function is a collective: each process evaluates its
share of the tasks (:func:`by_process`) and all of them get every task's result, in task order.

A planner's schemas decode their share in chunks of ``chunk`` tasks (``eval.chunk_tasks``,
:data:`CHUNK_TASKS`; 0: all at once), one beam search (free text: one ``generate`` batch) per chunk,
and, given ``progress`` (``logging.progress_bar``), tick a bar ``eval <schema>`` after each
(:func:`decode_in_chunks`): plain lines ``eval finetuned:  50%|#####     | 8/16 ...`` when the bar is
off or stderr is not a terminal, at most every 30 s and, redrawn while a chunk decodes, at least
every ~35 s: a long evaluation is never silent. The plans are then scored together, as before.
The default chunk keeps free text's batches and the main job's (10 test, 8 validation tasks: one
chunk). Other chunks move the beam search's log-probabilities in their last bits (padding and
batch shape differ: up to 3e-5 nats measured), which changed no plan: the lite suite's 38 tasks,
the main job's fine-tuned and RLTF planners, chunks of 1/5/7/16; SmolLM2-135M on 18, chunks of 1/5,
and its zero / finetuned rows on them (chunks of 16 or 0: 0.1750 / 0.1675 both);
tests/evaluation/test_evaluation_progress.py checks a tiny run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from constrained_decoding.decode import beam_search_plans
from constrained_decoding.prompts import Conversation, encode_formatted, format_prompt, uses_chat_template
from envs.protocol import RLTFEnv as Env
from envs.protocol import Task
from rltf.evaluation.intervals import (  # re-exported: the held-out tables' intervals
    BOOTSTRAP_LEVEL,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_interval,
    format_interval,
)
from rltf.run.distributed import gather_objects, launch_share
from rltf.run.tracking import kept_alive, progress_bar

CHUNK_TASKS = 16
"""Tasks a planner's schema decodes together by default (``eval.chunk_tasks``): free text's batch
(:func:`free_text`), so free text's batches are today's; a progress tick after each chunk."""

FREE_TEXT_STOP = "\n\n"
"""Free text ends at its first blank line (the plain few-shot format separates examples by one; a
chat model's answer also ends at its end-of-turn token, which ``generate`` stops at)."""


@dataclass
class SchemaResult:
    schema: str
    plans: dict[int, str] = field(default_factory=dict)
    scores: dict[int, float] = field(default_factory=dict)
    valid: dict[int, bool] = field(default_factory=dict)
    """Per task, whether its plan is valid (free text: whether it maps onto a valid plan); empty when
    not recorded (e.g. results read back from a file written before it was)."""
    texts: dict[int, str] = field(default_factory=dict)
    """Per task, the free text the planner wrote (free-text schemas only)."""
    failed: dict[int, int] = field(default_factory=dict)
    """Per task, how many of its executed samples an expert failed on (raised, or returned an
    unusable output: the sample scores 0); empty when nothing is executed or not recorded."""
    executed: dict[int, int] = field(default_factory=dict)
    """Per task, how many samples its plan was executed on (the denominator of :attr:`failed`)."""
    failure_notes: list[str] = field(default_factory=list)
    """The env's warnings about experts that failed on every call (``env.expert_failures``)."""

    @property
    def expert_failures(self) -> dict | None:
        """``{"failed_samples", "executed_samples", "tasks", "notes"}`` (``tasks``: how many tasks had a
        failed sample) when an expert failed on any sample, else None: the table's footnote."""
        failed = sum(self.failed.values())
        if not failed:
            return None
        return {"failed_samples": failed, "executed_samples": sum(self.executed.values()),
                "tasks": sum(1 for n in self.failed.values() if n), "notes": list(self.failure_notes)}

    @property
    def overall(self) -> float:
        return float(np.mean(list(self.scores.values()))) if self.scores else 0.0

    @property
    def valid_rate(self) -> float | None:
        """The fraction of tasks whose plan is valid, None when validity was not recorded."""
        return float(np.mean(list(self.valid.values()))) if self.valid else None


def decode_in_chunks(name: str, rows: Sequence[int], decode: Callable[[list[int]], list], *,
                     chunk: int = CHUNK_TASKS, progress: bool | None = None) -> list:
    """``decode(part)`` (one item per row of ``part``) over ``rows`` in chunks of ``chunk`` rows (0:
    one chunk), concatenated in order. ``progress`` not None: a bar ``eval <name>`` counting the tasks
    decoded (:func:`rltf.run.tracking.progress_bar`; ``progress`` is ``logging.progress_bar``: the bar
    on a terminal, else plain lines), on the main process (the others decode their share silently),
    redrawn while a chunk decodes (:func:`rltf.run.tracking.kept_alive`: a line at least every ~35 s)."""
    if chunk < 0:
        raise ValueError(f"chunk={chunk}: expected a number of tasks >= 0 (0: all at once)")
    rows = list(rows)
    size = chunk or max(1, len(rows))
    out: list = []
    if progress is None:
        for start in range(0, len(rows), size):
            out.extend(decode(rows[start : start + size]))
        return out
    with progress_bar(total=len(rows), desc=f"eval {name}", enabled=progress, main=launch_share()[0] == 0,
                      unit="task", mininterval=0) as bar, kept_alive(bar):
        for start in range(0, len(rows), size):
            part = rows[start : start + size]
            out.extend(decode(part))
            bar.update(len(part))
    return out


def constrained_schema(name: str, planner, env: Env, tasks: Sequence[Task], num_beams: int,
                       prompts: Sequence[str | Conversation] | None = None, *, chunk: int = CHUNK_TASKS,
                       progress: bool | None = None) -> SchemaResult:
    """Best plan of a constrained beam search per task, scored on all of the task's samples.
    ``prompts`` (one per task) default to the task descriptions: the prompt SFT and RLTF train on.
    ``chunk`` / ``progress``: one beam search per chunk of tasks, a tick after each
    (:func:`decode_in_chunks`)."""
    prompts = [t.description for t in tasks] if prompts is None else list(prompts)

    def best(part: list[int]) -> list:
        found = beam_search_plans(planner.model, planner.tokenizer, [prompts[i] for i in part],
                                  [env.grammar(planner.tokenizer, tasks[i]) for i in part], num_beams=num_beams,
                                  num_return=1)
        return [b[0].plan for b in found]

    def share(rows: list[int]) -> SchemaResult:
        plans = decode_in_chunks(name, rows, best, chunk=chunk, progress=progress)
        return _schema_result(name, env, [tasks[i] for i in rows], plans)

    return by_process(name, tasks, share)


def task_prompt(env: Env, task: Task, examples: Sequence[Task]) -> Conversation:
    """``task``'s zero- / few-shot prompt: the env's plan instructions, the solved ``examples`` (their
    reference plans as ``env`` writes them), the task (formatted per planner by
    :func:`constrained_decoding.prompts.format_prompt`: chat template, or the plain format)."""
    return Conversation(task.description, env.plan_instructions(),
                        tuple((e.description, env.format_plan(e.reference_plan)) for e in examples))


def few_shot_prompt(env: Env, task: Task, examples: Sequence[Task], encoder_decoder: bool, tokenizer=None) -> str:
    """The text of :func:`task_prompt` for a planner (its ``tokenizer`` picks the chat template, if any)."""
    return format_prompt(task_prompt(env, task, examples), encoder_decoder, tokenizer)


def cut_free_text(text: str, stop: Sequence[str] = (FREE_TEXT_STOP,)) -> str:
    """``text`` up to the first of the ``stop`` strings (all of it when none occurs)."""
    ends = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return text[:min(ends)] if ends else text


@torch.inference_mode()
def free_text(planner, prompts: Sequence[str], max_new_tokens: int = 64, batch_size: int = 16,
              stop: Sequence[str] = ()) -> list[str]:
    """Unconstrained greedy continuations (what a zero-/few-shot planner writes) of formatted
    ``prompts``; each cut at the first of the ``stop`` strings (none: the whole continuation).
    Generation ends at the model's end-of-turn / EOS token, and early once every row of a batch
    holds a stop string (a chat planner's rows; others run to ``max_new_tokens``)."""
    model, tok = planner.model, planner.tokenizer
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    early = {"stop_strings": list(stop), "tokenizer": tok} if stop and uses_chat_template(
        tok, planner.is_encoder_decoder) else {}
    out: list[str] = []
    try:
        for i in range(0, len(prompts), batch_size):
            ids = encode_formatted(tok, prompts[i : i + batch_size], planner.is_encoder_decoder)
            enc = tok.pad({"input_ids": ids}, return_tensors="pt").to(device)
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                 pad_token_id=tok.pad_token_id, **early)
            if not planner.is_encoder_decoder:
                gen = gen[:, enc["input_ids"].shape[1]:]
            out.extend(cut_free_text(t, stop) for t in tok.batch_decode(gen, skip_special_tokens=True))
    finally:
        model.train(was_training)
    return out


def free_form_schema(name: str, planner, env: Env, tasks: Sequence[Task], examples: Sequence[Task],
                     max_new_tokens: int = 64, *, chunk: int = CHUNK_TASKS,
                     progress: bool | None = None) -> SchemaResult:
    """OpenAGI's zero- / few-shot schema: the planner's free text from :func:`task_prompt` (cut at the
    first blank line), mapped onto the action it stands for by ``env.parse_free_text``. ``chunk`` /
    ``progress``: :func:`decode_in_chunks` (free text's batches are the chunks' when ``chunk`` is
    a multiple of :func:`free_text`'s batch, as the default is)."""
    def write(part: list[int]) -> list[str]:
        prompts = [few_shot_prompt(env, tasks[i], examples, planner.is_encoder_decoder, planner.tokenizer)
                   for i in part]
        return free_text(planner, prompts, max_new_tokens, stop=(FREE_TEXT_STOP,))

    def share(rows: list[int]) -> SchemaResult:
        mine = [tasks[i] for i in rows]
        texts = decode_in_chunks(name, rows, write, chunk=chunk, progress=progress)
        # the action each text stands for (OpenAGI: mapped onto a valid plan; travel: the text itself)
        res = _schema_result(name, env, mine, [env.parse_free_text(t, text) for t, text in zip(mine, texts)])
        res.texts = {t.id: text for t, text in zip(mine, texts)}
        return res

    return by_process(name, tasks, share)


def instructed_schema(name: str, planner, env: Env, tasks: Sequence[Task], examples: Sequence[Task],
                      num_beams: int, *, chunk: int = CHUNK_TASKS, progress: bool | None = None) -> SchemaResult:
    """The zero- / few-shot schema of a chat planner: constrained beam search from :func:`task_prompt`
    (instructions, examples, task in the planner's chat template)."""
    return constrained_schema(name, planner, env, tasks, num_beams, [task_prompt(env, t, examples) for t in tasks],
                              chunk=chunk, progress=progress)


def untrained_schema(name: str, planner, env: Env, tasks: Sequence[Task], examples: Sequence[Task], *,
                     num_beams: int, max_new_tokens: int, chunk: int = CHUNK_TASKS,
                     progress: bool | None = None) -> SchemaResult:
    """``zero`` (no ``examples``) / ``few``: :func:`instructed_schema` for a planner with a chat
    template, :func:`free_form_schema` for the others (the module docstring says why)."""
    if uses_chat_template(planner.tokenizer, planner.is_encoder_decoder):
        return instructed_schema(name, planner, env, tasks, examples, num_beams, chunk=chunk, progress=progress)
    return free_form_schema(name, planner, env, tasks, examples, max_new_tokens, chunk=chunk, progress=progress)


def reference_schema(env: Env, tasks: Sequence[Task]) -> SchemaResult:
    return by_process("reference", tasks, lambda rows: _schema_result(
        "reference", env, [tasks[i] for i in rows], [tasks[i].reference_plan for i in rows]))


def oracle_schema(env: Env, tasks: Sequence[Task]) -> SchemaResult | None:
    """The env's oracle (OpenAGI: exhaustive search; travel: the exact solver), or None when it has none."""
    def share(rows: list[int]) -> SchemaResult | None:
        mine = [tasks[i] for i in rows]
        found = env.oracle_plans(mine)
        if found is None:
            return None
        res = SchemaResult("oracle")
        for t, (plan, score) in zip(mine, found):
            res.plans[t.id], res.scores[t.id], res.valid[t.id] = plan, score, True
        return res

    return by_process("oracle", tasks, share)


def by_process(name: str, tasks: Sequence[Task],
               share: Callable[[list[int]], SchemaResult | None]) -> SchemaResult | None:
    """``share(rows)``, the result of the tasks at positions ``rows`` of ``tasks``, over the launch's
    processes: each evaluates its share (every n-th task from its index; the same tasks every time,
    so its env's execution cache holds only its own), and every process gets all the results,
    in the order of ``tasks`` (a collective: every process must call it). One process: ``share`` of
    all the tasks. ``None`` (the env has no oracle) when ``share`` gives None."""
    rank, world = launch_share()
    if world == 1:
        return share(list(range(len(tasks))))
    rows = list(range(rank, len(tasks), world))
    parts = gather_objects(share(rows) if rows else SchemaResult(name))
    if any(p is None for p in parts):
        return None
    merged = SchemaResult(name)
    for what in ("plans", "scores", "valid", "texts", "failed", "executed"):
        found = {k: v for p in parts for k, v in getattr(p, what).items()}
        setattr(merged, what, {t.id: found[t.id] for t in tasks if t.id in found})
    merged.failure_notes = list(dict.fromkeys(n for p in parts for n in p.failure_notes))
    return merged


def _schema_result(name: str, env: Env, tasks: Sequence[Task], plans) -> SchemaResult:
    """Each task's plan scored; the samples an expert failed on are counted (a failed sample scores
    0, so without the count a broken expert would read as a worse planner)."""
    res = SchemaResult(name)
    results = env.reward_plans(list(zip(tasks, plans)))
    for t, r in zip(tasks, results):
        res.plans[t.id], res.scores[t.id], res.valid[t.id] = r.plan_text, r.reward, bool(r.valid)
        errors = list(getattr(r, "sample_errors", None) or ()) if r.valid else []
        if errors:
            res.executed[t.id], res.failed[t.id] = len(errors), sum(e is not None for e in errors)
    if any(res.failed.values()):
        res.failure_notes = list(env.expert_failures(results)[1])
    return res


def headline(env: Env | None) -> str:
    """The table column the main job's last line reports: the env's ``headline`` (OpenAGI:
    ``overall``; travel: ``final pass``), ``overall`` without an env."""
    return "overall" if env is None else env.headline


def results_table(results: Sequence[SchemaResult], tasks: Sequence[Task], env: Env | None = None) -> dict:
    """``{"columns": [...], "n_tasks": {column: n}, "rows": {schema: {column: value}},
    "intervals": {schema: [low, high]}, "interval": {...}, "valid_rate": {schema: rate or None}}``
    (``valid_rate``: :attr:`SchemaResult.valid_rate`, shown as the markdown's last column): per metric family and
    overall (the default), or the env's own metrics (``env.table_columns``, when not empty) plus the mean reward.
    ``intervals`` are the bootstrap intervals over tasks (:func:`bootstrap_interval`) of the mean of each
    schema's per-task scores, i.e. of the ``interval["column"]`` column (``overall``; an env's own
    table: ``reward``). ``expert_failures`` (``{schema: {"failed_samples", "executed_samples", "tasks",
    "notes"}}``, only the schemas where an expert failed; the key only when one did): the markdown's
    footnote, so a score lowered by broken experts says so (:attr:`SchemaResult.expert_failures`)."""
    failures = {r.schema: r.expert_failures for r in results if r.expert_failures}
    extra = {"expert_failures": failures} if failures else {}
    own = {r.schema: env.table_columns(tasks, r.plans) for r in results} if env is not None else {}
    if any(own.values()):
        rows = {r.schema: {**own[r.schema], "reward": r.overall} for r in results}
        columns = list(next(iter(rows.values())))
        return {"columns": columns, "n_tasks": {c: len(tasks) for c in columns}, "rows": rows,
                **_intervals(results, tasks, "reward"), "valid_rate": _valid_rates(results), **extra}
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
            "rows": rows, **_intervals(results, tasks, "overall"), "valid_rate": _valid_rates(results), **extra}


def _valid_rates(results: Sequence[SchemaResult]) -> dict[str, float | None]:
    return {r.schema: r.valid_rate for r in results}


def _intervals(results: Sequence[SchemaResult], tasks: Sequence[Task], column: str) -> dict:
    intervals = {r.schema: list(bootstrap_interval([r.scores[t.id] for t in tasks if t.id in r.scores]))
                 for r in results}
    return {"intervals": intervals, "interval": {"column": column, "level": BOOTSTRAP_LEVEL,
                                                 "resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED,
                                                 "over": "tasks"}}


def markdown_columns(table: dict) -> list[str]:
    """The value columns :func:`table_markdown` shows: the table's columns, then ``valid`` (the
    plans' valid rate) when the table records it."""
    return [*table["columns"], *(["valid"] if table.get("valid_rate") else [])]


def table_markdown(table: dict, title: str, labels: dict[str, str] | None = None) -> str:
    """The table as markdown; ``labels`` rename schema rows (e.g. travel's oracle is the solver).
    The interval column (``overall``; an env's own table: ``reward``) shows each schema's
    bootstrap interval: ``0.7367 [0.61, 0.85]``; a last ``valid`` column its valid-plan rate."""
    labels = labels or {}
    cols = table["columns"]
    intervals = table.get("intervals", {})
    icol = table.get("interval", {}).get("column")
    valid = table.get("valid_rate", {})

    def cell(schema: str, row: dict, c: str) -> str:
        return format_interval(row[c], intervals.get(schema)) if c == icol else f"{row[c]:.4f}"

    def valid_cell(schema: str) -> list[str]:
        rate = valid.get(schema)
        return [] if not valid else ["n/a" if rate is None else f"{rate:.0%}"]

    shown = markdown_columns(table)
    head = "| schema | " + " | ".join(f"{c} ({table['n_tasks'][c]})" for c in cols) + \
        (" | valid |" if len(shown) > len(cols) else " |")
    lines = [f"### {title}", "", head, "|" + "---|" * (len(shown) + 1)]
    for schema, row in table["rows"].items():
        lines.append(f"| {labels.get(schema, schema)} | "
                     + " | ".join([*(cell(schema, row, c) for c in cols), *valid_cell(schema)]) + " |")
    if icol in cols and intervals:
        info = table["interval"]
        lines += ["", f"{icol}: mean over the {table['n_tasks'][icol]} tasks [{info['level']:.0%} bootstrap interval "
                      f"over tasks, {info['resamples']} resamples]"]
    lines += expert_failure_lines(table, labels)
    return "\n".join(lines) + "\n"


def expert_failure_lines(table: dict, labels: dict[str, str] | None = None) -> list[str]:
    """The footnote of a table whose rows were lowered by failing experts (``table["expert_failures"]``):
    per schema, how many executed samples failed (they score 0) in how many tasks, and the env's
    warnings; nothing when no expert failed."""
    failures, labels = table.get("expert_failures") or {}, labels or {}
    lines = []
    for schema, f in failures.items():
        notes = "; ".join(f.get("notes") or [])
        lines.append(f"* {labels.get(schema, schema)}: an expert failed on {f['failed_samples']} of "
                     f"{f['executed_samples']} executed samples ({f['tasks']} task(s)); they score 0"
                     + (f" — {notes}" if notes else ""))
    return ["", "**expert failures** (these rows are lowered by failing experts, not only by their plans):",
            *lines] if lines else []
