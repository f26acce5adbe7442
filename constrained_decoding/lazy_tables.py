"""Stacked state tables that grow: a batch holding a grammar expanded on demand (:mod:`constrained_decoding.lazy_dfa`).

:class:`LazyStateTables` has the attributes of :class:`~constrained_decoding.tables.StateTables` (the
decoder reads them alike): the batch's eager grammars stacked first, as ``stack_tables`` stacks them
(``offset``), then a region of rows that grows as rows reach lazy grammars' states. A lazy grammar's
state gets a stacked number when it is discovered (:meth:`index`; its ``final`` flag is known then) and
its row of ``allowed`` / ``valid`` / ``next_state`` when a decoder row is about to read it
(:meth:`ensure`, called by every step of the sampler and of beam search before it scores, and by the
scorer for the states it teacher-forces). ``vocab`` and the width ``D`` are fixed when the
tables are made, from the lazy grammars' declared ``alphabet`` and ``width``, so rows already laid out
never move; the tensors are reallocated at twice the size when the region is full.

The cost: :meth:`ensure` reads the rows' states to the host at every step (one transfer; on the CPU a
copy), and the sampler and beam search read their finished rows at every step (a lazy state's fewest
steps to the end is taken as 1, a lower bound: reading earlier decides the same). Eager-only batches
never come here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import torch

INITIAL_ROWS = 256
"""Rows the lazy region starts with (doubled when full)."""


class LazyStateTables:
    """The tables of a batch with lazy grammars (module docstring)."""

    lazy = True

    def __init__(self, eager: Sequence, eager_parts: tuple, lazy: Sequence, width: int, device: torch.device):
        """``eager``: the eager grammars; ``eager_parts``: their stacked ``(allowed, valid, next_state,
        final)`` host arrays at ``width`` and ``offset``; ``lazy``: the lazy grammars."""
        allowed, valid, nxt, final, self.offset = eager_parts
        self.device, self.width = device, width
        vocab = set(np.unique(allowed).tolist()) if len(allowed) else set()
        for g in lazy:
            vocab.update(g.dfa.alphabet)
        vocab_np = np.asarray(sorted(vocab), dtype=np.int64)
        self._pos = {int(t): j for j, t in enumerate(vocab_np)}
        self.eager_rows = len(final)
        cap = self.eager_rows + INITIAL_ROWS
        pad = lazy[0].pad_id
        self._pad_local = self._pos[pad]

        def grown(x: np.ndarray, fill, dtype) -> torch.Tensor:
            out = np.full((cap, *x.shape[1:]) if x.ndim > 1 else (cap,), fill, dtype=dtype)
            if len(x):
                out[: len(x)] = x
            return torch.from_numpy(out).to(device)

        shape2 = (0, width)
        allowed = allowed if len(allowed) else np.zeros(shape2, np.int64)
        with torch.inference_mode(False):
            self.allowed = grown(allowed, pad, np.int64)
            self.valid = grown(valid if len(valid) else np.zeros(shape2, bool), False, bool)
            self.next_state = grown(nxt if len(nxt) else np.zeros(shape2, np.int64), 0, np.int64)
            self.final = grown(np.asarray(final, bool), False, bool)
            self.allowed_local = grown(np.searchsorted(vocab_np, allowed).astype(np.int64), self._pad_local, np.int64)
            self.vocab = torch.from_numpy(vocab_np).to(device)
        self.capacity = cap
        # host views: every stacked state's fewest steps to the end (lazy ones: 1, a lower bound) and final flag
        # (lists grown in place: a sampler that took them once sees later states too)
        self.dist: list[int] = [1] * self.eager_rows  # (the eager states' own: on the first host_bounds)
        self._eager_bounds = not self.eager_rows
        self.final_host: list[bool] = [bool(f) for f in final]
        self.expanded: list[bool] = [True] * self.eager_rows
        self._stacked: dict[tuple, int] = {}  # (lazy grammar, its state) -> stacked state
        self._owner: list[tuple] = []  # stacked state - eager_rows -> (lazy grammar, its state)
        self._lock = threading.RLock()
        for g in lazy:  # each one's sink first (the scorer pads with the first sink), then its root
            self.ensure([self.index(g, g.dfa.final), self.index(g, g.root)])

    def index(self, grammar, s: int) -> int:
        """The stacked number of ``grammar``'s state ``s`` (a lazy grammar's is given on first use)."""
        off = self.offset.get(grammar)
        if off is not None:
            return off + s
        key = (grammar, s)
        sid = self._stacked.get(key)
        if sid is None:
            with self._lock:
                sid = self._stacked.get(key)
                if sid is None:
                    sid = self._allocate(grammar, s)
        return sid

    def _allocate(self, grammar, s: int) -> int:
        sid = self.eager_rows + len(self._owner)
        if sid >= self.capacity:
            self._grow()
        is_final = s == grammar.dfa.final
        self._owner.append((grammar, s))
        self.final_host.append(is_final)
        self.dist.append(0 if is_final else 1)
        self.expanded.append(False)
        if is_final:
            with torch.inference_mode(False):
                self.final[sid] = True
        self._stacked[(grammar, s)] = sid
        return sid

    def _grow(self) -> None:
        extra = self.capacity
        with torch.inference_mode(False):
            def more(t: torch.Tensor, fill) -> torch.Tensor:
                return torch.cat([t, torch.full((extra, *t.shape[1:]), fill, dtype=t.dtype, device=t.device)])

            self.allowed = more(self.allowed, int(self._owner[0][0].pad_id))
            self.valid = more(self.valid, False)
            self.next_state = more(self.next_state, 0)
            self.final = more(self.final, False)
            self.allowed_local = more(self.allowed_local, self._pad_local)
        self.capacity += extra

    def ensure(self, state: torch.Tensor | Iterable[int]) -> None:
        """Lay out the rows of the states in ``state`` that have none yet (expanding their grammars'
        states: :meth:`~constrained_decoding.lazy_dfa.LazyTokenDFA.edges`)."""
        ids = state.reshape(-1).tolist() if isinstance(state, torch.Tensor) else list(state)
        todo = sorted({s for s in ids if not self.expanded[s]})
        if not todo:
            return
        with self._lock:
            todo = [s for s in todo if not self.expanded[s]]
            rows = []
            for sid in todo:
                g, s = self._owner[sid - self.eager_rows]
                edges = g.dfa.edges(s)
                toks = list(edges)
                nexts = [self.index(g, t) for t in edges.values()]
                sink = self.index(g, g.dfa.final)
                fill = self.width - len(toks)
                rows.append((toks + [g.pad_id] * fill, [True] * len(toks) + [False] * fill, nexts + [sink] * fill,
                             [self._pos[t] for t in toks] + [self._pad_local] * fill))
            where = torch.as_tensor(todo, dtype=torch.long, device=self.device)
            with torch.inference_mode(False):
                for name, k, dtype in (("allowed", 0, torch.long), ("valid", 1, torch.bool),
                                       ("next_state", 2, torch.long), ("allowed_local", 3, torch.long)):
                    getattr(self, name)[where] = torch.as_tensor([r[k] for r in rows], dtype=dtype, device=self.device)
            for sid in todo:
                self.expanded[sid] = True

    def host_bounds(self, steps_to_final: Callable) -> tuple[list[int], list[bool]]:
        """``steps_to_final`` of every stacked state and which are final, on the host (lists grown in place);
        ``steps_to_final``: :func:`constrained_decoding.finish_bounds.steps_to_final`, for the eager states."""
        if not self._eager_bounds:
            with self._lock:
                parts = [steps_to_final(g.dfa).tolist() for g, _ in sorted(self.offset.items(), key=lambda x: x[1])]
                self.dist[: self.eager_rows] = [d for part in parts for d in part]
                self._eager_bounds = True
        return self.dist, self.final_host
