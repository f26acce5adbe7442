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
of them, evenly spaced or the first); each query is one pass of the method's flow. Written to
``<output_dir>/<run_name>/``: ``flow_eval.md`` (the table: delivery, commonsense micro / macro, hard micro /
macro, final pass,
mean reward, tokens, seconds, nodes and constrained decisions per query; under its title a line naming the
database, flights, queries and split), ``flow_eval.json`` (the table, that data as ``data``
(the env's provenance line), and every query's plan, reward, violations, error, usage) and ``traces/<method>/``
(the pass traces of the first ``flow.trace_queries`` queries). While a method runs, a bar ``flow <method>``
counts its queries, ticked after each batch of passes (plain lines at most every 30 s with
``logging.progress_bar: false``). Last line:
``held-out final pass: mtp=<x> okr=<x> ... solver=<x>``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from transformers.utils import logging as hf_logging

import envs as env_factory
from constrained_decoding.prompts import PromptTruncationWarning
from rltf.config.flow import FlowSettings, FlowSettingsError
from rltf.config.loading import ConfigError, RunConfig, load_config, resolve_config_path
from rltf.flows.evaluation import evaluate_flows
from rltf.planners.source import SourceKind, resolve_planner_source
from rltf.run.cli import run_cli

__all__ = ["describe_flows", "load_flow_config", "main"]


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



# --------------------------------------------------------------------------------- dry run
NODES = {  # the nodes of the travel flow domain's methods, as the dry run lists them
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
        source = resolve_planner_source(p.model if b.checkpoint is None else b.checkpoint)  # as build_backend does
        if b.checkpoint is not None:
            where = f"the saved planner {source.name}"
        elif source.kind is SourceKind.EMBEDDED:
            e = p.embedded
            where = (f"the embedded {'LLaMA' if p.arch == 'causal' else 'T5'} (d_model {e.d_model}, {e.num_layers} "
                     f"layers, vocab <= {e.vocab_size}; tokenizer on the travel env's texts; cached under {e.dir})")
        else:
            where = f"planner.model={source.name}"
        lines.append(f"backend     planner: {where}, on {b.device}; choices and grammars constrained "
                     "(exact log-probs per decision)")
    elif b.kind == "rule":
        lines.append("backend     rule: no model; every choice answered with the cheapest option shown, free text with "
                     "the empty answer (the scaffolds' no-model baseline)")
    elif b.kind == "hf":
        lines.append(f"backend     hf: {b.model} on {b.device} in {b.dtype}, chat template {b.chat_template}; "
                     "choices and grammars constrained")
    else:
        key = "set" if os.environ.get(b.api_key_env) else "NOT set"
        lines.append(f"backend     openai: model {b.model} at {b.base_url or 'api.openai.com'} "
                     f"(key in ${b.api_key_env}: {key}); choices validated and re-asked, plans as free JSON")
    lines.append(f"sampling    {'sampled at T=' + str(b.temperature) if b.do_sample else 'greedy'}, free text <= "
                 f"{b.max_new_tokens} tokens; {flow.max_attempts} attempts per node; system prompts "
                 f"{'on' if flow.system_prompts else 'off'}")
    for m in flow.methods:
        s = {"mtp": flow.mtp, "okr": flow.okr, "react": flow.react}.get(m)
        extra = f"  ({', '.join(f'{k}={v}' for k, v in dataclasses.asdict(s).items())})" if s is not None else ""
        lines.append(f"method      {m}{extra}")
        for name, what in NODES.get(m, ()):  # (the travel patterns' nodes; another domain's methods: named only)
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
        torch.set_num_threads(flow.backend.torch_threads)
    warnings.filterwarnings("ignore", category=PromptTruncationWarning)  # the flows' short limits cut by design
    hf_logging.set_verbosity_error()  # "Token indices sequence length is longer than ..." per long prompt
    return evaluate_flows(cfg, flow)


if __name__ == "__main__":
    run_cli(main)  # user-facing errors: one line on stderr, exit status 2
