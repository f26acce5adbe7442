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
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, **adamw_path({p.device.type for p in params}))
    name = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}[schedule]
    sched = get_scheduler(name, opt, num_warmup_steps=warmup_steps, num_training_steps=max(1, total_steps))
    return opt, sched


def adamw_path(device_types: set[str]) -> dict[str, bool]:
    """Which of torch's AdamW implementations the loops use, by the devices the trained weights are on.

    * CUDA: the fused kernel (``fused=True``), as transformers' Trainer — and so TRL's GRPO trainer —
      does by default since torch 2.8 (``adamw_torch_fused``): one kernel for every tensor, where the
      multi-tensor path launches several per group; the same update up to float rounding.
    * CPU: the multi-tensor path (``foreach=True``). It gives torch's per-tensor CPU default bit for
      bit in about half the time; the fused CPU kernel is ~3x faster still on LoRA's many small tensors
      but rounds differently (~1e-7 per step), which would move every published CPU figure
      (``benchmarks/optimizer_step.py`` measures all three).
    * anything else (mixed devices, MPS, XLA): torch's own default.
    """
    if device_types == {"cuda"}:
        return {"fused": True}
    if device_types == {"cpu"}:
        return {"foreach": True}
    return {}
