"""What every agent flow on the travel sandbox (MTP, OKR-Agent, ReAct) starts from and ends with.

:class:`AgentSetup` is the query's catalog (this pass's view on the query's shared tables:
:func:`envs.travel.catalog_memo.shared_catalog`), the backend, the engine config and whether nodes get
a role system message -- each agent holds one (composition, no base class); :func:`delivered`
reads a program pass's plan and why it delivered none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envs.travel.catalog import Catalog
from envs.travel.catalog_memo import shared_catalog
from envs.travel.query import TravelQuery
from rltf.flows.agents.travel_nodes import constraints_text
from rltf.flows.backends.base import Message
from rltf.flows.engine.config import FlowConfig

__all__ = ["AgentSetup", "delivered"]


@dataclass
class AgentSetup:
    """One query's agent flow: the env, its catalog and query, the backend, the engine config,
    and ``system_prompts`` (a role system message before each node's request)."""

    env: Any
    cat: Catalog
    q: TravelQuery
    backend: Any
    config: FlowConfig
    system_prompts: bool

    @classmethod
    def create(cls, env, query, backend, config: FlowConfig | None = None,
               system_prompts: bool = False) -> AgentSetup:
        cat = shared_catalog(env, query)  # this pass's view; the searches and route options are the query's
        return cls(env, cat, cat.q, backend, config or FlowConfig(), system_prompts)

    def head(self) -> str:
        """The query and its constraints: how every agent's request starts."""
        return f"{self.q.query}\nConstraints: {constraints_text(self.q)}."

    def messages(self, system: str, text: str) -> list[Message]:
        """The request ``text``, after the role's ``system`` message when ``system_prompts`` is on."""
        msgs: list[Message] = []
        if self.system_prompts:
            msgs.append({"role": "system", "content": system})
        msgs.append({"role": "user", "content": text})
        return msgs


def delivered(program_run, undelivered: str | None = None) -> tuple[Any, str | None]:
    """``(plan, error)`` of a finished program pass: its value, or ``None`` and why (``undelivered``,
    else the failed nodes' errors, else ``no plan``)."""
    plan = program_run.value if program_run.finished else None
    if plan is not None:
        return plan, None
    failures = "; ".join(f"{r.name}: {r.error}" for r in program_run.result.failures())
    return None, undelivered or failures or "no plan"
