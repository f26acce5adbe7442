"""The KL reference: the frozen policy RLTF starts from (:class:`ReferencePolicy`).

With LoRA it is the same model with the adapter disabled (no second copy in memory), which is the
start policy only while the adapter is fresh and every earlier adapter is merged into the base
(:func:`rltf.planners.loading.rltf_start_planner`, :func:`rltf.planners.loading.check_kl_reference`).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import torch
from torch import nn

from rltf.planners.planner import Planner


class ReferencePolicy:
    """The frozen policy pi_ref RLTF starts from, for a KL penalty; create it BEFORE the first update.

    With a PEFT (LoRA) planner it costs no memory: ``with ref() as m:`` yields the same model
    inside ``model.disable_adapter()``, i.e. the base weights. That is the policy RLTF starts
    from only while the adapter is fresh (LoRA's B matrix starts at zero) and every earlier
    adapter is merged into the base: :func:`~rltf.planners.loading.load_planner` merges an adapter
    given as ``planner.model``, and :func:`~rltf.planners.loading.rltf_start_planner` merges the
    adapter SFT trained in the same run. (A planner whose adapter was already trained would get
    the wrong reference here.) With a full model it holds a frozen deep copy taken at
    construction. Either way the forward runs under ``torch.no_grad()`` in eval mode (no
    dropout); the train/eval mode is restored afterwards. Call it with the unwrapped model's
    planner (accelerate's ``unwrap_model``), not DDP."""

    def __init__(self, planner: Planner):
        self.planner = planner
        self._copy = None if planner.is_peft else copy.deepcopy(planner.model).eval().requires_grad_(False)

    @contextlib.contextmanager
    def __call__(self) -> Iterator[nn.Module]:
        if self._copy is not None:
            with torch.no_grad():
                yield self._copy
            return
        model = self.planner.model
        was_training = model.training  # planners stay in eval mode: no tree walks then
        if was_training:
            model.eval()
        try:
            with torch.no_grad(), model.disable_adapter():
                yield model
        finally:
            if was_training:
                model.train(True)
