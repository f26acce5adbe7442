"""How soon a decoded row can finish at the earliest: the sampler's license to skip host syncs.

The sampler must look at the device only when something it decides on the host may have changed:
a row finishing (its branch rows spawn, finished rows leave the batch, the loop ends). A row in
grammar state ``s`` cannot finish in fewer than ``steps_to_final(s)`` steps (the shortest path to
the accepting sink of its acyclic DFA), so after reading the states once the sampler runs
``min`` of that over the running rows steps on the device alone, then reads again: the same
decisions at the same steps as reading after every step, with one transfer per window instead of
several per step.
"""

from __future__ import annotations

import weakref

import numpy as np

from constrained_decoding.dfa import TokenDFA
from constrained_decoding.tables import StateTables

_DFA_MEMO: "weakref.WeakKeyDictionary[TokenDFA, np.ndarray]" = weakref.WeakKeyDictionary()
_TABLES_MEMO: "weakref.WeakKeyDictionary[StateTables, tuple[np.ndarray, np.ndarray]]" = weakref.WeakKeyDictionary()


def steps_to_final(dfa: TokenDFA) -> np.ndarray:
    """``[num_states]`` int64: the fewest tokens from each state to ``dfa.final`` (0 there); memoized per DFA.

    Every state of a plan grammar reaches the sink (its language is finite and non-empty), so
    the relaxation below settles in at most (longest row) rounds; a state that cannot reach it
    (not a plan grammar) raises ``ValueError``."""
    hit = _DFA_MEMO.get(dfa)
    if hit is not None:
        return hit
    n = dfa.num_states
    big = np.iinfo(np.int64).max // 2
    dist = np.full(n, big, dtype=np.int64)
    dist[dfa.final] = 0
    starts = dfa.indptr[:-1]
    has_edges = np.diff(dfa.indptr) > 0
    for _ in range(n):
        via = np.full(n, big, dtype=np.int64)
        if len(dfa.edge_next):
            via[has_edges] = np.minimum.reduceat(dist[dfa.edge_next], starts[has_edges]) + 1
        new = np.minimum(dist, via)
        if np.array_equal(new, dist):
            break
        dist = new
    if (dist >= big).any():
        raise ValueError(f"grammar DFA state {int(np.argmax(dist >= big))} cannot reach the end of a row")
    _DFA_MEMO[dfa] = dist
    return dist


def table_bounds(tables: StateTables) -> tuple[np.ndarray, np.ndarray]:
    """For the stacked numbering of ``tables``, on the host: ``steps_to_final`` of every state and
    which states are final (no device read; memoized per tables object). Lazy tables
    (:class:`~constrained_decoding.lazy_tables.LazyStateTables`) answer with host lists that grow as
    their states are discovered."""
    if tables.lazy:
        return tables.host_bounds(steps_to_final)
    hit = _TABLES_MEMO.get(tables)
    if hit is not None:
        return hit
    parts = sorted(((off, g.dfa) for g, off in tables.offset.items()), key=lambda x: x[0])
    dist = np.concatenate([steps_to_final(d) for _, d in parts])
    final = np.zeros(len(dist), dtype=bool)
    for off, d in parts:
        final[off + d.final] = True
    _TABLES_MEMO[tables] = (dist, final)
    return dist, final
