"""Dropout that issues no op when it is a no-op: eval mode (planners stay in it) or ``p == 0``.

A LoRA layer computes ``base(x) + B(A(dropout(x))) * scale`` and PEFT makes its ``lora_dropout`` an
``nn.Dropout`` whenever ``planner.lora.dropout > 0`` (0.05 by default). Planners are kept in eval
mode, so every such dropout returns its input unchanged, yet ``nn.Dropout`` still calls
``F.dropout``: one dispatched aten op per adapter per forward (~210 per SmolLM2 forward, each a
kernel launch's worth of host time on a GPU), in sampling, scoring and the KL reference alike.

:func:`skip_idle_dropout` turns each plain ``nn.Dropout`` of a planner into :class:`IdleDropout`
in place (the module stays, its class changes): in eval mode or at ``p == 0`` it returns its input
(what ``F.dropout`` returns then, the same tensor: values and gradients unchanged bit for bit, no
random numbers drawn), and in training mode with ``p > 0`` it calls ``F.dropout`` exactly as
``nn.Dropout`` does (the same random stream). So the policy π_c and training are unchanged
exactly; only the op is gone. (Merging the adapters into the base for no-grad passes would remove
the LoRA matmuls too, but changes the logits by rounding -- the sampler's log-probabilities would
no longer equal the scorer's bit for bit -- and unmerging does not restore the base weights exactly.)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class IdleDropout(nn.Dropout):
    """``nn.Dropout`` without the op when it changes nothing (eval mode or ``p == 0``)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return input
        return F.dropout(input, self.p, True, self.inplace)


def skip_idle_dropout(model: nn.Module) -> int:
    """Make every plain ``nn.Dropout`` of ``model`` (LoRA's ``lora_dropout`` and the model's own) an
    :class:`IdleDropout`, in place; returns how many were changed. Idempotent."""
    n = 0
    for m in model.modules():
        if type(m) is nn.Dropout:
            m.__class__ = IdleDropout
            n += 1
    return n
