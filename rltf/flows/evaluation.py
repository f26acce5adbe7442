"""Held-out evaluation of agent flows (the methods of an env's flow domain, e.g. the travel sandbox's):
every method of ``flow.methods`` on the held-out queries of ``flow.splits``, one pass of the method's
flow per query, scored by the env, with its reference (the travel solver's) row beside them
(:func:`evaluate_flows`), and the table as markdown (:func:`table_markdown`). The command line:
:mod:`rltf.flows.evaluate`."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import envs as env_factory
from common.atomic import write_atomic
from common.errors import UserError
from rltf.config.flow import FlowSettings
from rltf.config.loading import ConfigError, RunConfig
from rltf.evaluation.data_source import data_source, with_data_line
from rltf.flows.agents.dispatch import build_backend, run_method
from rltf.flows.agents.domain import FlowDomain, FlowRun, check_methods, flow_domain_of
from rltf.flows.backends.base import BackendError
from rltf.flows.engine.batching import PassBatch
from rltf.run.distributed import launch_share
from rltf.run.tracking import kept_alive, progress_bar

__all__ = ["COSTS", "BackendFailingError", "BackendHealth", "BackendUnreachableError", "backend_calls",
           "evaluate_flows", "evaluate_method", "held_out_ids", "select_queries", "solver_row", "table_columns",
           "table_markdown", "validation_ids"]

COSTS = ("reward", "tokens/query", "seconds/query", "nodes/query", "decisions/query")
"""The columns of every flow table after the domain's metrics (:attr:`FlowDomain.columns`)."""


def table_columns(domain: FlowDomain) -> tuple[str, ...]:
    """The flow table's columns: ``domain``'s metrics, then the mean reward and the per-query costs."""
    return (*domain.columns, *COSTS)


