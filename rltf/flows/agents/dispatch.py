"""The flow methods by name: which agent flow runs for a method of ``flow.methods``
(:func:`run_method`: ``mtp``, ``okr``, ``react``, ``flat``) and the backend a ``flow:`` section
describes (:func:`build_backend`). Evaluation (:mod:`rltf.flows.evaluation`) and training
(:mod:`rltf.flows.training.trajectory`, :mod:`rltf.flows.training.teacher`) both run flows through here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rltf.config.flow import FlowSettings
from rltf.config.loading import RunConfig

__all__ = ["build_backend", "run_method"]


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
    from rltf.flows.engine.config import FlowConfig

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
