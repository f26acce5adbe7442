"""Host data onto the decoding device without waiting for the device.

A tensor built from Python data on a CUDA device is a copy from pageable host memory, and PyTorch
makes such a copy wait until the device has finished every kernel already queued: the same stall as
reading a value back (``benchmarks/decode_syncs.py`` counts them as *uploads*). :func:`upload` copies
through pinned memory instead, without blocking: the copy is queued behind those kernels, on the same
stream as the ops that read it, and PyTorch's caching host allocator keeps the pinned buffer until the
copy has run. On every other device it is ``torch.as_tensor``. Which devices queue is the device
policy's rule (:meth:`constrained_decoding.device_policy.DevicePolicy.queues_uploads`).

The decoders use it for what they send at decoding steps and when rows or beam groups change (slot
maps and moves, beam groups' grid, rows kept, the rows' uniforms of per-row streams).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from constrained_decoding.device_policy import DevicePolicy

__all__ = ["upload"]


def upload(data: Sequence, device: torch.device | str | None, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """``data`` as a ``dtype`` tensor on ``device`` (None: the CPU); on CUDA a non-blocking copy from
    pinned memory."""
    if DevicePolicy.queues_uploads(device):
        return torch.tensor(data, dtype=dtype, pin_memory=True).to(device, non_blocking=True)
    return torch.as_tensor(data, dtype=dtype, device=device)
