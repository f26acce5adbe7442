"""The flow methods by name: which agent flow runs for a method of ``flow.methods``
(:func:`run_method`: ``mtp``, ``okr``, ``react``, ``flat``) and the backend a ``flow:`` section
describes (:func:`build_backend`). Evaluation (:mod:`rltf.flows.evaluation`) and training
(:mod:`rltf.flows.training.trajectory`, :mod:`rltf.flows.training.teacher`) both run flows through here."""

from __future__ import annotations

from pathlib import Path

from rltf.config.flow import FlowSettings
from rltf.config.loading import RunConfig
from rltf.flows.agents.flat import run_flat
from rltf.flows.agents.mtp import run_mtp
from rltf.flows.agents.okr import run_okr
from rltf.flows.agents.react import run_react
from rltf.flows.backends import make_backend
from rltf.flows.engine.config import Backoff, FlowConfig
from rltf.planners.loading import load_planner
from rltf.planners.source import SourceKind, resolve_planner_source
from rltf.planners.tokenizer import tokenizer_texts_for

__all__ = ["build_backend", "run_method"]


def build_backend(cfg: RunConfig, flow: FlowSettings, train_env=None):
    """The backend of ``flow.backend``: the planner backend on ``flow.backend.checkpoint`` or on the
    planner of ``cfg.planner`` (the embedded one built with ``train_env``'s tokenizer texts), or an
    hf / openai backend."""
    b = flow.backend
    if b.kind != "planner":
        return make_backend(b.backend_config())
    source = resolve_planner_source(cfg.planner.model if b.checkpoint is None else b.checkpoint)
    texts = tokenizer_texts_for(train_env) if source.kind is SourceKind.EMBEDDED and train_env is not None else None
    planner = load_planner(cfg.planner, texts, source=source)
    planner.model.to(b.device)
    return make_backend(b.backend_config(), planner=planner)


def run_method(method: str, env, query, backend, flow: FlowSettings, trace_path: str | Path | None = None):
    """One query through one method's flow: a :class:`~rltf.flows.agents.travel_nodes.FlowRun`."""
    config = FlowConfig(max_attempts=flow.max_attempts, backoff=Backoff(max_attempts=flow.backend.call_attempts))
    common = {"config": config, "system_prompts": flow.system_prompts, "trace_path": trace_path}
    if method == "mtp":
        return run_mtp(env, query, backend, flow.mtp, **common)
    if method == "okr":
        return run_okr(env, query, backend, flow.okr, **common)
    if method == "react":
        return run_react(env, query, backend, flow.react, **common)
    if method == "flat":
        return run_flat(env, query, backend, **common)
    raise ValueError(f"unknown flow method {method!r}")
