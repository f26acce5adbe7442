"""Per-row random streams for batched sampling: a row's draws do not depend on the rest of the batch.

``torch.multinomial`` over a batch with one generator makes a row's sample depend on which other
rows share the batch (and when they join or leave it). Sampling many independent requests in one
batch (the flow passes of a training step, each with its own seeded generator) needs the
opposite: :class:`RowDraws` gives every row its own stream of uniforms, a numpy generator seeded
with the row's key (:func:`numpy.random.default_rng` of e.g. ``(request seed, row number within
the request)``), read in fixed chunks, so the k-th draw of a row is the same whatever else is
decoded with it. :func:`categorical` turns one uniform per row into a draw from the row's
categorical distribution (inverse CDF in float64): the same distribution as ``torch.multinomial``.
A finished row may still draw (its sink state has one slot): its stream is private, so nothing
else changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from constrained_decoding.uploads import upload

__all__ = ["RowDraws", "categorical", "multinomial_one"]

CHUNK = 32
"""Uniforms read from a row's generator at a time (fixed: the k-th draw of a row never depends on batching)."""


class RowDraws:
    """One uniform stream per row, keyed by a sequence of non-negative integers (the row's seed
    material); rows are numbered in the order their keys are given (:meth:`add`)."""

    def __init__(self, keys: Sequence[Sequence[int]] = ()):
        self.keys: list[tuple[int, ...]] = []
        self._rngs: list[np.random.Generator | None] = []
        self._buf: list[np.ndarray] = []
        self._pos: list[int] = []
        for k in keys:
            self.add(k)

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: Sequence[int]) -> int:
        """Register the next row's key; returns its row number."""
        key = tuple(int(x) for x in key)
        if not key or any(x < 0 for x in key):
            raise ValueError(f"a row's key must be a non-empty sequence of integers >= 0, got {key!r}")
        self.keys.append(key)
        self._rngs.append(None)
        self._buf.append(np.empty(0))
        self._pos.append(0)
        return len(self.keys) - 1

    def next(self, row: int) -> float:
        """The row's next uniform in [0, 1)."""
        if self._pos[row] == len(self._buf[row]):
            if self._rngs[row] is None:
                self._rngs[row] = np.random.default_rng(self.keys[row])
            self._buf[row] = self._rngs[row].random(CHUNK)
            self._pos[row] = 0
        u = self._buf[row][self._pos[row]]
        self._pos[row] += 1
        return float(u)

    def uniforms(self, rows: Sequence[int], device: torch.device | str | None = None) -> torch.Tensor:
        """``[len(rows)]`` float64 tensor: the next uniform of each row (in the given order), on ``device``
        (sent as :func:`~constrained_decoding.uploads.upload` sends host data: queued on CUDA)."""
        return upload([self.next(r) for r in rows], device, torch.float64)


def categorical(logp: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``[rows, 1]`` indices drawn from each row's distribution ``exp(logp)`` (``-inf``: excluded)
    with the uniforms ``u`` (``[rows]``, in [0, 1)): the first index whose cumulative probability
    exceeds ``u`` times the row's total. Never an excluded index (a row needs one finite entry)."""
    p = logp.double().exp()
    cum = p.cumsum(-1)
    target = u.to(device=cum.device, dtype=cum.dtype) * cum[:, -1]
    slot = (cum <= target.unsqueeze(-1)).sum(-1)
    width = p.shape[-1]
    last = (width - 1) - (p > 0).flip(-1).to(torch.int8).argmax(-1)  # rounding can put u past the last mass
    return torch.minimum(slot, last).unsqueeze(-1)


def multinomial_one(p: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """``torch.multinomial(p, 1, generator=generator)`` for ``[rows, D]`` probabilities, the same draws
    bit for bit, without its check of ``p`` that reads the device on the host (a sync per call on
    a GPU): what ``torch.multinomial`` computes for one sample per row (one exponential per entry
    from ``generator``, the argmax of ``p / e``), the check left out. ``p``: finite, >= 0, each row
    with some mass (the constrained log-probabilities' ``exp``, which holds that)."""
    e = torch.empty_like(p).exponential_(1, generator=generator)
    return (p / e).argmax(-1, keepdim=True)
