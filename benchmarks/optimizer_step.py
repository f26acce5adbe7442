"""Benchmark: the optimizer step of the RL loops (``rltf.rl.optim.make_optimizer``) against torch's
CPU default (the per-tensor AdamW loop), measured in the same run, on the default planner's
trainable parameters (the embedded planner of ``configs/default.yaml``, built offline).

Both optimizers start from the same weights and take the same ``--steps`` steps on the same
gradients (drawn once, seeded; the rows of the token embedding that no plan token reaches are zero,
as in training). Printed: milliseconds per step (CPU time, one thread), the ratio, and whether the
weights after the last step are bit for bit the same (they must be: the multi-tensor path computes
the same numbers). Also timed: torch's fused AdamW kernel on the same steps (what the loops use on a
GPU, and transformers' Trainer, so TRL, everywhere since torch 2.8), with its largest weight
difference from ours after the last step (rounding: the CPU loops keep the multi-tensor path).

    python benchmarks/optimizer_step.py [--steps 30]

The last line is ``optimizer step: <ms> ms (torch's CPU default <ms> ms), ratio <r>, weights bit-identical: <bool>``;
the line before it ``fused kernel: <ms> ms, ours/fused <r>, largest weight difference <d>``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rltf.config.loading import load_config  # noqa: E402
from rltf.planners.loading import load_planner  # noqa: E402
from rltf.rl.optim import make_optimizer  # noqa: E402


def gradients(params: list[torch.nn.Parameter], steps: int, seed: int = 0) -> list[list[torch.Tensor]]:
    """``steps`` gradient sets: Gaussian, except the rows of a large matrix past its first 300 (the
    token embedding's rows no plan token reaches get no gradient in training)."""
    gen = torch.Generator(device=params[0].device).manual_seed(seed)  # (the parameters' device)
    out = []
    for _ in range(steps):
        grads = []
        for p in params:
            g = torch.randn(p.shape, generator=gen, dtype=p.dtype, device=p.device)
            if p.dim() == 2 and p.shape[0] > 10_000:
                g[300:] = 0
            grads.append(g)
        out.append(grads)
    return out


def run(model: torch.nn.Module, initial: dict, grads, optimizer) -> tuple[float, list[torch.Tensor]]:
    """CPU seconds per step of ``optimizer`` over ``grads`` from weights ``initial``; the weights after."""
    model.load_state_dict(initial)
    params = [p for p in model.parameters() if p.requires_grad]
    cpu = 0.0
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.clone()
        start = time.process_time()
        optimizer.step()
        cpu += time.process_time() - start
        optimizer.zero_grad(set_to_none=True)
    return cpu / len(grads), [p.detach().clone() for p in params]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load_config([])
    model = load_planner(cfg.planner).model
    params = [p for p in model.parameters() if p.requires_grad]
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    grads = gradients(params, args.steps)
    ours, _ = make_optimizer(model, lr=3e-4, total_steps=args.steps)
    reference = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.0, foreach=False)
    ref_s, ref_w = run(model, initial, grads, reference)
    ours_s, ours_w = run(model, initial, grads, ours)
    fused_s, fused_w = run(model, initial, grads, torch.optim.AdamW(params, lr=3e-4, weight_decay=0.0, fused=True))
    same = all(torch.equal(a, b) for a, b in zip(ref_w, ours_w))
    diff = max(float((a - b).abs().max()) for a, b in zip(fused_w, ours_w))
    n = sum(p.numel() for p in params)
    print(f"{n / 1e6:.2f}M trainable parameters in {len(params)} tensors, {args.steps} steps, one thread")
    print(f"fused kernel: {fused_s * 1e3:.1f} ms, ours/fused {ours_s / fused_s:.2f}, "
          f"largest weight difference {diff:.2e}")
    print(f"optimizer step: {ours_s * 1e3:.1f} ms (torch's CPU default {ref_s * 1e3:.1f} ms), "
          f"ratio {ref_s / ours_s:.2f}, weights bit-identical: {same}")
    return {"ms": ours_s * 1e3, "reference_ms": ref_s * 1e3, "ratio": ref_s / ours_s, "bit_identical": same,
            "fused_ms": fused_s * 1e3, "fused_max_diff": diff}


if __name__ == "__main__":
    main()
