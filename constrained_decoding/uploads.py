"""Host data onto the decoding device without waiting for the device.

A tensor built from Python data on a CUDA device is a copy from pageable host memory, and PyTorch
makes such a copy wait until the device has finished every kernel already queued: the same stall as
reading a value back (``benchmarks/decode_syncs.py`` counts them as *uploads*). :func:`upload` copies
through pinned memory instead, without blocking: the copy is queued behind those kernels, on the same
stream as the ops that read it, and PyTorch's caching host allocator keeps the pinned buffer until the
copy has run. On every other device it is ``torch.as_tensor``.

The decoders use it for what they send at decoding steps and when rows or beam groups change (slot
maps and moves, beam groups' grid, rows kept).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["upload"]


def upload(data: Sequence, device: torch.device | str, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """``data`` as a ``dtype`` tensor on ``device``; on CUDA a non-blocking copy from pinned memory."""
    if torch.device(device).type == "cuda":
        return torch.tensor(data, dtype=dtype, pin_memory=True).to(device, non_blocking=True)
    return torch.as_tensor(data, dtype=dtype, device=device)
