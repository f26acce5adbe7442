"""What the agent flows need of a domain: the :class:`FlowDomain` interface, and what one flow did for
one query (:class:`FlowRun`).

The flow engine (:mod:`rltf.flows.engine`) and the agent patterns (:mod:`rltf.flows.agents`: Meta-Task
Planning's manager / supervisor / executors / deliverer, OKR-Agent's objectives and reviews, ReAct's
loop, the flat planner) know no domain. A domain -- the travel sandbox's flow plug-in is one -- fills
the patterns in (subclasses of a pattern with its catalogs, routes, constraints and texts) and says,
through this interface:

* which flow methods it offers (:attr:`FlowDomain.methods`, a registry: ``flow.methods`` names
  them; each :class:`FlowMethod` runs one query through its flow and says which roles its
  decisions play and whether RLTF can train it);
* how its warm start answers a choice (:meth:`FlowDomain.teacher`: the reference answer of a
  query's decisions, e.g. the travel solver's plan);
* how a delivered plan scores beside its reward (:attr:`FlowDomain.columns` / :meth:`FlowDomain.metrics`:
  the flow table's metrics; :meth:`FlowDomain.passed`: the final pass trajectories and records keep;
  :meth:`FlowDomain.violations`).

An env hands its domain to the core with ``flow_domain()`` (:class:`envs.protocol.RLTFEnv`; None:
the env has no agent flows). :func:`flow_domain_of` asks it, with the error a run config gets when
the env has none or does not offer a method.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rltf.algorithms.registry import Registry
from rltf.config.loading import ConfigError

__all__ = ["FlowDomain", "FlowMethod", "FlowRun", "Teacher", "check_methods", "flow_domain_of"]


@dataclass
class FlowRun:
    """What one flow did for one query: its plan (the domain's plan, or None when it delivered
    none), the pass (trace, usage, per-node completions) and why it failed, if it did; ``extra``:
    what the method records beside (MTP: its graph and each meta-task's local result, ``local``)."""

    plan: Any | None
    result: Any = None  # rltf.flows.engine.results.PassResult
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _one_role(node: str) -> str:
    return "planner"


def _trains_as_set(flow) -> str | None:
    return None


@dataclass(frozen=True)
class FlowMethod:
    """One flow method a domain offers (an entry of :attr:`FlowDomain.methods`)."""

    name: str
    run: Callable[..., FlowRun]
    """``run(env, query, backend, flow, *, config, system_prompts, trace_path) -> FlowRun``: one query
    through the method's flow (``flow``: the :class:`~rltf.config.flow.FlowSettings`, whose method
    section it reads; ``config``: the engine's :class:`~rltf.flows.engine.config.FlowConfig`)."""
    role_of: Callable[[str], str] = _one_role
    """``role_of(node name) -> role``: the role a node of the flow plays (per-role plots and adapters)."""
    roles: tuple[str, ...] = ()
    """The roles that get one LoRA adapter each under ``flow.roles: lora``, the first for a node whose
    role has none (empty: the method has no per-role adapters)."""
    trainable: bool = False
    """Every decision of its flow is a constrained choice of the planner: RLTF can train it."""
    local_credit: bool = False
    """Its decisions carry a local result (``FlowRun.extra["local"]``): ``flow.credit: local+global`` fits."""
    untrainable: Callable[[Any], str | None] = _trains_as_set
    """``untrainable(flow settings) -> why RLTF cannot train these settings`` (a free-text node), or None."""


@runtime_checkable
class Teacher(Protocol):
    """A query's reference answers: the option of a choice the domain's reference (solver) takes."""

    def pick(self, options: Sequence[str]) -> str:
        """The option the reference answer holds, else the domain's default (e.g. the first)."""
        ...


@runtime_checkable
class FlowDomain(Protocol):
    """What the agent flows need of a domain (see the module docstring)."""

    name: str
    """The domain's name in messages (``travel``)."""
    methods: Registry[FlowMethod]
    """The flow methods it offers, by the name ``flow.methods`` gives."""
    columns: tuple[str, ...]
    """The metric columns of its flow table, in order (travel: delivery, commonsense / hard micro and
    macro, final pass); the table adds the mean reward and the per-query costs."""

    def teacher(self, env: Any, query: Any) -> Teacher:
        """The warm start's answers on ``query`` of ``env``.

        Raises:
            ValueError: the domain knows no reference answer for the query (nothing to demonstrate).
        """
        ...

    def metrics(self, env: Any, pairs: Sequence[tuple[Any, Any]]) -> dict[str, float]:
        """:attr:`columns` over the (query, plan) ``pairs`` (a plan ``""``: none delivered)."""
        ...

    def passed(self, result: Any) -> bool:
        """Whether a plan's reward result (``env.reward_plans``) passes every constraint (the "final pass")."""
        ...

    def violations(self, result: Any) -> Any:
        """What a plan's reward result breaks, as a flow record keeps it (JSON)."""
        ...


def flow_domain_of(env: Any, env_name: str | None = None) -> FlowDomain:
    """``env``'s flow domain (its ``flow_domain()``); a :class:`ConfigError` when it has none."""
    domain = env.flow_domain()
    if domain is None:
        raise ConfigError(f"the env {env_name or type(env).__name__!r} has no agent flows (its flow_domain() is "
                          "None): flow.enabled / python -m rltf.flows.evaluate need an env that offers flow methods")
    return domain


def check_methods(domain: FlowDomain, methods: Sequence[str], env_name: str, *, trainable: bool = False) -> None:
    """A :class:`ConfigError` naming the env and the methods it offers when ``methods`` (``flow.methods``)
    names one it does not offer (``trainable``: one RLTF cannot train)."""
    offered = [n for n, m in domain.methods.items() if m.trainable or not trainable]
    bad = [m for m in methods if m not in offered]
    if bad:
        what = "trainable flow methods" if trainable else "flow methods"
        raise ConfigError(f"bad value for 'flow.methods': {list(methods)!r}; the env {env_name!r} offers the "
                          f"{what} {', '.join(offered) or '(none)'}")
