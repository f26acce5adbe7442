"""Stochastic beam search's perturbed keys (Kool, van Hoof & Welling, ICML 2019): Gumbel noise
conditioned top-down over the decoding tree (:func:`perturbed_keys`), used by
:class:`constrained_decoding.beam.BeamSearch` with a ``gumbel`` generator."""

from __future__ import annotations

import torch

__all__ = ["NEG_INF", "log1mexp", "perturbed_keys"]

NEG_INF = float("-inf")


def log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 − exp(x)) for x <= 0, accurate at both ends (−inf at x = 0)."""
    return torch.where(x > -0.6931471805599453, torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


def perturbed_keys(phi: torch.Tensor, parent: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Stochastic beam search's keys of the children of every row (``[rows, D]``, float64): Gumbel
    noise of location ``phi`` (the children's log-probabilities, -inf where a slot is not allowed),
    conditioned on their maximum being ``parent`` (``[rows]``, the row's own key):
    G = −log(exp(−T) − exp(−Z) + exp(−G̃)), G̃ = φ + Gumbel(0), Z = max G̃, T the parent's key
    (computed as T − softplus(T − G̃ + log(1 − exp(G̃ − Z)))). The child with the largest G̃ gets T."""
    phi = phi.double()
    u = torch.rand(phi.shape, generator=generator, device=phi.device, dtype=torch.float64)
    g = phi - torch.log(-torch.log(u.clamp_min(torch.finfo(torch.float64).tiny)))
    allowed = phi > NEG_INF
    g = g.masked_fill(~allowed, NEG_INF)
    z = g.max(1, keepdim=True).values
    t = parent.double().unsqueeze(1)
    v = t - g + log1mexp((g - z).clamp_max(0.0))
    keys = t - torch.nn.functional.softplus(v)
    return keys.masked_fill(~allowed | (t == NEG_INF), NEG_INF)
