"""What every agent pattern (MTP, OKR-Agent, ReAct, flat) starts from and ends with.

:class:`AgentSetup` is one query's flow: the env, the backend, the engine config, whether nodes get
a role system message, and the query as the domain words it (its id, its text, and the head every
request starts with: the travel domain's is the query and its constraints) -- each agent holds one
(composition, no base class); :func:`delivered` reads a program pass's plan and why it delivered none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rltf.flows.backends.base import Message
from rltf.flows.engine.config import FlowConfig

__all__ = ["AgentSetup", "delivered"]


@dataclass
class AgentSetup:
    """One query's agent flow: the env, the backend, the engine config, ``system_prompts`` (a role
    system message before each node's request), and the query: ``query_id`` (the flow's name),
    ``task`` (its text, ``db["task"]``) and ``head_text`` (how every agent's request starts)."""

    env: Any
    backend: Any
    config: FlowConfig
    system_prompts: bool
    query_id: Any
    task: str
    head_text: str

    def head(self) -> str:
        """The query as every agent's request starts (the domain's wording)."""
        return self.head_text

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
