"""A trainer state without its zeros: the all-zero rows of large tensors stored as their absence.

AdamW keeps two moments per trainable weight, and most rows of a token-embedding matrix's moments
are exactly zero: a token whose logit no loss ever scored gets a zero gradient row, so its moments
stay 0 (the default MiniLM planner, 20 RLTF steps: 33 of 30,522 rows are not zero, and its
embedding's moments are 31 of the 35 MB a checkpoint's ``trainer_state.pt`` held).
:func:`pack_zero_rows` replaces each such tensor by its other rows and their indices, and
:func:`unpack_zero_rows` puts the zeros back, bit for bit (a row is kept when any element is not
+0.0, ``-0.0`` and NaN included), so a resumed run continues exactly as before. Plain dicts,
lists and tensors only: it still loads with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

from typing import Any

import torch

PACKED = "__rltf_zero_rows_packed__"  # marks a packed tensor: {PACKED: True, "shape", "rows", "values"}
MIN_ELEMENTS = 1 << 16  # smaller tensors are left as they are


def pack_zero_rows(obj: Any) -> Any:
    """``obj`` (nested dicts / lists / tuples of tensors and plain values) with every floating
    tensor of at least :data:`MIN_ELEMENTS` elements whose rows are mostly zero packed."""
    if isinstance(obj, torch.Tensor):
        return _pack(obj)
    if isinstance(obj, dict):
        return {k: pack_zero_rows(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(pack_zero_rows(v) for v in obj)
    return obj


def unpack_zero_rows(obj: Any) -> Any:
    """The inverse of :func:`pack_zero_rows` (anything it did not pack is returned unchanged)."""
    if isinstance(obj, dict):
        if obj.get(PACKED) is True:
            return _unpack(obj)
        return {k: unpack_zero_rows(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(unpack_zero_rows(v) for v in obj)
    return obj


def _pack(t: torch.Tensor) -> torch.Tensor | dict:
    if t.dim() < 2 or t.numel() < MIN_ELEMENTS or not t.is_floating_point() or t.is_sparse:
        return t
    kept = ((t != 0) | torch.signbit(t)).reshape(t.shape[0], -1).any(dim=1)  # -0.0 and NaN rows are kept
    rows = kept.nonzero().flatten()
    if rows.numel() * 2 > t.shape[0]:
        return t
    return {PACKED: True, "shape": list(t.shape), "rows": rows, "values": t[rows].clone()}


def _unpack(packed: dict) -> torch.Tensor:
    values, rows, shape = packed.get("values"), packed.get("rows"), packed.get("shape")
    if not (isinstance(values, torch.Tensor) and isinstance(rows, torch.Tensor) and isinstance(shape, list)):
        raise ValueError(f"a packed tensor needs 'values', 'rows' (tensors) and 'shape' (a list); got "
                         f"{sorted(k for k in packed if k != PACKED)}")
    out = torch.zeros(shape, dtype=values.dtype)
    out[rows] = values
    return out
