"""The flow methods by name: which agent flow runs for a method of ``flow.methods`` (:func:`run_method`:
the entry of that name in the env's flow domain, :attr:`rltf.flows.agents.domain.FlowDomain.methods`; the
travel sandbox's ``mtp``, ``okr``, ``react``, ``flat``) and the backend a ``flow:`` section
describes (:func:`build_backend`). Evaluation (:mod:`rltf.flows.evaluation`) and training
(:mod:`rltf.flows.training.trajectory`, :mod:`rltf.flows.training.teacher`) both run flows through here."""

from __future__ import annotations

from pathlib import Path

from rltf.config.flow import FlowSettings
from rltf.config.loading import RunConfig
from rltf.flows.agents.domain import FlowRun, flow_domain_of
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


def run_method(method: str, env, query, backend, flow: FlowSettings,
               trace_path: str | Path | None = None) -> FlowRun:
    """One query through the flow of ``method`` of ``env``'s flow domain (an unknown method: a
    ``ValueError`` listing the domain's)."""
    entry = flow_domain_of(env).methods.lookup(method)
    config = FlowConfig(max_attempts=flow.max_attempts, backoff=Backoff(max_attempts=flow.backend.call_attempts))
    return entry.run(env, query, backend, flow, config=config, system_prompts=flow.system_prompts,
                     trace_path=trace_path)
