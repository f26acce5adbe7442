"""The running rows' decoder state in preallocated slots: rows join without re-stacking the cache.

:class:`constrained_decoding.kv_rows.RowBatch` keeps the rows' KV cache as one tensor per layer
whose dim 0 *is* the rows: every join of new rows (a travel itinerary's day rows, forked when its
route row finishes) and every drop of finished rows copies the whole running cache, and every
decoder step concatenates one more column onto it (``DynamicCache``). :class:`SlotBatch` is what a
batch becomes after its first joins (:meth:`SlotBatch.joined`; when, and which paths it takes, is the
runner's :class:`~constrained_decoding.device_policy.DevicePolicy`'s): per layer a buffer
``[slot capacity, heads, column capacity, dim]`` with a row -> slot map.

* An encoder-decoder's slot holds its row's prompt index, not the prompt's cross-attention keys and
  values (:mod:`constrained_decoding.prompt_attention`): moving a slot moves the self-attention columns.
* A step writes its column in place (:class:`SlotLayer`); the model reads a view of the slots in
  use over the columns in use (the *window*).
* Dropping rows only changes the map; the slots they held are free. Joining rows are prefilled in a
  cache of their own (as before) and copied into free slots, right-aligned to the window's last
  column; the running rows are not moved. A slot repeated by a selection (beam search) is copied
  into a free slot; on an accelerator a beam search selection is gathered on the device instead
  (every row's columns copied, the map kept, nothing read back: :meth:`SlotBatch._gather_rows`;
  :meth:`DevicePolicy.gathers_on_device <constrained_decoding.device_policy.DevicePolicy.gathers_on_device>`).
  Before a forward, rows in the last slots move into free slots left below them
  (:meth:`SlotBatch.advance`), so the forward reads as many slots as rows.
* The window starts at the first column a running row holds (columns every row has left are not
  read again) and grows to the left when a joining row's context is longer; the buffers grow by
  doubling (amortised: a copy per doubling, not per step or join).

Positions stay right as in :class:`RowBatch`: a row's columns are contiguous and end at the
window's last column (T5's relative positions count columns), left padding is masked, and causal
position ids continue per row. A free slot keeps finite values and a valid current column (no
NaN from a fully masked row). The forward runs over slots: :meth:`SlotBatch.inputs` scatters the
rows' token ids to their slots and :meth:`SlotBatch.outputs` gathers the rows' features back.
The same rows compute the same features up to the float reduction order of a differently shaped
batch (tests/constrained_decoding/test_slot_rows.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, EncoderDecoderCache

from constrained_decoding.device_policy import DEFAULT_POLICY, DevicePolicy
from constrained_decoding.kv_rows import RowBatch, RowFork
from constrained_decoding.prompt_attention import PromptKV, RowsLayout
from constrained_decoding.uploads import upload

__all__ = ["SlotBatch", "SlotLayer", "join_rows"]


class Window:
    """The slots (``[:n]``) and columns (``[lo, hi)``, plus ``pending`` being written) in use."""

    def __init__(self, n: int, lo: int, hi: int):
        self.n, self.lo, self.hi, self.pending = n, lo, hi, 0


class SlotLayer(DynamicLayer):
    """One self-attention layer's cache in slot buffers: ``update`` writes the new columns in place
    and returns the window's view (no concatenation)."""

    def __init__(self, window: Window, keys: torch.Tensor, values: torch.Tensor):
        super().__init__()
        self.window, self.kbuf, self.vbuf = window, keys, values
        self.device, self.is_initialized = keys.device, True
        self.refresh()

    def refresh(self) -> None:
        w = self.window
        self.keys = self.kbuf[: w.n, :, w.lo : w.hi]
        self.values = self.vbuf[: w.n, :, w.lo : w.hi]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        w, q = self.window, key_states.shape[-2]
        self.kbuf[: w.n, :, w.hi : w.hi + q].copy_(key_states)
        self.vbuf[: w.n, :, w.hi : w.hi + q].copy_(value_states)
        return self.kbuf[: w.n, :, w.lo : w.hi + q], self.vbuf[: w.n, :, w.lo : w.hi + q]

    def get_seq_length(self) -> int:
        return self.window.hi - self.window.lo

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:  # pragma: no cover - SlotBatch.select moves slots
        raise NotImplementedError("a SlotLayer's rows move through SlotBatch.select")


