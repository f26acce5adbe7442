"""What travels with a step's scores to the host: named tensors packed into one read, unpacked by name.

A read of the device on the host waits for the device's queue (a *sync* on an accelerator), so a
search reads everything a step decides on at once. :class:`HostRead` is the one place that packs
(every part as float64, flattened, concatenated: one ``tolist``) and the one that unpacks (each
part back in its shape, by its name). float64 holds every value packed exactly: float32 and
float64 scores, and integers below 2**53 (row ids, token ids, lengths, counts). A part may be a
block of named columns (:meth:`HostRead.columns`): per row, a dict of the blocks' values.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["HostRead"]


class HostRead:
    """Named tensors read from the device in one transfer (see the module docstring)."""

    def __init__(self):
        self._parts: list[tuple[str, tuple[int, ...], torch.Tensor, list[tuple[str, int]] | None]] = []

    def add(self, name: str, tensor: torch.Tensor) -> HostRead:
        """Read ``tensor`` (0-, 1- or 2-dim) as ``name``: a number, a list, or a list of rows."""
        self._parts.append((name, tuple(tensor.shape), tensor, None))
        return self

    def columns(self, name: str, **blocks: torch.Tensor) -> HostRead:
        """Read ``[rows, k]`` (or ``[rows]``: one column) tensors side by side as ``name``: per row a dict
        of each block's values (a list)."""
        parts = [t if t.dim() == 2 else t.unsqueeze(1) for t in blocks.values()]
        grid = torch.cat(parts, 1)
        layout = [(k, t.shape[1]) for k, t in zip(blocks, parts)]
        self._parts.append((name, tuple(grid.shape), grid, layout))
        return self

    def read(self) -> dict[str, Any]:
        """Every part, by name, as the host's numbers (floats; callers cast ids and counts)."""
        flat = torch.cat([_flat(t) for _, _, t, _ in self._parts]).tolist()
        out: dict[str, Any] = {}
        at = 0
        for name, shape, _, layout in self._parts:
            n = math.prod(shape)
            values, at = flat[at : at + n], at + n
            if not shape:
                out[name] = values[0]
            elif len(shape) == 1:
                out[name] = values
            else:
                rows = [values[i * shape[1] : (i + 1) * shape[1]] for i in range(shape[0])]
                out[name] = rows if layout is None else [_blocks(r, layout) for r in rows]
        return out


def _flat(t: torch.Tensor) -> torch.Tensor:
    t = t.double()
    return t.reshape(-1) if t.dim() > 1 else t.view(1) if t.dim() == 0 else t


def _blocks(row: list[float], layout: list[tuple[str, int]]) -> dict[str, list[float]]:
    out, at = {}, 0
    for name, width in layout:
        out[name], at = row[at : at + width], at + width
    return out
