"""The running rows' decoder state: KV cache, attention mask, positions and prompts.

:class:`RowBatch` is what :class:`constrained_decoding.runner.PlannerRunner` keeps between decoder
passes; it knows nothing of the model's forward, only how rows are kept, reordered, forked and
joined (left-padded onto one time axis). :class:`RowFork` is a copy of one row's cache that a
later row continuing its tokens starts from. A join copies every running row (re-stacking); a batch
joined more often than its :class:`~constrained_decoding.device_policy.DevicePolicy` allows (8
re-stacking joins by default) moves into preallocated slots instead
(:class:`constrained_decoding.slot_rows.SlotBatch`, same interface).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from constrained_decoding.prompt_attention import PromptKV, RowsLayout


def stack_left_padded(a: torch.Tensor, b: torch.Tensor, length: int, dim: int) -> torch.Tensor:
    """The rows of ``a`` then of ``b`` (dim 0), each left-padded with zeros to ``length`` along ``dim``.

    One write per element: joining rows copies the whole running cache, so no intermediate copies."""
    shape = list(a.shape)
    shape[0], shape[dim] = a.shape[0] + b.shape[0], length
    out = a.new_empty(shape)
    for x, part in ((a, out[: a.shape[0]]), (b, out[a.shape[0] :])):
        short = length - x.shape[dim]
        part.narrow(dim, 0, short).zero_()
        part.narrow(dim, short, x.shape[dim]).copy_(x)
    return out


def left_pad_rows(parts: Sequence[torch.Tensor], length: int, dim: int) -> torch.Tensor:
    """Stack ``parts`` (one row each, no batch dim) into ``[n, ...]``, each right-aligned to ``length`` along
    ``dim``."""
    shape = list(parts[0].shape)
    shape[dim] = length
    out = parts[0].new_zeros([len(parts), *shape])
    for i, x in enumerate(parts):
        out[i].narrow(dim, length - x.shape[dim], x.shape[dim]).copy_(x)
    return out


@dataclass
class RowFork:
    """A running row's decoder cache up to its first ``n_valid`` positions (context and tokens read).

    Taken when a row finishes (it may leave the batch before rows that continue its tokens join):
    such a row starts from a copy of this instead of prefilling what the finished row already read."""

    keys: list[torch.Tensor]  # per self-attention layer: [heads, columns, dim] (masked columns included)
    values: list[torch.Tensor]
    mask: torch.Tensor  # [columns]: which columns hold positions
    n_valid: int

    def cut(self, n_valid: int) -> int:
        """Columns holding the first ``n_valid`` positions."""
        return int((self.mask.cumsum(0) < n_valid).sum()) + 1


@dataclass
class RowBatch:
    """The decoder state of the running rows, one entry per row along dim 0 of every field.

    ``cache``: the KV cache (``EncoderDecoderCache`` for encoder-decoder models); ``mask``: the
    decoder attention mask ``[rows, columns]``, None while no row is padded (HF then builds none:
    cheaper steps); ``pos``: causal models, the position ids of the tokens last read ``[rows, n]``;
    ``prompts``: encoder-decoder models, each row's prompt, whose cross-attention keys and values
    (``cache.cross_attention_cache``, one row per prompt, shared by every batch of a runner) it reads
    (:mod:`constrained_decoding.prompt_attention`)."""

    cache: DynamicCache | EncoderDecoderCache
    mask: torch.Tensor | None = None
    pos: torch.Tensor | None = None
    prompts: list[int] | None = None
    joins: int = 0  # how many times rows joined this batch (PlannerRunner.add_rows)
    _layout: RowsLayout | None = field(default=None, repr=False)

    @property
    def rows(self) -> int:
        return int(self.pos.shape[0]) if self.pos is not None else len(self.prompts)  # type: ignore[arg-type]

    @property
    def encoder_decoder(self) -> bool:
        return isinstance(self.cache, EncoderDecoderCache)

    def layout(self, kv: PromptKV) -> RowsLayout:
        """How a forward's rows read their prompts' cross-attention (made when the rows change)."""
        if self._layout is None or self._layout.kv is not kv:
            self._layout = RowsLayout(kv, self.prompts)  # type: ignore[arg-type]
        return self._layout

    @property
    def self_attention(self) -> DynamicCache:
        return self.cache.self_attention_cache if self.encoder_decoder else self.cache  # type: ignore[return-value]

    def inputs(self, ids: torch.Tensor) -> torch.Tensor:
        """The rows' token ids as the forward reads them (here: as they are; see :meth:`SlotBatch.inputs`)."""
        return ids

    def outputs(self, feats: torch.Tensor) -> torch.Tensor:
        """The forward's features in row order (here: as they are)."""
        return feats

    def commit(self, q: int) -> None:
        """The forward wrote ``q`` columns (the cache grew them itself)."""

    def advance(self) -> None:
        """Make room for one more token per row (the mask grows; causal positions move on)."""
        if self.mask is not None:
            self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        if self.pos is not None:
            self.pos = self.pos[:, -1:] + 1

    def select(self, rows: torch.Tensor, same_prompt: bool = False, host_rows: Sequence[int] | None = None,
               prompts_of: Sequence[int] | None = None) -> None:
        """Keep (and reorder or repeat) rows. ``same_prompt``: every row is replaced by a row of the
        same prompt, so an encoder-decoder's rows keep their prompts. ``host_rows``: ``rows`` on the
        host, if known, or ``prompts_of``: per kept row a row of the same prompt (else an
        encoder-decoder's ``rows`` are read from the device, once)."""
        self.self_attention.reorder_cache(rows)
        if self.mask is not None:
            self.mask = self.mask.index_select(0, rows)
        if self.pos is not None:
            self.pos = self.pos.index_select(0, rows)
        if self.encoder_decoder and not same_prompt:
            known = host_rows if host_rows is not None else prompts_of if prompts_of is not None else rows.tolist()
            self.prompts, self._layout = [self.prompts[r] for r in known], None  # type: ignore[index]

    def prepend(self, old: RowBatch) -> None:
        """Put the rows of ``old`` before these rows (one time axis, left-padded with masked zeros)."""
        n_new, n_old = self.rows, old.rows
        if self.encoder_decoder:
            self.prompts, self._layout = old.prompts + self.prompts, None  # type: ignore[operator]
        else:
            self.pos = torch.cat([old.pos[:, -1:], self.pos[:, -1:]])  # type: ignore[index]
        old_self, new_self = old.self_attention, self.self_attention
        t_old, t_new = old_self.get_seq_length(), new_self.get_seq_length()
        t = max(t_old, t_new)
        for lo, ln in zip(old_self.layers, new_self.layers):
            ln.keys = stack_left_padded(lo.keys, ln.keys, t, -2)
            ln.values = stack_left_padded(lo.values, ln.values, t, -2)
        if old.mask is None and self.mask is None and t_old == t_new:
            return  # no padding anywhere: steps stay maskless
        device = ln.keys.device

        def full(mask: torch.Tensor | None, rows: int, length: int) -> torch.Tensor:
            return torch.ones((rows, length), dtype=torch.long, device=device) if mask is None else mask

        self.mask = stack_left_padded(full(old.mask, n_old, t_old), full(self.mask, n_new, t_new), t, -1)

    def fork(self, row: int, n_valid: int) -> RowFork:
        """Row ``row``'s cache up to its first ``n_valid`` positions (a copy: see :class:`RowFork`)."""
        layers = self.self_attention.layers
        if self.mask is None:
            mask = torch.ones(n_valid, dtype=torch.long, device=layers[0].keys.device)
        else:
            mask = self.mask[row]
            mask = mask[: int((mask.cumsum(0) < n_valid).sum()) + 1].clone()
        c = mask.shape[0]
        f = RowFork([x.keys[row, :, :c].clone() for x in layers], [x.values[row, :, :c].clone() for x in layers],
                    mask, n_valid)
        return f

    @classmethod
    def from_forks(cls, forks: Sequence[RowFork], n_valid: Sequence[int], n_new: int,
                   cross: DynamicCache | None = None, prompts: list[int] | None = None) -> RowBatch:
        """Rows opened from forks (their first ``n_valid[r]`` positions), with room for ``n_new``
        tokens per row in the mask (``pos``: the positions of those tokens, causal models).
        ``cross`` and ``prompts``: an encoder-decoder's cross-attention cache of its prompts and the rows' prompts."""
        cuts = [f.cut(n) for f, n in zip(forks, n_valid)]
        width = max(cuts)
        cache = DynamicCache()
        for layer in range(len(forks[0].keys)):
            cache.update(left_pad_rows([f.keys[layer][:, :c] for f, c in zip(forks, cuts)], width, 1),
                         left_pad_rows([f.values[layer][:, :c] for f, c in zip(forks, cuts)], width, 1), layer)
        mask = left_pad_rows([f.mask[:c] for f, c in zip(forks, cuts)], width, 0)
        mask = torch.cat([mask, mask.new_ones((len(forks), n_new))], 1)
        if cross is not None:
            return cls(EncoderDecoderCache(cache, cross), None if bool(mask.all()) else mask,
                       prompts=prompts)
        pos = torch.as_tensor(n_valid, device=mask.device).unsqueeze(1) + torch.arange(n_new, device=mask.device)
        return cls(cache, mask, pos=pos)


@dataclass
class SharedPrefix:
    """The cache of the distinct prompts of a causal runner's batch (all but their last token):
    per layer ``[prompts, heads, columns, dim]`` keys and values, the ``[prompts, columns]`` mask,
    and which of its rows holds each canonical prompt (``row_of``)."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    mask: torch.Tensor
    row_of: dict[int, int]
