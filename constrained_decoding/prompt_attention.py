"""An encoder-decoder planner's rows read their prompt's cross-attention keys and values where they lie.

Every row of a prompt attends over the same encoder keys and values (:mod:`constrained_decoding.cross_attention`
computes them once per prompt). A row therefore holds only its prompt's index, not a copy of them: rows
that join, leave, fork or move between slots move an integer instead of ``layers x 2 x heads x
positions x dim`` floats (two thirds of what a travel row's move copied, 7-day itineraries of the
embedded planner), and the rows' memory does not grow with the prompt's length. The decoder's
cross-attention layers then read the per-prompt tensors through :func:`prompt_rows_attention`, an
attention function of the ``transformers`` attention interface that the runner selects for its
decoder's forward (:func:`reading_prompts`), with the rows' layout as a keyword argument
(:class:`RowsLayout`). Self-attention goes to the model's own implementation unchanged.

The function is registered once, under its own name (:data:`ATTENTION`), in ``transformers``'
``AttentionInterface`` and ``AttentionMaskInterface`` (on first use: importing this module registers
nothing), and selected only for the forwards that read prompts: :func:`reading_prompts` sets the
decoder's attention implementation to it and restores the model's own after. A ``transformers``
without those interfaces raises a one-line error naming its version (:func:`register_attention`).

Two ways to lay the rows over the prompts, chosen per layout by the cells each computes:

* *grouped*: the queries of a prompt's rows are one query sequence of that prompt (padded to the
  largest group): one attention call over ``[prompts, heads, n x q, dim]`` against the prompts'
  own tensors, nothing copied but the queries. Cells: prompts spanned x largest group.
* *gathered*: each row's keys and values gathered for the step (what rows held before, but made per
  forward and dropped after it). Cells: twice the rows (a copy and the product).

The outputs are those of per-row attention up to the float reduction order of a differently shaped
product (tests/constrained_decoding/test_prompt_attention.py).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import transformers
from torch import nn

from constrained_decoding.uploads import upload

try:  # transformers' pluggable attention (4.48+) and mask (4.53+) interfaces
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
except ImportError:  # (named when first needed: register_attention)
    AttentionInterface = AttentionMaskInterface = ALL_ATTENTION_FUNCTIONS = ALL_MASK_ATTENTION_FUNCTIONS = None

__all__ = ["ATTENTION", "PromptKV", "RowsLayout", "prompt_rows_attention", "reading_prompts", "register_attention"]

ATTENTION = "rltf_prompt_rows"
"""The name :func:`prompt_rows_attention` is registered under in ``transformers``' attention interface."""


@dataclass
class PromptKV:
    """Per decoder layer the prompts' cross-attention keys and values ``[prompts, heads, positions, dim]``,
    the prompts' additive encoder mask ``[prompts, 1, 1, positions]`` and the encoder states' shape."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    bias: torch.Tensor
    width: int  # the encoder states' last dim (d_model)
    _nan: torch.Tensor | None = None

    @classmethod
    def of(cls, cross: Sequence[tuple[torch.Tensor, torch.Tensor]], enc_mask: torch.Tensor, width: int) -> PromptKV:
        dtype = cross[0][0].dtype
        bias = torch.zeros(enc_mask.shape, dtype=dtype, device=enc_mask.device)
        bias = bias.masked_fill(enc_mask == 0, torch.finfo(dtype).min)[:, None, None, :]
        return cls([k for k, _ in cross], [v for _, v in cross], bias, width)

    def states(self, rows: int) -> torch.Tensor:
        """Stand-in encoder states for ``rows`` rows (a NaN view: the model must not read them, and
        would decode NaN, caught as non-finite logits, if it projected them again)."""
        if self._nan is None:
            k = self.keys[0]
            self._nan = torch.full((1, 1, self.width), float("nan"), dtype=k.dtype, device=k.device)
        return self._nan.expand(rows, self.bias.shape[-1], self.width)


class RowsLayout:
    """Row ``r`` of a forward reads prompt ``prompts[r]``'s keys and values (see the module docstring)."""

    def __init__(self, kv: PromptKV, prompts: Sequence[int]):
        self.kv, self.rows = kv, len(prompts)
        self._ids = {id(k): i for i, k in enumerate(kv.keys)}
        lo, hi = min(prompts), max(prompts) + 1
        counts = [0] * (hi - lo)
        rank = []
        for p in prompts:
            rank.append(counts[p - lo])
            counts[p - lo] += 1
        n = max(counts)
        self.grouped = (hi - lo) * n <= 2 * len(prompts)
        dev = kv.bias.device
        if self.grouped:
            self.span, self.n = (lo, hi), n
            self.index = upload([(p - lo) * n + r for p, r in zip(prompts, rank)], dev)
            self.identity = n == 1 and hi - lo == len(prompts) and all(p == lo + i for i, p in enumerate(prompts))
        else:
            self.index = upload(list(prompts), dev)

    def cells(self) -> int:
        """Query x prompt cells one layer's attention computes (rows: the per-row reference's)."""
        return (self.span[1] - self.span[0]) * self.n if self.grouped else 2 * self.rows

    def attend(self, layer: int, query: torch.Tensor, scaling: float | None) -> torch.Tensor:
        """Layer ``layer``'s cross-attention output ``[rows, q, heads, dim]`` for ``query``
        ``[rows, heads, q, dim]``."""
        kv = self.kv
        if not self.grouped:
            k, v = kv.keys[layer].index_select(0, self.index), kv.values[layer].index_select(0, self.index)
            out = F.scaled_dot_product_attention(query, k, v, attn_mask=kv.bias.index_select(0, self.index),
                                                 scale=scaling)
            return out.transpose(1, 2).contiguous()
        (lo, hi), n = self.span, self.n
        k, v, bias = kv.keys[layer][lo:hi], kv.values[layer][lo:hi], kv.bias[lo:hi]
        if self.identity:
            out = F.scaled_dot_product_attention(query, k, v, attn_mask=bias, scale=scaling)
            return out.transpose(1, 2).contiguous()
        rows, heads, q, dim = query.shape
        p = hi - lo
        grid = query.new_zeros((p * n, heads, q, dim)).index_copy_(0, self.index, query)
        grid = grid.view(p, n, heads, q, dim).transpose(1, 2).reshape(p, heads, n * q, dim)
        out = F.scaled_dot_product_attention(grid, k, v, attn_mask=bias, scale=scaling)
        out = out.view(p, heads, n, q, dim).permute(0, 2, 3, 1, 4).reshape(p * n, q, heads, dim)
        return out.index_select(0, self.index)

    def layer_of(self, key: torch.Tensor) -> int | None:
        """Which layer's prompt keys ``key`` is (None: not a cross-attention read of these prompts)."""
        return self._ids.get(id(key))


