"""Flow backends: one interface (:class:`Backend`), four implementations, one factory.

======================  =====================================================================
``hf``                  :class:`HFBackend`: a local transformers model (id or directory)
``openai``              :class:`OpenAIBackend`: any OpenAI-compatible chat endpoint
``planner``             :class:`PlannerBackend`: rltf's trainable planner, constrained decoding
``rule``                :class:`RuleBackend`: no model, the cheapest option shown of every choice (the
                        scaffolds' no-model baseline)
(tests)                 :class:`ScriptedBackend`: canned answers
======================  =====================================================================

The kinds are a :class:`~rltf.algorithms.registry.Registry` (:data:`KINDS`: kind -> class name);
``flow.backend.kind`` (:class:`rltf.config.flow.FlowBackendSettings`) accepts exactly its names.

:func:`make_backend` builds one from a config mapping such as
``{"kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "llama", "sampling": {"max_new_tokens": 64}}``.
Heavy modules (torch, transformers, openai) load only when their backend is used.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rltf.algorithms.registry import Registry
from rltf.flows.backends.base import (
    Backend,
    BackendError,
    Choices,
    Completion,
    GrammarArg,
    Message,
    Messages,
    Sampling,
    render_plain,
)
from rltf.flows.backends.scripted import ScriptedBackend

if TYPE_CHECKING:
    from rltf.flows.backends.hf import HFBackend
    from rltf.flows.backends.local import LocalModelBackend
    from rltf.flows.backends.openai_chat import OpenAIBackend
    from rltf.flows.backends.planner import PlannerBackend, rescore
    from rltf.flows.backends.rule import RuleBackend

__all__ = ["KINDS", "Backend", "BackendError", "Choices", "Completion", "GrammarArg", "HFBackend", "LocalModelBackend",
           "Message", "Messages", "OpenAIBackend", "PlannerBackend", "RuleBackend", "Sampling", "ScriptedBackend",
           "make_backend", "render_plain", "rescore"]

_LAZY = {"HFBackend": "hf", "LocalModelBackend": "local", "OpenAIBackend": "openai_chat",
         "PlannerBackend": "planner", "rescore": "planner", "RuleBackend": "rule"}
KINDS: Registry[str] = Registry("flow backend kind", {"hf": "HFBackend", "openai": "OpenAIBackend",
                                                      "planner": "PlannerBackend", "rule": "RuleBackend"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"rltf.flows.backends.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_backend(config: Mapping[str, Any], *, planner: Any = None) -> Backend:
    """The backend a config mapping describes: ``kind`` (a name of :data:`KINDS`), the
    backend's keyword arguments, and ``sampling`` as a mapping of :class:`Sampling` fields.

    ``hf``: ``model`` (id or directory), ``device``, ``dtype``, ``arch``, ``seed``, ``chat_template``,
    ``batch_size``. ``openai``: ``model``, ``base_url``, ``api_key_env``, ``timeout``,
    ``max_concurrency``, ``logprobs``, ``seed``, ``extra_body``, ``max_answer_chars``. ``planner``: the live planner is
    passed as ``planner=`` (the one being trained), plus ``seed``, ``chat_template``, ``batch_size``. ``rule``:
    nothing but ``sampling`` (ignored).
    An unknown key is an error that lists the known ones."""
    cfg = dict(config)
    kind = cfg.pop("kind", None)
    try:
        cls = __getattr__(KINDS.lookup(kind))
    except ValueError as e:
        raise BackendError(str(e)) from None
    if isinstance(cfg.get("sampling"), Mapping):
        try:
            cfg["sampling"] = Sampling(**cfg["sampling"])
        except TypeError as e:
            raise BackendError(f"backend sampling: {e} (fields: max_new_tokens, do_sample, temperature, top_p, "
                               "top_k)") from None
    params = inspect.signature(cls.__init__).parameters
    known = sorted(p for p in params if p not in ("self", "planner"))
    unknown = sorted(set(cfg) - set(known))
    if unknown:
        raise BackendError(f"unknown key(s) {unknown} for the {kind} backend; known: {known}")
    if kind == "planner":
        if planner is None:
            raise BackendError("the planner backend needs the planner object: make_backend(config, planner=planner)")
        return cls(planner, **cfg)
    if planner is not None:
        raise BackendError(f"planner= is only for the planner backend, not {kind}")
    return cls(**cfg)
