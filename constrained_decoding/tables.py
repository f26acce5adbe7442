"""The automata of a batch's grammars stacked into one state numbering, as tensors on one device."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from constrained_decoding.lazy_dfa import is_lazy
from constrained_decoding.lazy_tables import LazyStateTables
from constrained_decoding.protocol import Grammar


@dataclass(eq=False)
class StateTables:
    """The DFAs of several grammars stacked into one numbering, as tensors on one device.

    ``offset[g]`` is added to grammar ``g``'s state ids. ``final[s]`` marks the accepting sinks.
    ``vocab`` is the sorted set of every token id any state allows and ``allowed_local`` the
    position of each allowed id in it: a step scores the ``vocab`` rows of the output layer once
    and gathers, with no per-step ``unique``.
    """

    allowed: torch.Tensor  # [S, D] int64 token ids
    valid: torch.Tensor  # [S, D] bool
    next_state: torch.Tensor  # [S, D] int64
    final: torch.Tensor  # [S] bool
    offset: dict[Grammar, int]
    vocab: torch.Tensor  # [U] int64, sorted
    allowed_local: torch.Tensor  # [S, D] int64 positions in ``vocab``
    lazy: ClassVar[bool] = False  # (:class:`~constrained_decoding.lazy_tables.LazyStateTables`: True)

    def index(self, grammar: Grammar, s: int) -> int:
        """The stacked number of ``grammar``'s state ``s``."""
        return self.offset[grammar] + s

    def ensure(self, state) -> None:
        """Nothing to lay out: every state has its row (lazy tables lay out the rows of ``state`` here)."""


CACHE_ENTRIES = 64
"""Batches of grammars whose stacked tables stay cached (a training step's batch is stacked by the
sampler and again by the scorer; the held-out batches recur every evaluation)."""
CACHE_BYTES = 1 << 30
"""...and their bytes at most (the newest batch is always kept): a batch's tables are its states times
the widest state of its grammars, so real-table travel grammars (hundreds of options in a state) reach
hundreds of MB per batch, and SFT's shuffled batches are each new -- 64 of them passed 20 GB."""

_cache: OrderedDict[tuple, StateTables] = OrderedDict()
_lock = threading.Lock()  # (flow backends decode from several threads)


def stack_tables(grammars: tuple[Grammar, ...], device: torch.device) -> StateTables | LazyStateTables:
    """One state numbering for the grammars of a batch (cached, least recently used out first, within
    :data:`CACHE_ENTRIES` batches and :data:`CACHE_BYTES`: grammars hash by identity).

    Built outside inference mode even when decoding asks first: the cached tensors are reused
    by the scorer, whose autograd graph must be allowed to save them."""
    key = (grammars, device)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    with torch.inference_mode(False):
        tables = _stack_tables(grammars, device)
    with _lock:
        _cache[key] = tables
        while len(_cache) > 1 and (len(_cache) > CACHE_ENTRIES or sum(map(_nbytes, _cache.values())) > CACHE_BYTES):
            _cache.popitem(last=False)
    return tables


def _nbytes(t: StateTables) -> int:
    return sum(x.numel() * x.element_size() for x in (t.allowed, t.valid, t.next_state, t.final, t.vocab,
                                                       t.allowed_local))


def _stack_tables(grammars: tuple[Grammar, ...], device: torch.device) -> StateTables | LazyStateTables:
    width = max(g.dfa.width for g in grammars)
    lazy = [g for g in dict.fromkeys(grammars) if is_lazy(g.dfa)]
    if lazy:  # the eager ones stacked as below, the lazy ones' rows laid out as decoding reaches them
        eager = tuple(g for g in grammars if not is_lazy(g.dfa))
        return LazyStateTables(eager, _eager_arrays(eager, width), lazy, width, device)
    allowed, valid, nxt, final, offset = _eager_arrays(grammars, width)
    vocab, local = np.unique(allowed, return_inverse=True)
    as_t = lambda x: torch.from_numpy(np.ascontiguousarray(x)).to(device)  # noqa: E731
    return StateTables(as_t(allowed), as_t(valid), as_t(nxt), as_t(final), offset, as_t(vocab.astype(np.int64)),
                       as_t(local.reshape(allowed.shape).astype(np.int64)))


def _eager_arrays(grammars: tuple[Grammar, ...], width: int) -> tuple:
    """``(allowed, valid, next_state, final, offset)``: the grammars' DFAs stacked, each padded to ``width``."""
    allowed, valid, nxt, final, offset, base = [], [], [], [], {}, 0
    for g in grammars:
        if g in offset:
            continue
        d = g.dfa
        pad_w = width - d.width
        allowed.append(np.pad(d.allowed, ((0, 0), (0, pad_w)), constant_values=g.pad_id))
        valid.append(np.pad(d.valid, ((0, 0), (0, pad_w)), constant_values=False))
        nxt.append(np.pad(d.next_state, ((0, 0), (0, pad_w)), constant_values=d.final) + base)
        f = np.zeros(d.num_states, dtype=bool)
        f[d.final] = True
        final.append(f)
        offset[g] = base
        base += d.num_states
    if not offset:
        return np.zeros((0, width), np.int64), np.zeros((0, width), bool), np.zeros((0, width), np.int64), \
            np.zeros(0, bool), offset
    return np.concatenate(allowed), np.concatenate(valid), np.concatenate(nxt), np.concatenate(final), offset