def _runs(dst: list[int]) -> list[tuple[int, int, int]]:
    """``dst`` as runs of consecutive slots: ``(first slot, first index into dst, length)`` (slice copies
    are much faster than ``index_copy_`` into a strided window)."""
    runs: list[list[int]] = []
    for i, d in enumerate(dst):
        if runs and runs[-1][0] + runs[-1][2] == d:
            runs[-1][2] += 1
        else:
            runs.append([d, i, 1])
    return [(d, i, c) for d, i, c in runs]


def join_rows(old: RowBatch | SlotBatch, new: RowBatch, policy: DevicePolicy) -> RowBatch | SlotBatch:
    """The rows of ``old`` (the running batch) then those of ``new`` (a fresh batch): in slots where
    ``policy`` says so (:meth:`~constrained_decoding.device_policy.DevicePolicy.into_slots`), else
    re-stacked into ``new``."""
    in_slots = isinstance(old, SlotBatch)
    if policy.into_slots(0 if in_slots else old.joins, in_slots):  # type: ignore[union-attr]
        return SlotBatch.joined(old, new, policy)
    new.prepend(old)  # type: ignore[arg-type]
    new.joins = old.joins + 1  # type: ignore[union-attr]
    return new


def _first_valid(mask: torch.Tensor) -> list[int]:
    """Per row of a ``[rows, columns]`` mask, its first column holding a position."""
    return (mask != 0).long().argmax(1).tolist()