def evaluate_flows(cfg: RunConfig, flow: FlowSettings, *, backend=None, envs_pair=None,
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every method of ``flow.methods`` on the held-out queries (see :mod:`rltf.flows.evaluate`);
    ``backend`` / ``envs_pair`` (train, held-out) reuse what the caller built. Returns the summary
    written to ``flow_eval.json``."""
    started = time.perf_counter()
    train, held = envs_pair if envs_pair is not None else env_factory.make_train_and_held_out(cfg.env)
    check_methods(flow_domain_of(held, cfg.env.name), flow.methods, cfg.env.name)  # the env offers them
    ids = held_out_ids(cfg, flow, held)
    if backend is None:
        backend = build_backend(cfg, flow, train)
    run_dir = Path(cfg.run_dir)
    log(f"flows {', '.join(flow.methods)} on {len(ids)} {'+'.join(flow.splits)} queries, backend {backend!r}")
    rows: dict[str, dict[str, float]] = {}
    queries: dict[str, list[dict]] = {}
    health = BackendHealth(backend)  # fails fast when the first queries get no answer at all
    errors: dict[str, dict[str, Any]] = {}
    stop: BackendFailingError | None = None  # the backend failed too often: the table is written, then the error
    for method in flow.methods:
        rows[method], queries[method] = evaluate_method(method, held, ids, backend, flow,
                                                        trace_dir=run_dir / "traces" / method, health=health,
                                                        progress=cfg.logging.progress_bar)
        for rec in queries[method]:  # relative to the run folder: no machine's path in flow_eval.json
            rec["trace"] = rec["trace"] and Path(rec["trace"]).relative_to(run_dir).as_posix()
        r = rows[method]
        log(f"{method}: final pass {r['final pass']:.4f}, delivery {r['delivery']:.4f}, reward {r['reward']:.4f} "
            f"({r['seconds/query']:.2f} s, {r['tokens/query']:.0f} tokens per query)")
        errors[method] = backend_error_summary(queries[method])
        if errors[method]["failed_calls"]:
            e = errors[method]
            log(f"{method}: backend errors: {e['failed_calls']} failed call(s) in {e['queries']} of {len(ids)} "
                f"queries (retried; a node whose calls all failed fails its query); last: {e['last']}")
        stop = health.stopped or _too_many_failures(backend, method, errors[method], flow.backend.max_failed_share,
                                                    len(ids), run_dir)
        if stop is not None:
            break
    if flow.oracle and stop is None:
        rows["solver"], queries["solver"] = solver_row(held, ids)
    title = f"{', '.join(flow.methods)} on {len(ids)} {'+'.join(flow.splits)} queries ({_backend_name(flow)})"
    failed = {m: e["failed_queries"] for m, e in errors.items() if e["failed_queries"]}
    data = data_source(cfg.env, held, flow.splits)  # the database, flights, queries and split
    md = with_data_line(table_markdown(rows, title, failed=failed, n_queries=len(ids)), data)
    if stop is not None:
        md += f"\n**stopped**: {stop}\n"
    summary = {"table": rows, "data": data, "queries": ids, "title": title, "backend": dataclasses.asdict(flow.backend),
               "backend_errors": errors, "results": queries, "seconds": time.perf_counter() - started,
               "stopped": None if stop is None else str(stop)}
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / "flow_eval.md", md)
    write_atomic(run_dir / "flow_eval.json", json.dumps(summary, indent=1, default=str) + "\n")
    log("\n" + md)
    log(f"run folder: {run_dir}  ({summary['seconds']:.0f}s)")
    if stop is not None:
        raise stop
    log("held-out final pass: " + " ".join(f"{m}={r['final pass']:.4f}" for m, r in rows.items()))
    return summary


def evaluate_method(method: str, env, ids: Sequence[int], backend, flow: FlowSettings,
                    trace_dir: Path | None = None, health: BackendHealth | None = None,
                    progress: bool | None = None) -> tuple[dict[str, float], list[dict]]:
    """``method``'s flow on each query of ``ids`` with ``backend``: the table row and one record per
    query (plan, error, seconds, tokens, nodes, decisions, log-prob, backend calls answered and
    failed, the last backend error; reward, final pass and violations). The first
    ``flow.trace_queries`` passes write their traces to ``trace_dir``. ``health`` sees every
    query's backend calls and raises :class:`BackendUnreachableError` when the first ones all fail.
    ``progress`` not None (``logging.progress_bar``): a bar ``flow <method>`` counting the queries,
    ticked after each batch of passes (plain lines at most every 30 s when off or not on a terminal;
    :func:`rltf.run.tracking.progress_bar`), redrawn while a batch runs (a line at least every ~35 s:
    :func:`rltf.run.tracking.kept_alive`), on the main process."""
    plans: dict[int, Any] = {}
    records = []
    width = getattr(backend, "batch_size", 1)
    traces = [trace_dir / f"query{i}.json" if trace_dir is not None and k < flow.trace_queries else None
              for k, i in enumerate(ids)]
    stopped: BackendFailingError | None = None
    with contextlib.ExitStack() as shown:
        bar = None if progress is None else shown.enter_context(progress_bar(
            total=len(ids), desc=f"flow {method}", enabled=progress, main=launch_share()[0] == 0, unit="query",
            mininterval=0))
        if bar is not None:
            shown.enter_context(kept_alive(bar))  # (redrawn while a batch of passes runs)
        for start in range(0, len(ids), width):  # a batch of passes at a time: the health check sees each batch
            part, part_traces = list(ids[start : start + width]), traces[start : start + width]
            runs = _run_queries(method, env, part, part_traces, backend, flow, width)
            for i, trace, (fr, secs) in zip(part, part_traces, runs):
                try:
                    _record(records, plans, i, trace, fr, secs, health, len(ids))
                except BackendFailingError as e:  # the backend stopped answering: the rest of the queries are not run
                    stopped = stopped or e
            if bar is not None:
                bar.update(len(part))
            if stopped is not None:
                break
    if stopped is not None:
        for i in ids[len(records):]:
            plans[i] = None
            records.append({"query": i, "plan": None, "error": f"not run: {stopped.short}", "seconds": 0.0,
                            "tokens": 0, "nodes": 0, "decisions": 0, "logprob": 0.0, "trace": None,
                            "backend_calls": 0, "backend_failures": 0, "backend_error": None, "not_run": True,
                            "extra": {}})
        health.stopped = stopped
    return _score(env, list(ids), plans, records)


def _record(records: list[dict], plans: dict[int, Any], i: int, trace: Path | None, fr, secs: float,
            health: BackendHealth | None, planned: int) -> None:
    """Query ``i``'s record (see :func:`evaluate_method`), and its backend calls to ``health``."""
    plans[i] = fr.plan
    res = fr.result
    steps = res.constrained() if res is not None else []
    answered, failed, last_error = backend_calls(res)
    records.append({
        "query": i, "plan": fr.plan, "error": fr.error, "seconds": secs,
        "tokens": res.usage.total_tokens if res is not None else 0,
        "nodes": len(res.order) if res is not None else 0, "decisions": len(steps),
        "logprob": sum(c.logprob for _, c in steps if c.logprob is not None),
        "trace": str(trace) if trace is not None and res is not None else None,
        "backend_calls": answered, "backend_failures": failed, "backend_error": last_error,
        "extra": fr.extra})
    if health is not None:
        health.record(answered, failed, last_error, planned=planned)


def _run_queries(method: str, env, ids: Sequence[int], traces: Sequence[Path | None], backend, flow: FlowSettings,
                 width: int) -> list[tuple[Any, float]]:
    """``(FlowRun, seconds)`` of one pass per query, the passes run together
    (:class:`~rltf.flows.engine.batching.PassBatch`: each backend call decodes their pending
    decisions in one batch); with a backend that takes per-item generators each pass has its own,
    seeded from ``(flow.backend.seed, query)`` (what a sampling backend draws does not depend on the
    batch). A query's seconds are its own code's plus its share of the backend calls it was in."""
    def job(i: int, trace: Path | None):
        def run(pass_backend):
            try:
                return run_method(method, env, i, pass_backend, flow, trace)
            except Exception as e:  # noqa: BLE001 - one query's crash is that query's failure, reported
                return FlowRun(None, None, f"{type(e).__name__}: {e}")
        return run

    generators = None
    if getattr(backend, "per_item_generators", False):
        generators = []
        for i in ids:
            g = torch.Generator(device="cpu")  # draws one seed per decision on the host (the backend reads g.device)
            g.manual_seed(int(np.random.default_rng([flow.backend.seed, int(i)]).integers(2**62)))
            generators.append(g)
    batch = PassBatch(backend, width)
    results = batch.run([job(i, t) for i, t in zip(ids, traces)], generators)
    return list(zip(results, batch.seconds))


# ----------------------------------------------------------------------------- backend errors
FAIL_FAST_QUERIES = 2  # queries whose every backend call failed, none answered before: the backend is down


ERROR_CHARS = 300  # how much of the last backend error an error line quotes


class BackendUnreachableError(UserError, BackendError):
    """The flows' backend answered none of its calls on the first queries (a dead endpoint, a wrong
    URL or model, a server that errs on every request): the evaluation stops instead of scoring
    every query 0."""


class BackendFailingError(UserError, BackendError):
    """The flows' backend failed too often after answering before: it stopped answering
    (:data:`FAIL_FAST_QUERIES` queries in a row saw only failed calls) or failed on more than
    ``flow.backend.max_failed_share`` of a method's calls. The table is written first, the queries
    it failed on marked; then the evaluation ends with this error (exit status 2). ``short``: the
    reason without the endpoint, for the queries it left unrun."""

    def __init__(self, message: str, short: str = ""):
        super().__init__(message)
        self.short = short or message


def _named(backend) -> str:
    where = getattr(backend, "endpoint", None)
    return f"the backend {backend!r}" + (f" at {where}" if where else "")


def _quoted(error: str | None) -> str:
    """The last error on one line, cut to :data:`ERROR_CHARS`."""
    text = " ".join(str(error).split())
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + "..."


@dataclass
class BackendHealth:
    """The backend calls of an evaluation so far: while none was ever answered, the first
    :data:`FAIL_FAST_QUERIES` queries that called the backend and saw only failures stop the
    evaluation (:class:`BackendUnreachableError`, naming the endpoint and the last error); after
    answers, :data:`FAIL_FAST_QUERIES` such queries in a row mean the backend stopped answering
    (:class:`BackendFailingError`; :func:`evaluate_method` marks the rest not run, :attr:`stopped`)."""

    backend: Any
    queries: int = 0  # queries that called the backend
    answered: int = 0
    failed: int = 0
    last_error: str | None = None
    streak: int = 0  # the latest queries in a row whose every backend call failed
    stopped: BackendFailingError | None = None

    def record(self, answered: int, failed: int, last_error: str | None, *, planned: int) -> None:
        if answered == failed == 0:
            return
        self.queries += 1
        self.answered += answered
        self.failed += failed
        self.last_error = last_error or self.last_error
        self.streak = self.streak + 1 if answered == 0 else 0
        if self.answered == 0 and self.queries >= min(FAIL_FAST_QUERIES, planned):
            raise BackendUnreachableError(
                f"{_named(self.backend)} failed on every call of the first {self.queries} queries ({self.failed} "
                f"calls, none answered; last: {_quoted(self.last_error)}); check that the server is up and serves "
                "the configured model (flow.backend.base_url, flow.backend.model, the API key); nothing was scored")
        if self.streak >= FAIL_FAST_QUERIES:
            short = f"the backend stopped answering (every call of {self.streak} queries in a row failed)"
            raise BackendFailingError(
                f"{_named(self.backend)} stopped answering: every call of the last {self.streak} queries failed "
                f"({self.answered} calls answered before; last: {_quoted(self.last_error)}); the queries after "
                "them were not run; flow_eval.md marks them", short)


def _too_many_failures(backend, method: str, summary: dict, share: float, planned: int,
                       run_dir: Path) -> BackendFailingError | None:
    """The error for a method whose backend calls failed on more than ``share`` of them, else None."""
    calls = summary["failed_calls"] + summary["answered_calls"]
    if not summary["failed_calls"] or summary["failed_calls"] <= share * calls:
        return None
    return BackendFailingError(
        f"{_named(backend)} failed on {summary['failed_calls']} of {calls} calls of {method} "
        f"({summary['failed_calls'] / calls:.0%} > flow.backend.max_failed_share={share:g}), in {summary['queries']} "
        f"of {planned} queries; last: {_quoted(summary['last'])}; the table marks the queries it failed "
        f"({run_dir / 'flow_eval.md'})")


def backend_calls(result) -> tuple[int, int, str | None]:
    """``(answered, failed, last error)``: the backend calls of a pass (its trace: each attempt's
    retried failures and its answer), none for a pass that did not run."""
    if result is None or getattr(result, "trace", None) is None:
        return 0, 0, None
    answered = failed = 0
    last = None
    for node in result.trace.nodes:
        for attempt in node.attempts:
            answered += attempt.answer is not None
            failed += len(attempt.backend_errors)
            if attempt.backend_errors:
                last = attempt.backend_errors[-1]
    return answered, failed, last


def backend_error_summary(records: Sequence[dict]) -> dict[str, Any]:
    """A method's backend errors over its queries: failed and answered calls, queries with a failed
    call, the last error, and ``failed_queries``: the queries the backend failed (a failed call and
    no plan or a pass error, or not run after the backend stopped answering), marked in the table."""
    hit = [r for r in records if r.get("backend_failures")]
    failed = [r["query"] for r in records if r.get("not_run") or r.get("backend_failures") and
              (r.get("error") is not None or r.get("plan") is None)]
    return {"failed_calls": sum(r["backend_failures"] for r in hit), "queries": len(hit),
            "answered_calls": sum(r.get("backend_calls") or 0 for r in records),
            "last": hit[-1]["backend_error"] if hit else None, "failed_queries": failed}


def solver_row(env, ids: Sequence[int]) -> tuple[dict[str, float], list[dict]]:
    """The exact solver's row (the oracle: no model) on the queries ``ids``."""
    plans, records = {}, []
    for i in ids:
        t0 = time.perf_counter()
        plans[i] = env.reference_plan(i)
        records.append({"query": i, "plan": plans[i], "error": None, "seconds": time.perf_counter() - t0,
                        "tokens": 0, "nodes": 0, "decisions": 0, "logprob": 0.0, "trace": None, "extra": {}})
    return _score(env, list(ids), plans, records)


def held_out_ids(cfg: RunConfig, flow: FlowSettings, env) -> list[int]:
    """The held-out queries of ``flow.splits`` (the persisted split) with ``flow.days``, ``flow.limit`` of them."""
    parts = env_factory.split_ids(cfg.env)
    unknown = [s for s in flow.splits if s not in parts]
    if unknown:  # hub queries re-split: the parts are <hub split>:re-split:<part> (the travel env's hub queries)
        raise ConfigError(f"flow.splits names {unknown}, not a split of this env config; its splits are "
                          f"{', '.join(parts)}")
    ids = [i for s in dict.fromkeys(flow.splits) for i in parts[s]]
    if flow.days:
        ids = [i for i in ids if env.get_query(i).days in flow.days]
    ids = select_queries(ids, flow.limit, flow.select)
    if not ids:
        raise ConfigError(f"no held-out query in {flow.splits}" + (f" with days {flow.days}" if flow.days else ""))
    return ids


def validation_ids(cfg: RunConfig, flow: FlowSettings, env) -> list[int]:
    """The queries a trained flow is validated on during RLTF: ``flow.validation_queries`` of the
    persisted split's validation part (evenly spaced; ``flow.days`` kept), none of the held-out
    test queries the final table scores."""
    validation = list(env_factory.split_ids(cfg.env))[1]  # the validation part, whatever its name
    return held_out_ids(cfg, dataclasses.replace(flow, splits=[validation], limit=flow.validation_queries,
                                                 select="spread"), env)


def select_queries(ids: Sequence[int], limit: int | None, select: str = "spread") -> list[int]:
    """``limit`` of ``ids``: evenly spaced (``spread``: the split is ordered by days and level, so
    they mix) or the first ones; all of them without a limit."""
    ids = list(ids)
    if not limit or limit >= len(ids):
        return ids
    if select == "first":
        return ids[:limit]
    return [ids[(k * len(ids)) // limit] for k in range(limit)]


def _score(env, ids: list[int], plans: dict[int, Any], records: list[dict]) -> tuple[dict[str, float], list[dict]]:
    domain = flow_domain_of(env)
    pairs = [(i, plans[i] if plans[i] is not None else "") for i in ids]
    row = dict(domain.metrics(env, pairs))
    results = env.reward_plans(pairs)
    n = max(1, len(ids))
    row["reward"] = sum(r.reward for r in results) / n
    row["tokens/query"] = sum(r["tokens"] for r in records) / n
    row["seconds/query"] = sum(r["seconds"] for r in records) / n
    row["nodes/query"] = sum(r["nodes"] for r in records) / n
    row["decisions/query"] = sum(r["decisions"] for r in records) / n
    for rec, res in zip(records, results):
        rec["reward"] = res.reward
        rec["final_pass"] = domain.passed(res)
        rec["violations"] = domain.violations(res)
    return row, records


def table_markdown(rows: dict[str, dict[str, float]], title: str, *, failed: dict[str, list] | None = None,
                   n_queries: int | None = None) -> str:
    """The table (its columns: the rows' keys, :func:`table_columns`); ``failed`` (method -> the queries
    its backend failed, scored 0) marks those rows
    (``mtp (backend failed 5/6)``) and lists the queries below the table."""
    failed = failed or {}
    columns = list(next(iter(rows.values()), {}))  # every row's: the domain's metrics, then COSTS
    head = "| method | " + " | ".join(columns) + " |"
    sep = "|---|" + "---:|" * len(columns)
    lines = [f"### {title}", "", head, sep]
    for name, r in rows.items():
        cells = [f"{r[c]:.0f}" if c == "tokens/query" else f"{r[c]:.2f}" if c.endswith("/query") else f"{r[c]:.4f}"
                 for c in columns]
        mark = f" (backend failed {len(failed[name])}/{n_queries or '?'})" if failed.get(name) else ""
        lines.append(f"| {name}{mark} | " + " | ".join(cells) + " |")
    if failed:
        lines += ["", "**backend failures** (these queries score 0 because the backend failed them, not the flow):"]
        lines += [f"* {m}: queries {', '.join(str(q) for q in qs)}" for m, qs in failed.items()]
    return "\n".join(lines) + "\n"


def _backend_name(flow: FlowSettings) -> str:
    b = flow.backend
    if b.kind == "planner":
        return f"planner {b.checkpoint or '(planner: section)'}"
    if b.kind == "rule":
        return "rule: no model, the cheapest option shown of every choice"
    return f"{b.kind} {b.model}"