def prompt_rows_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                          attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                          prompt_rows: RowsLayout | None = None, model_attention: str = "sdpa", **kwargs):
    """The attention interface's function: a cross-attention layer reading ``prompt_rows``' prompts goes
    through :meth:`RowsLayout.attend`; every other call to the model's own ``model_attention``."""
    layer = None if prompt_rows is None else prompt_rows.layer_of(key)
    if layer is None:
        if prompt_rows is not None and key.shape[0] != query.shape[0]:
            raise RuntimeError(f"an attention layer read keys of {key.shape[0]} rows for {query.shape[0]} query rows: "
                               "the model does not pass its cross-attention cache's keys through as they are")
        fallback = sys.modules[type(module).__module__].__dict__.get("eager_attention_forward")
        fn = ALL_ATTENTION_FUNCTIONS.get_interface(model_attention, fallback)
        if fn is None:
            raise RuntimeError(f"no attention function {model_attention!r} for {type(module).__name__}")
        return fn(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    return prompt_rows.attend(layer, query, scaling), None


_OWN: contextvars.ContextVar[str] = contextvars.ContextVar("rltf_own_attention", default="sdpa")


def _own_mask(*args, **kwargs):
    """The masks the model builds for its own attention implementation (what the calls
    :func:`prompt_rows_attention` passes on expect)."""
    return ALL_MASK_ATTENTION_FUNCTIONS[_OWN.get()](*args, **kwargs)


_REGISTERED = False


def register_attention() -> None:
    """Register :func:`prompt_rows_attention` (and the model's own masks) under :data:`ATTENTION` in
    transformers' attention and mask interfaces, once per process."""
    global _REGISTERED
    if _REGISTERED:
        return
    if AttentionInterface is None or AttentionMaskInterface is None:
        raise RuntimeError(f"transformers {transformers.__version__} has no AttentionInterface / "
                           "AttentionMaskInterface (transformers.masking_utils), which encoder-decoder decoding "
                           "registers its prompt attention in (pyproject.toml asks for transformers>=4.56)")
    AttentionInterface.register(ATTENTION, prompt_rows_attention)
    AttentionMaskInterface.register(ATTENTION, _own_mask)
    _REGISTERED = True


def decoder_configs(decoder: nn.Module) -> list:
    """The distinct configs the decoder's modules read their attention implementation from."""
    seen: dict[int, object] = {}
    for m in decoder.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None and hasattr(cfg, "_attn_implementation"):
            seen.setdefault(id(cfg), cfg)
    return list(seen.values())


_LOCK = threading.Lock()
_INSIDE: dict[int, tuple[int, str | None]] = {}  # per config inside reading_prompts: (depth, the model's own setting)


@contextlib.contextmanager
def reading_prompts(configs: Sequence) -> Iterator[str]:
    """Within: the modules reading ``configs`` call :func:`prompt_rows_attention`; yields the implementation
    they had (pass it on as ``model_attention``). Nested or concurrent uses (threads decoding with one
    model) see the model's own setting, and the last to leave restores it."""
    with _LOCK:
        register_attention()
        owns = []
        for c in configs:
            depth, own = _INSIDE.get(id(c), (0, c._attn_implementation))
            _INSIDE[id(c)] = (depth + 1, own)
            owns.append(own)
            c._attn_implementation = ATTENTION
    own = owns[0] or "sdpa"
    token = _OWN.set(own)
    try:
        yield own
    finally:
        _OWN.reset(token)
        with _LOCK:
            for c in configs:
                depth, before = _INSIDE.pop(id(c))
                if depth > 1:
                    _INSIDE[id(c)] = (depth - 1, before)
                else:
                    c._attn_implementation = before