class SlotBatch:
    """The running rows in slots (see the module docstring); the row store's interface the runner
    uses, as :class:`RowBatch` has it (``cache``, ``mask``, ``pos``, ``rows``, ``layout``,
    ``advance``, ``inputs``, ``outputs``, ``commit``, ``select``, ``fork``), plus :meth:`join`."""

    def __init__(self, batch: RowBatch, joining: RowBatch | None = None, policy: DevicePolicy = DEFAULT_POLICY):
        """The rows of ``batch`` (its slot ``r`` holds its row ``r``), with room to grow (for the rows
        of ``joining`` at least); ``policy`` picks the path of a beam search select."""
        self.policy = policy
        layers = batch.self_attention.layers
        k0 = layers[0].keys
        rows, width = k0.shape[0], k0.shape[2]
        more, t_new = (0, 0) if joining is None else (joining.rows, joining.self_attention.layers[0].keys.shape[2])
        self.encoder_decoder = batch.encoder_decoder
        self.device = k0.device
        cap_s, left = max(2 * (rows + more), 8), max(width // 2, 8, t_new - width)
        cap_t = left + width + max(width, 16)
        self.window = Window(rows, left, left + width)
        self._alloc_like(batch, cap_s, cap_t)
        sl = slice(left, left + width)
        for lay, src in zip(self.layers, layers):
            lay.kbuf[:rows, :, sl].copy_(src.keys)
            lay.vbuf[:rows, :, sl].copy_(src.values)
        self.start = [left] * cap_s  # per slot: the first column its row holds
        if batch.mask is None:
            self.mbuf[:rows, sl] = 1
        else:
            self.mbuf[:rows, sl].copy_(batch.mask)
            self.start[:rows] = [left + c for c in _first_valid(batch.mask)]
        self._copy_rest(batch, [(0, 0, rows)])
        self.slots = list(range(rows))  # row -> slot
        self._slot_t: torch.Tensor | None = None  # the same on the device; None: the identity
        self._views()

    @classmethod
    def joined(cls, batch: RowBatch | SlotBatch, new: RowBatch, policy: DevicePolicy = DEFAULT_POLICY) -> SlotBatch:
        """The rows of ``batch`` then those of ``new`` (a fresh batch), in slots."""
        return (batch if isinstance(batch, SlotBatch) else cls(batch, new, policy)).join(new)

    # ------------------------------------------------------------------------------ storage

    def _alloc_like(self, batch: RowBatch, cap_s: int, cap_t: int) -> None:
        """Buffers shaped for ``batch``'s model, not filled: a slot's columns are written (or zeroed)
        before the model reads them, so every value it reads is finite."""
        k = batch.self_attention.layers[0].keys
        self.layers = [SlotLayer(self.window, k.new_empty(cap_s, k.shape[1], cap_t, k.shape[3]),
                                 k.new_empty(cap_s, k.shape[1], cap_t, x.values.shape[3]))
                       for x in batch.self_attention.layers]
        self.mbuf = torch.zeros((cap_s, cap_t), dtype=torch.long, device=self.device)
        self.pbuf = None
        self.cross = batch.cache.cross_attention_cache if self.encoder_decoder else None  # the prompts' (shared)
        self.prompt = [0] * cap_s  # encoder-decoder: per slot, its row's prompt (a free slot: a valid one)
        self._layout: RowsLayout | None = None
        if not self.encoder_decoder:
            self.pbuf = batch.pos.new_zeros((cap_s, 1))  # type: ignore[union-attr]

    def _copy_rest(self, batch: RowBatch, runs: list[tuple[int, int, int]]) -> None:
        """The prompts (encoder-decoder) or last positions (causal) of ``batch``'s rows into slots
        (``runs``: see :func:`_runs`)."""
        if self.encoder_decoder:
            for d, i, c in runs:
                self.prompt[d : d + c] = batch.prompts[i : i + c]  # type: ignore[index]
            return
        for d, i, c in runs:
            self.pbuf[d : d + c].copy_(batch.pos[i : i + c, -1:])  # type: ignore[index]

    def _buffers(self) -> list[torch.Tensor]:
        """Every per-slot buffer whose dim 1 is not columns (moved whole)."""
        return [] if self.pbuf is None else [self.pbuf]

    def layout(self, kv: PromptKV) -> RowsLayout:
        """How a forward over the slots in use reads their prompts' cross-attention (made when they change)."""
        if self._layout is None or self._layout.kv is not kv:
            self._layout = RowsLayout(kv, self.prompt[: self.window.n])
        return self._layout

    def _column_buffers(self) -> list[torch.Tensor]:
        return [b for lay in self.layers for b in (lay.kbuf, lay.vbuf)]

    def _realloc(self, cap_s: int, left: int, cap_t: int) -> None:
        """New buffers of ``cap_s`` slots and ``cap_t`` columns, the window moved to start at ``left``."""
        w = self.window
        n, width = w.n, w.hi - w.lo
        for lay in self.layers:
            for name in ("kbuf", "vbuf"):
                old = getattr(lay, name)
                new = old.new_empty((cap_s, old.shape[1], cap_t, old.shape[3]))
                new[:n, :, left : left + width].copy_(old[:n, :, w.lo : w.hi])
                setattr(lay, name, new)
        mask = self.mbuf.new_zeros((cap_s, cap_t))
        mask[:n, left : left + width].copy_(self.mbuf[:n, w.lo : w.hi])
        self.mbuf = mask
        self.start = [s - w.lo + left for s in self.start] + [left] * (cap_s - len(self.start))
        self.prompt += [0] * (cap_s - len(self.prompt))
        if self.pbuf is not None:
            grown = self.pbuf.new_empty((cap_s, *self.pbuf.shape[1:]))
            grown[:n].copy_(self.pbuf[:n])
            self.pbuf = grown
        w.lo, w.hi = left, left + width
        self._views()

    def _room(self, slots: int = 0, left: int = 0, right: int = 0) -> None:
        """At least ``slots`` slots, ``left`` free columns before the window and ``right`` after it."""
        w = self.window
        cap_s, cap_t = self.mbuf.shape
        if slots <= cap_s and w.lo >= left and w.hi + right <= cap_t:
            return
        width = w.hi - w.lo
        new_s = cap_s if slots <= cap_s else max(2 * cap_s, slots)
        new_left = max(left, width // 2, 8)
        new_t = max(cap_t, new_left + width + max(right, width, 16))
        self._realloc(new_s, new_left, new_t)

    def _views(self) -> None:
        """The cache the model reads: views of the slots and columns in use."""
        w = self.window
        for lay in self.layers:
            lay.refresh()
        self_cache = DynamicCache()
        self_cache.layers = list(self.layers)
        self._layout = None
        if self.encoder_decoder:
            self.cache: DynamicCache | EncoderDecoderCache = EncoderDecoderCache(self_cache, self.cross)
            self.pos = None
        else:
            self.cache = self_cache
            self.pos = self.pbuf[: w.n]  # type: ignore[index]

    def _moved(self, src: list[int], dst: list[int], prompt: bool = True) -> None:
        """Copy slots ``src`` to slots ``dst`` (disjoint): the window's columns and what else they hold;
        not ``prompt``: ``dst`` holds the same prompt already."""
        if not src:
            return
        s, d = upload(src, self.device), upload(dst, self.device)
        w = self.window
        for buf in self._column_buffers():
            window = buf[:, :, w.lo : w.hi]
            window.index_copy_(0, d, window.index_select(0, s))
        for buf in [self.mbuf[:, w.lo : w.hi], *self._buffers()]:
            buf.index_copy_(0, d, buf.index_select(0, s))
        for a, b in zip(src, dst):
            self.start[b] = self.start[a]
            if prompt:
                self.prompt[b] = self.prompt[a]

    def _remap(self) -> None:
        """After the map changed: the device map (None if the identity), the window's first column."""
        w = self.window
        live = self.slots
        if live:
            w.lo = max(w.lo, min(self.start[s] for s in live))  # columns every running row has left
        ident = len(live) == w.n and all(s == i for i, s in enumerate(live))
        self._slot_t = None if ident else upload(live, self.device)
        self._views()

    # ------------------------------------------------------------------------------ RowBatch's interface

    @property
    def rows(self) -> int:
        return len(self.slots)

    @property
    def mask(self) -> torch.Tensor:
        w = self.window
        return self.mbuf[: w.n, w.lo : w.hi + w.pending]

    def advance(self) -> None:
        """Make room for one more token per row (every slot's next column holds a position)."""
        self._compact()
        self._room(right=1)
        w = self.window
        self.mbuf[: w.n, w.hi] = 1
        w.pending = 1
        if self.pbuf is not None:
            self.pbuf[: w.n] += 1

    def commit(self, q: int) -> None:
        """The forward wrote ``q`` columns: they join the window."""
        w = self.window
        w.hi += q
        w.pending = 0
        for lay in self.layers:
            lay.refresh()

    def inputs(self, ids: torch.Tensor) -> torch.Tensor:
        """The rows' token ids ``[rows, q]`` placed at their slots ``[slots in use, q]`` (free slots read id 0)."""
        if self._slot_t is None:
            return ids
        out = ids.new_zeros((self.window.n, ids.shape[1]))
        return out.index_copy_(0, self._slot_t, ids)

    def outputs(self, feats: torch.Tensor) -> torch.Tensor:
        """Per-slot features back in row order."""
        return feats if self._slot_t is None else feats.index_select(0, self._slot_t)

    def select(self, rows: torch.Tensor, same_prompt: bool = False, host_rows: Sequence[int] | None = None,
               prompts_of: Sequence[int] | None = None) -> None:
        """Keep (and reorder or repeat) rows: the map changes; a repeated slot is copied to a free one.
        ``same_prompt`` (row ``i`` is replaced by a row of row ``i``'s beam group): a repeat copied into
        the slot row ``i`` held keeps that slot's prompt index (the same prompt: only its columns, mask
        and positions are copied). ``host_rows``: ``rows`` on the host (else read from the device: one
        transfer; where the policy says so, a ``same_prompt`` select is gathered on the device instead,
        :meth:`_gather_rows`). ``prompts_of``: :meth:`RowBatch.select`'s; unused here (each slot holds
        its row's prompt, moved with it)."""
        if same_prompt and host_rows is None and self.gathers_on_device:
            self._gather_rows(rows)
            return
        old = self.slots
        new = [old[r] for r in (rows.tolist() if host_rows is None else host_rows)]
        seen: set[int] = set()
        repeats = []
        for i, s in enumerate(new):
            if s in seen:
                repeats.append(i)
            seen.add(s)
        if repeats:
            free = [s for s in range(self.window.n) if s not in seen]
            extra = len(repeats) - len(free)
            if extra > 0:
                self._room(slots=self.window.n + extra)
                free += range(self.window.n, self.window.n + extra)
                self.window.n += extra
            own: dict[int, int] = {}  # repeat -> the free slot its position held (same prompt)
            if same_prompt:
                open_ = set(free)
                for i in repeats:
                    if i < len(old) and old[i] in open_:
                        own[i] = old[i]
                        open_.discard(old[i])
                free = [f for f in free if f in open_]
            rest = iter(free)
            dst = {i: own[i] if i in own else next(rest) for i in repeats}
            for keep in (True, False):
                moves = [i for i in repeats if (i in own) != keep]
                self._moved([new[i] for i in moves], [dst[i] for i in moves], prompt=keep)
            for i in repeats:
                new[i] = dst[i]
        self.slots = new
        self._remap()

    @property
    def gathers_on_device(self) -> bool:
        """Whether a ``same_prompt`` select is gathered on the device (the policy's
        :meth:`~constrained_decoding.device_policy.DevicePolicy.gathers_on_device`)."""
        return self.policy.gathers_on_device(self.device)

    def _gather_rows(self, rows: torch.Tensor) -> None:
        """A ``same_prompt`` select that reads nothing back: the slot of row ``i`` takes the
        self-attention keys and values of row ``rows[i]``'s slot. A beam takes its parent from its own
        group, whose rows joined together (the same prompt, mask and first column), so those are all
        that differ, and the map stays. It copies every running row's columns (as re-stacking does)
        where the host path copies only repeated slots, but a read waits for the device's queue."""
        w, n = self.window, len(self.slots)
        if rows.shape[0] != n:
            raise ValueError(f"a same-prompt select keeps every row: {rows.shape[0]} rows for {n}")
        dst = self._slot_t  # None: row r in slot r
        src = rows if dst is None else dst.index_select(0, rows)
        for buf in self._column_buffers():
            window = buf[:, :, w.lo : w.hi]
            moved = window.index_select(0, src)
            if dst is None:
                window[:n].copy_(moved)
            else:
                window.index_copy_(0, dst, moved)

    def _compact(self) -> None:
        """Move the rows of the last slots into the free slots below them: the forward reads as many
        slots as rows."""
        w = self.window
        if len(self.slots) == w.n:
            return
        live = set(self.slots)
        holes = [s for s in range(len(self.slots)) if s not in live]
        tail = [s for s in range(len(self.slots), w.n) if s in live]
        self._moved(tail, holes)
        where = dict(zip(tail, holes))
        self.slots = [where.get(s, s) for s in self.slots]
        w.n = len(self.slots)
        self._remap()

    def join(self, new: RowBatch) -> SlotBatch:
        """Put the rows of ``new`` (a fresh batch) after these rows: into free slots, right-aligned
        to the window's last column."""
        w = self.window
        k = new.rows
        layers = new.self_attention.layers
        t_new = layers[0].keys.shape[2]
        live = set(self.slots)
        free = [s for s in range(w.n) if s not in live][:k]
        extra = k - len(free)
        self._room(slots=w.n + extra, left=max(0, t_new - (w.hi - w.lo)))
        if w.hi - t_new < w.lo:  # the window grows to the left: no running row holds those columns
            self.mbuf[: w.n, w.hi - t_new : w.lo] = 0
            for buf in self._column_buffers():
                buf[: w.n, :, w.hi - t_new : w.lo] = 0
            w.lo = w.hi - t_new
        dst = free + list(range(w.n, w.n + extra))
        w.n += extra
        runs = _runs(dst)
        a = w.hi - t_new
        mask = new.mask if new.mask is not None else torch.ones((k, t_new), dtype=torch.long, device=self.device)
        for lay, src in zip(self.layers, layers):
            for buf, x in ((lay.kbuf, src.keys), (lay.vbuf, src.values)):
                for d, i, c in runs:
                    buf[d : d + c, :, a : w.hi].copy_(x[i : i + c])
                    buf[d : d + c, :, w.lo : a] = 0  # their left padding: masked, and finite
        for d, i, c in runs:
            self.mbuf[d : d + c, w.lo : a] = 0
            self.mbuf[d : d + c, a : w.hi].copy_(mask[i : i + c])
        for s, c in zip(dst, _first_valid(mask)):
            self.start[s] = a + c
        self._copy_rest(new, runs)
        self.slots = self.slots + dst
        self._remap()
        return self

    def fork(self, row: int, n_valid: int) -> RowFork:
        """Row ``row``'s cache up to its first ``n_valid`` positions (a copy: see :class:`RowFork`)."""
        s = self.slots[row]
        first = self.start[s]
        mask = self.mbuf[s, first : self.window.hi]
        mask = mask[: int((mask.cumsum(0) < n_valid).sum()) + 1].clone()
        end = first + mask.shape[0]
        f = RowFork([x.kbuf[s, :, first:end].clone() for x in self.layers],
                    [x.vbuf[s, :, first:end].clone() for x in self.layers], mask, n_valid)
        return f
