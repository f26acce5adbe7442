"""Optimiser and LR schedule of the SFT and RLTF loops (gradient averaging and clipping:
:meth:`rltf.run.distributed.Sharding.clip_and_step`)."""

from __future__ import annotations

import torch
from torch import nn
from transformers import get_scheduler


def make_optimizer(model: nn.Module, lr: float, total_steps: int, warmup_steps: int = 0,
                   schedule: str = "constant"):
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the planner has no trainable parameters (a frozen base without a LoRA adapter?)")
    # On the CPU torch's default is the per-tensor loop; its multi-tensor path computes the same
    # numbers bit for bit in about half the time (benchmarks/optimizer_step.py). GPUs keep torch's
    # default (multi-tensor there already).
    foreach = True if all(p.device.type == "cpu" for p in params) else None
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, foreach=foreach)
    name = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}[schedule]
    sched = get_scheduler(name, opt, num_warmup_steps=warmup_steps, num_training_steps=max(1, total_steps))
    return opt, sched
