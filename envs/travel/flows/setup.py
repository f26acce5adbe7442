"""Where every travel agent flow starts: the query's catalog (this pass's view on the query's shared
tables: :func:`envs.travel.catalog_memo.shared_catalog`) and the pattern's
:class:`~rltf.flows.agents.agent_setup.AgentSetup`, whose requests start with the query and its
constraints."""

from __future__ import annotations

from envs.travel.catalog import Catalog
from envs.travel.catalog_memo import shared_catalog
from envs.travel.flows.texts import constraints_text
from rltf.flows.agents.agent_setup import AgentSetup
from rltf.flows.engine.config import FlowConfig

__all__ = ["travel_setup"]


def travel_setup(env, query, backend, config: FlowConfig | None = None,
                 system_prompts: bool = False) -> tuple[AgentSetup, Catalog]:
    """One query's setup and catalog (the searches and route options are the query's)."""
    cat = shared_catalog(env, query)
    q = cat.q
    head = f"{q.query}\nConstraints: {constraints_text(q)}."
    return AgentSetup(env, backend, config or FlowConfig(), system_prompts, q.id, q.query, head), cat
