"""Optimiser, LR schedule and the explicit gradient all-reduce used by the SFT and RLTF loops.

The planners are driven through their sub-modules (encoder, decoder, output rows) by the
constrained decoder and scorer, not through one ``forward`` call, so DDP's forward hooks would
not see them. Gradients are therefore averaged across processes explicitly after ``backward``:
the same maths as DDP, visible in the update rule.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import get_scheduler


def make_optimizer(model: nn.Module, lr: float, total_steps: int, warmup_steps: int = 0,
                   schedule: str = "constant"):
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the planner has no trainable parameters (a frozen base without a LoRA adapter?)")
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    name = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}[schedule]
    sched = get_scheduler(name, opt, num_warmup_steps=warmup_steps, num_training_steps=max(1, total_steps))
    return opt, sched


def all_reduce_grads(accelerator, model: nn.Module) -> None:
    """Average gradients over processes (a no-op in a single process)."""
    if accelerator.num_processes == 1:
        return
    for p in model.parameters():
        if p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            p.grad = accelerator.reduce(p.grad, reduction="mean")


def clip_and_step(accelerator, model: nn.Module, optimizer, scheduler, max_grad_norm: float) -> float:
    """All-reduce, clip, step; returns the gradient norm before clipping."""
    all_reduce_grads(accelerator, model)
    params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm if max_grad_norm > 0 else float("inf"))
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return float(norm)
