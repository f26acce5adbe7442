"""Held-out evaluation of agent flows on the travel sandbox: Meta-Task Planning, OKR-Agent, ReAct
and the flat planner, on one backend, with the benchmark's table.

    python -m rltf.flows.evaluate config=configs/travel-mtp.yaml [key=value ...]
    python -m rltf.flows.evaluate config=configs/travel-mtp.yaml flow.methods=[mtp,okr,react,flat] flow.limit=10
    python -m rltf.flows.evaluate config=configs/travel-mtp-hf.yaml dry_run=true     # lists, loads nothing

The config is a run config (``rltf/config/sections.py``: ``env:``, ``planner:``, ``run_name``, ...) plus a
``flow:`` section (:class:`rltf.config.flow.FlowSettings`); ``flow.*`` overrides go to it.
The planner backend uses ``flow.backend.checkpoint`` (a saved, e.g. warm-started, planner) or
the ``planner:`` section (the embedded planner is built with the travel env's tokenizer texts).
Every method runs on the held-out queries of ``flow.splits`` (the persisted split; ``flow.limit``
of them, evenly spaced or the first); each query is one pass of the method's flow. Written to ``<output_dir>/<run_name>/``:
``flow_eval.md`` (the table: delivery, commonsense micro / macro, hard micro / macro, final pass,
mean reward, tokens, seconds, nodes and constrained decisions per query), ``flow_eval.json``
(the table and every query's plan, reward, violations, error, usage) and ``traces/<method>/``
(the pass traces of the first ``flow.trace_queries`` queries). Last line:
``held-out final pass: mtp=<x> okr=<x> ... solver=<x>``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rltf.config.loading import ConfigError, RunConfig, load_config, resolve_config_path
from rltf.config.flow import FlowSettings, FlowSettingsError

__all__ = ["COLUMNS", "build_backend", "describe_flows", "evaluate_flows", "evaluate_method", "held_out_ids",
           "load_flow_config", "main", "run_method", "select_queries", "solver_row", "table_markdown"]

COLUMNS = ("delivery", "commonsense micro", "commonsense macro", "hard micro", "hard macro", "final pass", "reward",
           "tokens/query", "seconds/query", "nodes/query", "decisions/query")
_METRIC_KEYS = {"delivery_rate": "delivery", "commonsense_micro": "commonsense micro",
                "commonsense_macro": "commonsense macro", "hard_micro": "hard micro", "hard_macro": "hard macro",
                "final_pass": "final pass"}


# ------------------------------------------------------------------------------------ config
def _has_flow_field() -> bool:
    return any(f.name == "flow" for f in dataclasses.fields(RunConfig))


def load_flow_config(argv: Sequence[str] | None = None) -> tuple[RunConfig, FlowSettings]:
    """The run config and its ``flow:`` section from ``config=<path>`` and ``key=value`` arguments.

    Once :class:`~rltf.config.sections.RunConfig` has a ``flow: FlowSettings`` field, this is
    :func:`rltf.config.loading.load_config` and ``cfg.flow``. Until then the ``flow`` section and the
    ``flow.*`` overrides are read here (interpolations such as ``${seed}`` see the whole config)
    and everything else by :func:`~rltf.config.loading.load_config`, with the same error messages."""
    argv = list(argv or [])
    if _has_flow_field():
        cfg = load_config(argv)
        flow = cfg.flow  # type: ignore[attr-defined]
        _validate_flow(flow)
        return cfg, flow
    path: Path | None = None
    run_args, flow_args = [], []
    for raw in argv:
        arg = raw[2:] if raw.startswith("--") else raw
        key, sep, value = arg.partition("=")
        if sep and key.strip() == "config":
            path = resolve_config_path(value)
        elif sep and key.strip().startswith("flow."):
            flow_args.append(arg)
        elif sep and key.strip() == "flow":
            raise ConfigError(f"bad argument {raw!r}: override the flow section's keys (flow.methods=[mtp,okr])")
        else:
            run_args.append(raw)
    raw_tree: DictConfig = OmegaConf.load(path) if path is not None else OmegaConf.create({})
    if not isinstance(raw_tree, DictConfig):
        raise ConfigError(f"config file {str(path)!r} must be a mapping of keys to values")
    flow_tree = raw_tree.pop("flow", None)
    # the run part: rltf.config.loading reads and checks it (from a copy of the file without `flow:`)
    with tempfile.TemporaryDirectory() as tmp:
        run_file = Path(tmp) / (path.name if path is not None else "config.yaml")
        OmegaConf.save(raw_tree, run_file)
        try:
            cfg = load_config([f"config={run_file}", *run_args])
        except ConfigError as e:
            raise ConfigError(str(e).replace(str(run_file), str(path))) from None
    flow = _flow_section(cfg, flow_tree, flow_args, path)
    return cfg, flow


def _flow_section(cfg: RunConfig, tree: Any, overrides: list[str], path: Path | None) -> FlowSettings:
    base = OmegaConf.structured(FlowSettings)
    plain = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)  # what `${seed}` and the like see
    root = OmegaConf.create({**plain, "flow": tree if tree is not None else {}})
    sources = [(f"config file {str(path)!r}", None)] + [(f"override {a!r}", a) for a in overrides]
    for source, arg in sources:
        try:
            if arg is None:
                node = root.flow
                node = OmegaConf.create(OmegaConf.to_container(node, resolve=True)) if node is not None else {}
            else:
                node = OmegaConf.from_dotlist([arg]).flow
            base = OmegaConf.merge(base, node)
        except OmegaConfBaseException as e:
            key = getattr(e, "full_key", None) or ""
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ConfigError(f"bad flow setting 'flow.{key}' in {source}: {msg}") from None
    try:
        flow = OmegaConf.to_object(base)
    except OmegaConfBaseException as e:
        raise ConfigError(f"cannot resolve the flow section: {str(e).strip().splitlines()[0]}") from None
    _validate_flow(flow)
    return flow  # type: ignore[return-value]


def _validate_flow(flow: FlowSettings) -> None:
    try:
        flow.validate()
    except FlowSettingsError as e:
        raise ConfigError(str(e)) from None


# ------------------------------------------------------------------------------------- build
def build_backend(cfg: RunConfig, flow: FlowSettings, train_env=None):
    """The backend of ``flow.backend``: the planner backend on ``flow.backend.checkpoint`` or on the
    planner of ``cfg.planner`` (the embedded one built with ``train_env``'s tokenizer texts), or an
    hf / openai backend."""
    from rltf.flows.backends import make_backend

    b = flow.backend
    if b.kind != "planner":
        return make_backend(b.backend_config())
    from rltf.planners.loading import load_planner
    from rltf.planners.tokenizer import tokenizer_texts_for

    settings = cfg.planner if b.checkpoint is None else dataclasses.replace(cfg.planner, model=b.checkpoint)
    texts = tokenizer_texts_for(train_env) if settings.model == "embedded" and train_env is not None else None
    planner = load_planner(settings, texts)
    planner.model.to(b.device)
    return make_backend(b.backend_config(), planner=planner)


def run_method(method: str, env, query, backend, flow: FlowSettings, trace_path: str | Path | None = None):
    """One query through one method's flow: a :class:`~rltf.flows.agents.travel_nodes.FlowRun`."""
    from rltf.flows.engine.flow import FlowConfig

    config = FlowConfig(max_attempts=flow.max_attempts)
    common = {"config": config, "system_prompts": flow.system_prompts, "trace_path": trace_path}
    if method == "mtp":
        from rltf.flows.agents.mtp import run_mtp

        return run_mtp(env, query, backend, flow.mtp, **common)
    if method == "okr":
        from rltf.flows.agents.okr import run_okr

        return run_okr(env, query, backend, flow.okr, **common)
    if method == "react":
        from rltf.flows.agents.react import run_react

        return run_react(env, query, backend, flow.react, **common)
    if method == "flat":
        from rltf.flows.agents.flat import run_flat

        return run_flat(env, query, backend, **common)
    raise ValueError(f"unknown flow method {method!r}")


# --------------------------------------------------------------------------------- evaluate
def evaluate_flows(cfg: RunConfig, flow: FlowSettings, *, backend=None, envs_pair=None,
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every method of ``flow.methods`` on the held-out queries (see the module docstring);
    ``backend`` / ``envs_pair`` (train, held-out) reuse what the caller built. Returns the summary
    written to ``flow_eval.json``."""
    import envs as env_factory

    if cfg.env.name != "travel":
        raise ConfigError(f"the flows plan on the travel sandbox: set env.name=travel (got {cfg.env.name!r})")
    started = time.perf_counter()
    train, held = envs_pair if envs_pair is not None else env_factory.make_train_and_held_out(cfg.env)
    ids = held_out_ids(cfg, flow, held)
    if backend is None:
        backend = build_backend(cfg, flow, train)
    run_dir = Path(cfg.run_dir)
    log(f"flows {', '.join(flow.methods)} on {len(ids)} {'+'.join(flow.splits)} queries, backend {backend!r}")
    rows: dict[str, dict[str, float]] = {}
    queries: dict[str, list[dict]] = {}
    for method in flow.methods:
        rows[method], queries[method] = evaluate_method(method, held, ids, backend, flow,
                                                        trace_dir=run_dir / "traces" / method)
        r = rows[method]
        log(f"{method}: final pass {r['final pass']:.4f}, delivery {r['delivery']:.4f}, reward {r['reward']:.4f} "
            f"({r['seconds/query']:.2f} s, {r['tokens/query']:.0f} tokens per query)")
    if flow.oracle:
        rows["solver"], queries["solver"] = solver_row(held, ids)
    title = f"{', '.join(flow.methods)} on {len(ids)} {'+'.join(flow.splits)} queries ({_backend_name(flow)})"
    md = table_markdown(rows, title)
    summary = {"table": rows, "queries": ids, "title": title, "backend": dataclasses.asdict(flow.backend),
               "results": queries, "seconds": time.perf_counter() - started}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "flow_eval.md").write_text(md)
    (run_dir / "flow_eval.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    log("\n" + md)
    log(f"run folder: {run_dir}  ({summary['seconds']:.0f}s)")
    log("held-out final pass: " + " ".join(f"{m}={r['final pass']:.4f}" for m, r in rows.items()))
    return summary


def evaluate_method(method: str, env, ids: Sequence[int], backend, flow: FlowSettings,
                    trace_dir: Path | None = None) -> tuple[dict[str, float], list[dict]]:
    """``method``'s flow on each query of ``ids`` with ``backend``: the table row and one record per
    query (plan, error, seconds, tokens, nodes, decisions, log-prob; reward, final pass and
    violations). The first ``flow.trace_queries`` passes write their traces to ``trace_dir``."""
    from rltf.flows.agents.travel_nodes import FlowRun

    plans: dict[int, Any] = {}
    records = []
    for k, i in enumerate(ids):
        trace = trace_dir / f"query{i}.json" if trace_dir is not None and k < flow.trace_queries else None
        t0 = time.perf_counter()
        try:
            fr = run_method(method, env, i, backend, flow, trace)
        except Exception as e:  # noqa: BLE001 - one query's crash is that query's failure, reported
            fr = FlowRun(None, None, f"{type(e).__name__}: {e}")
        secs = time.perf_counter() - t0
        plans[i] = fr.plan
        res = fr.result
        steps = res.constrained() if res is not None else []
        records.append({
            "query": i, "plan": fr.plan, "error": fr.error, "seconds": secs,
            "tokens": res.usage.total_tokens if res is not None else 0,
            "nodes": len(res.order) if res is not None else 0, "decisions": len(steps),
            "logprob": sum(c.logprob for _, c in steps if c.logprob is not None),
            "trace": str(trace) if trace is not None and res is not None else None,
            "extra": fr.extra})
    return _score(env, list(ids), plans, records)


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
    import envs as env_factory

    parts = env_factory.split_ids(cfg.env)
    ids = [i for s in dict.fromkeys(flow.splits) for i in parts[s]]
    if flow.days:
        ids = [i for i in ids if env.get_query(i).days in flow.days]
    ids = select_queries(ids, flow.limit, flow.select)
    if not ids:
        raise ConfigError(f"no held-out query in {flow.splits} with days {flow.days or cfg.env.travel.days}")
    return ids


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
    pairs = [(i, plans[i] if plans[i] is not None else "") for i in ids]
    m = env.metrics(pairs)
    results = env.reward_plans(pairs)
    row = {_METRIC_KEYS[k]: float(m[k]) for k in _METRIC_KEYS}
    n = max(1, len(ids))
    row["reward"] = sum(r.reward for r in results) / n
    row["tokens/query"] = sum(r["tokens"] for r in records) / n
    row["seconds/query"] = sum(r["seconds"] for r in records) / n
    row["nodes/query"] = sum(r["nodes"] for r in records) / n
    row["decisions/query"] = sum(r["decisions"] for r in records) / n
    for rec, res in zip(records, results):
        rec["reward"] = res.reward
        rec["final_pass"] = res.evaluation.final_pass
        rec["violations"] = res.evaluation.violations()
    return row, records


def table_markdown(rows: dict[str, dict[str, float]], title: str) -> str:
    head = "| method | " + " | ".join(COLUMNS) + " |"
    sep = "|---|" + "---:|" * len(COLUMNS)
    lines = [f"### {title}", "", head, sep]
    for name, r in rows.items():
        cells = [f"{r[c]:.0f}" if c == "tokens/query" else f"{r[c]:.2f}" if c.endswith("/query") else f"{r[c]:.4f}"
                 for c in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _backend_name(flow: FlowSettings) -> str:
    b = flow.backend
    if b.kind == "planner":
        return f"planner {b.checkpoint or '(planner: section)'}"
    return f"{b.kind} {b.model}"


# --------------------------------------------------------------------------------- dry run
NODES = {
    "mtp": [
        ("manager.route", "choice: the destination's cities in order (routes the sandbox allows)"),
        ("manager.schedule", "choice: the days the traveller moves"),
        ("manager.transport", "choice: flights and taxis | self-driving; its after-query adds the meta-task graph"),
        ("supervise.<task>", "free text: the meta-task rewritten with its predecessors' outcomes"),
        ("leg<j>", "choice: FlightSearch + GoogleDistanceMatrix results meeting the transportation rule and family"),
        ("stay<j>", "choice: AccommodationSearch results meeting room type, house rule, minimum nights"),
        ("day<d>.<meal>", "choice: RestaurantSearch results not chosen before, cuisines still missing first"),
        ("day<d>.attraction", "choice: AttractionSearch results not visited before"),
        ("deliverer", "choice: the itineraries (as chosen / budget-repaired) within the budget"),
    ],
    "okr": [
        ("lead.objectives", "choice: the order of route, transport, accommodation, dining, sightseeing, budget"),
        ("<objective>.key_results", "choice: a set of the objective's named constraints"),
        ("<agent>.criterion", "free text: the agent's evaluation criterion"),
        ("r<k>.route.cities / r<k>.route.schedule", "choice: the route agent's expansion"),
        ("r<k>.<slot>", "choice: a tool result for an empty slot of the agent's objective"),
        ("r<k>.<agent>.review", "choice: pass | revise <slot>, judged by the model against its criteria"),
        ("r<k>.<agent>.revise<n>.<slot>", "choice: alternatives fixing a violated criterion"),
    ],
    "react": [
        ("step<k>.think", "free text: a thought"),
        ("step<k>.act", "choice: a search not made yet, or Finish; the observation is fed back"),
        ("plan", "the itinerary under the plan grammar of the gathered entities (free JSON on openai)"),
    ],
    "flat": [("plan", "the whole itinerary under the query's plan grammar (free JSON on openai)")],
}


def _active(flow: FlowSettings, node: str) -> bool:
    """Whether a node template of :data:`NODES` occurs with these settings."""
    if node.startswith("supervise."):
        return flow.mtp.supervisor == "model"
    if node.endswith((".criterion", ".review")):
        return flow.okr.criteria == "model"
    if node.endswith(".key_results"):
        return flow.okr.levels >= 2
    if node.endswith(".think"):
        return flow.react.think_tokens > 0
    return True


def describe_flows(cfg: RunConfig, flow: FlowSettings) -> str:
    """What :func:`evaluate_flows` would build and run; loads nothing."""
    import envs as env_factory

    lines = [f"dry run of {cfg.run_name!r}: the configuration is valid; nothing was loaded "
             "(no weights, no database, no requests)",
             f"run         {Path(cfg.run_dir).resolve()} (flow_eval.md, flow_eval.json, traces/<method>/)"]
    lines += env_factory.describe(cfg.env)
    which = (f"{flow.limit} ({'evenly spaced' if flow.select == 'spread' else 'the first'}) " if flow.limit
             else "all ")
    lines.append(f"queries     {which}held-out queries of {'+'.join(flow.splits)}"
                 + (f" with days in {flow.days}" if flow.days else ""))
    b = flow.backend
    if b.kind == "planner":
        p = cfg.planner
        if b.checkpoint:
            where = f"the saved planner {b.checkpoint}"
        elif p.model == "embedded":
            e = p.embedded
            where = (f"the embedded {'LLaMA' if p.arch == 'causal' else 'T5'} (d_model {e.d_model}, {e.num_layers} "
                     f"layers, vocab <= {e.vocab_size}; tokenizer on the travel env's texts; cached under {e.dir})")
        else:
            where = f"planner.model={p.model}"
        lines.append(f"backend     planner: {where}, on {b.device}; choices and grammars constrained "
                     "(exact log-probs per decision)")
    elif b.kind == "hf":
        lines.append(f"backend     hf: {b.model} on {b.device} in {b.dtype}, chat template {b.chat_template}; "
                     "choices and grammars constrained")
    else:
        key = "set" if os.environ.get(b.api_key_env) else "NOT set"
        lines.append(f"backend     openai: model {b.model} at {b.base_url or 'api.openai.com'} (key in ${b.api_key_env}: "
                     f"{key}); choices validated and re-asked, plans as free JSON")
    lines.append(f"sampling    {'sampled at T=' + str(b.temperature) if b.do_sample else 'greedy'}, free text <= "
                 f"{b.max_new_tokens} tokens; {flow.max_attempts} attempts per node; system prompts "
                 f"{'on' if flow.system_prompts else 'off'}")
    for m in flow.methods:
        s = {"mtp": flow.mtp, "okr": flow.okr, "react": flow.react}.get(m)
        extra = f"  ({', '.join(f'{k}={v}' for k, v in dataclasses.asdict(s).items())})" if s is not None else ""
        lines.append(f"method      {m}{extra}")
        for name, what in NODES[m]:
            if _active(flow, name):
                lines.append(f"  node      {name:<38} {what}")
    if flow.oracle:
        lines.append("method      solver  (the exact minimum-cost solver: the oracle row, no model)")
    return "\n".join(lines)


# -------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> dict | None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cfg, flow = load_flow_config(sys.argv[1:] if argv is None else argv)
    if cfg.dry_run:
        print(describe_flows(cfg, flow))
        return None
    if flow.backend.torch_threads:
        import torch

        torch.set_num_threads(flow.backend.torch_threads)
    warnings.filterwarnings("ignore", message=r".*prompt\(s\) are longer than.*")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # "Token indices sequence length is longer than ..." per long prompt
    except ImportError:  # pragma: no cover
        pass
    return evaluate_flows(cfg, flow)


if __name__ == "__main__":
    from rltf.run.cli import run_cli

    run_cli(main)  # user-facing errors: one line on stderr, exit status 2
