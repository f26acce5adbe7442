"""One LoRA adapter per role of a flow on one base model (``flow.roles: lora``), trained together.

The planner is a PEFT model (``planner.lora.enabled``); :meth:`RoleAdapters.attach` adds one
adapter per role of the method (its :attr:`~rltf.flows.agents.domain.FlowMethod.roles`; travel's MTP:
manager, executor, deliverer; OKR-Agent: lead, executor, reviewer) with the planner's LoRA config. A
new adapter's B matrix is zero, so every role starts as the (warm-started) base. While a flow runs, the
engine tells the backend which node asks (``begin_node``) and :class:`RoleBackend` activates that
node's role adapter; re-scoring activates each role's adapter for its own decisions
(:meth:`RoleAdapters.rescore`). Every role adapter stays trainable whichever is active (PEFT's
``set_adapter`` would freeze the others and their gradients would be dropped), so one optimizer
step updates every role that decided.

Checkpoints hold every adapter (PEFT saves each non-default adapter in a sub-folder named after
it); :meth:`RoleAdapters.load` puts them back on a reloaded planner.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path

import torch

from rltf.flows.agents.domain import FlowMethod
from rltf.flows.backends.planner import rescore

__all__ = ["RoleAdapters", "RoleBackend"]


class RoleAdapters:
    """The role adapters of ``method`` (a flow domain's method) on ``planner`` (a PEFT model)."""

    def __init__(self, planner, method: FlowMethod):
        self.planner = planner
        self.method = method.name
        self.names = method.roles
        self._role_of = method.role_of
        self.active: str | None = None

    @classmethod
    def attach(cls, planner, method: FlowMethod) -> RoleAdapters:
        """Add one adapter per role (the planner's own LoRA config, B = 0: the base's behaviour)."""
        if not method.roles:
            raise ValueError(f"flow.roles=lora: the flow method {method.name!r} has no per-role adapters")
        if not planner.is_peft:
            raise ValueError("flow.roles=lora needs a LoRA planner to put the role adapters on: set "
                             "planner.lora.enabled=true")
        model = planner.model
        config = model.peft_config[model.active_adapter]
        out = cls(planner, method)
        for name in out.names:
            if name not in model.peft_config:
                model.add_adapter(name, copy.deepcopy(config))
        out.use(out.names[0])
        return out

    @property
    def model(self):
        return self.planner.model

    def parameters(self, role: str) -> list[torch.nn.Parameter]:
        return [p for n, p in self.model.named_parameters() if "lora_" in n and f".{role}." in n]

    def use(self, role: str) -> None:
        """Activate ``role``'s adapter; every role adapter stays trainable."""
        if role not in self.names:
            raise ValueError(f"no adapter for role {role!r}; the roles of {self.method} are {list(self.names)}")
        if role != self.active:
            self.model.set_adapter(role)
            self.active = role
        for name in self.names:
            for p in self.parameters(name):
                p.requires_grad_(True)

    def role_of(self, node: str) -> str:
        role = self._role_of(node)
        return role if role in self.names else self.names[0]

    def backend(self, inner) -> RoleBackend:
        return RoleBackend(inner, self)

    def rescore(self, model, tokenizer, decisions: Sequence, *, through_forward: bool = False) -> torch.Tensor:
        """log π_c of each decision under its role's adapter, with gradients, in the given order."""
        parts: dict[str, list[int]] = {}
        for i, d in enumerate(decisions):
            parts.setdefault(self.role_of(d.node), []).append(i)
        pieces: list[tuple[list[int], torch.Tensor]] = []
        for role, idx in parts.items():
            self.use(role)
            pieces.append((idx, rescore(model, tokenizer, [decisions[i].completion for i in idx],
                                        through_forward=through_forward)))
        if not pieces:
            return torch.zeros(0)
        out = torch.zeros(len(decisions), dtype=pieces[0][1].dtype, device=pieces[0][1].device)
        for idx, lp in pieces:
            out = out.index_put((torch.tensor(idx, device=lp.device),), lp)
        return out

    def load(self, directory: str | Path) -> None:
        """Every role adapter's weights from a saved planner directory (PEFT's sub-folder per adapter)."""
        # optional dependency: peft, needed only with flow.roles: lora
        from peft import set_peft_model_state_dict
        from peft.utils import load_peft_weights  # (optional, as above)

        d = Path(directory)
        for name in self.names:
            sub = d / name
            if not sub.is_dir():
                raise FileNotFoundError(f"{d} has no adapter for role {name!r} (expected {sub}/): it was not saved "
                                        "by a flow.roles=lora run")
            set_peft_model_state_dict(self.model, load_peft_weights(str(sub), device="cpu"), adapter_name=name)
        self.active = None
        self.use(self.names[0])


class RoleBackend:
    """A planner backend that decodes each node with its role's adapter (see the module docstring)."""

    supports_grammar = True
    per_item_generators = True

    def __init__(self, inner, adapters: RoleAdapters):
        self.inner = inner
        self.adapters = adapters

    def node_group(self, name: str) -> str:
        """Nodes of one role decode together (one adapter per call: :class:`~rltf.flows.engine.batching.PassBatch`)."""
        return self.adapters.role_of(name)

    def begin_node(self, name: str) -> None:
        self.adapters.use(self.adapters.role_of(name))

    def generate(self, messages_batch, grammar=None, *, sampling=None, generators=None):
        if generators is None:
            return self.inner.generate(messages_batch, grammar, sampling=sampling)
        return self.inner.generate(messages_batch, grammar, sampling=sampling, generators=generators)

    def reseed(self, seed: int) -> None:
        self.inner.reseed(seed)

    def describe(self, messages) -> str:
        return self.inner.describe(messages)

    def __repr__(self) -> str:
        return f"RoleBackend({self.inner!r}, roles={list(self.adapters.names)})"
