"""The trigram model's probabilities of many candidate words at once, bit for bit
:meth:`~envs.openagi.lite.text.ngram.KneserNeyLM.prob` of each: what Fill Mask scores its
candidates with.

A candidate ``w`` appears in three places of Fill Mask's score: as the predicted word after a fixed
context, ``P(w | a, b)``; in the context of the next word, ``P(r | b, w)``; and in that of the word
after it, ``P(s | w, r)``. For each place, each order's counts, totals and type counts are gathered
for all candidates from tables indexed by vocabulary id (built once per model), and Kneser-Ney's
interpolation ``max(c - d, 0) / total + d * types / total * p`` runs elementwise in float64, in
:meth:`prob`'s order of operations, so every probability is the same double. Logs stay
``math.log`` (numpy's vectorised log may differ in the last bit).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from envs.openagi.lite.text.ngram import KneserNeyLM

_Sparse = tuple[np.ndarray, np.ndarray]  # (vocabulary ids, values)


def _sparse(pairs: dict[int, float]) -> _Sparse:
    ids = np.fromiter(pairs, dtype=np.int64, count=len(pairs))
    return ids, np.fromiter(pairs.values(), dtype=np.float64, count=len(pairs))


class CandidateProbs:
    """``P(. | .)`` of :class:`KneserNeyLM` over arrays of candidate words (see the module docstring).

    Word ids index :attr:`KneserNeyLM.vocab` plus the end token; any other word (the unknown word,
    ``[MASK]``) has the id ``unknown``, which no table holds: counts 0, contexts never seen."""

    def __init__(self, lm: KneserNeyLM):
        if lm.order != 3:
            raise ValueError(f"CandidateProbs scores trigram models; got order={lm.order}")
        self.lm = lm
        words = sorted({w for table in lm.tables for ctx in table for w in ctx} | set(lm.vocab))
        self.ids = {w: i for i, w in enumerate(words)}
        self.unknown = len(words)
        size = self.unknown + 1
        unigram, t1, k1 = lm.tables[1][()]
        self.level1 = self._interp(1, self._dense(_sparse({self.ids[w]: c for w, c in unigram.items()})),
                                   float(t1), float(k1), np.full(size, lm.uniform))
        # order 2, context (w,): per w
        self.total2, self.types2, self.seen2 = np.ones(size), np.zeros(size), np.zeros(size, bool)
        after2: dict[int, dict[int, float]] = defaultdict(dict)  # next word -> {w: count of (w, next)}
        for (w,), (nxt, total, types) in lm.tables[2].items():
            i = self.ids[w]
            self.total2[i], self.types2[i], self.seen2[i] = total, types, True
            for r, c in nxt.items():
                after2[self.ids[r]][i] = c
        self.after2 = {r: _sparse(d) for r, d in after2.items()}
        # order 3, context (a, w) with w varying (per a) and (w, b) with w varying (per b)
        by_first: dict[int, dict[int, tuple]] = defaultdict(dict)
        by_second: dict[int, dict[int, tuple]] = defaultdict(dict)
        next_by_first: dict[tuple[int, int], dict[int, float]] = defaultdict(dict)
        next_by_second: dict[tuple[int, int], dict[int, float]] = defaultdict(dict)
        for (a, b), (nxt, total, types) in lm.tables[3].items():
            ia, ib = self.ids[a], self.ids[b]
            by_first[ia][ib] = by_second[ib][ia] = (total, types)
            for r, c in nxt.items():
                next_by_first[ia, self.ids[r]][ib] = c
                next_by_second[ib, self.ids[r]][ia] = c
        self.ctx3_by_first = {a: self._context_arrays(d) for a, d in by_first.items()}
        self.ctx3_by_second = {b: self._context_arrays(d) for b, d in by_second.items()}
        self.next3_by_first = {k: _sparse(d) for k, d in next_by_first.items()}
        self.next3_by_second = {k: _sparse(d) for k, d in next_by_second.items()}
        self._next: dict[tuple[int, tuple[str, ...]], _Sparse] = {}  # (order, context) -> its next words, filled on use

    def id_of(self, word: str) -> int:
        return self.ids.get(word, self.unknown)

    def _dense(self, sparse: _Sparse | None) -> np.ndarray:
        out = np.zeros(self.unknown + 1)
        if sparse is not None:
            out[sparse[0]] = sparse[1]
        return out

    def _context_arrays(self, entries: dict[int, tuple]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        total, types, seen = np.ones(self.unknown + 1), np.zeros(self.unknown + 1), np.zeros(self.unknown + 1, bool)
        ids = np.fromiter(entries, dtype=np.int64, count=len(entries))
        total[ids] = [t for t, _ in entries.values()]
        types[ids] = [k for _, k in entries.values()]
        seen[ids] = True
        return total, types, seen

    def _interp(self, n: int, count, total, types, p):
        """One order of :meth:`KneserNeyLM.prob`: ``max(count - d, 0) / total + d * types / total * p``."""
        d = self.lm.discount[n]
        return np.maximum(count - d, 0.0) / total + d * types / total * p

    def _scalar_level(self, n: int, word: str, context: tuple[str, ...], p: float) -> float:
        entry = self.lm.tables[n].get(context)
        if entry is None:
            return p
        nxt, total, types = entry
        d = self.lm.discount[n]
        return max(nxt.get(word, 0) - d, 0.0) / total + d * types / total * p

    def of_words(self, cands: np.ndarray, context: Sequence[str]) -> np.ndarray:
        """``P(w | context)`` for each candidate id ``w``; ``context`` holds at least two tokens."""
        p = self.level1[cands]
        for n, h in ((2, tuple(context[-1:])), (3, tuple(context[-2:]))):
            entry = self.lm.tables[n].get(h)
            if entry is not None:
                nxt, total, types = entry
                if (n, h) not in self._next:
                    self._next[n, h] = _sparse({self.ids[w]: c for w, c in nxt.items()})
                counts = self._dense(self._next[n, h])[cands]
                p = self._interp(n, counts, float(total), float(types), p)
        return p

    def after_candidates(self, word: str, first: str, cands: np.ndarray) -> np.ndarray:
        """``P(word | first, w)`` for each candidate id ``w``."""
        r, a = self.id_of(word), self.id_of(first)
        p = np.full(len(cands), self.level1[r])
        counts = self._dense(self.after2.get(r))[cands]
        new = self._interp(2, counts, self.total2[cands], self.types2[cands], p)
        p = np.where(self.seen2[cands], new, p)
        return self._trigram(self.ctx3_by_first.get(a), self.next3_by_first.get((a, r)), cands, p)

    def two_after_candidates(self, word: str, second: str, cands: np.ndarray) -> np.ndarray:
        """``P(word | w, second)`` for each candidate id ``w``."""
        r, b = self.id_of(word), self.id_of(second)
        p0 = self._scalar_level(2, word, (second,), float(self.level1[r]))
        p = np.full(len(cands), p0)
        return self._trigram(self.ctx3_by_second.get(b), self.next3_by_second.get((b, r)), cands, p)

    def _trigram(self, ctx, following, cands: np.ndarray, p: np.ndarray) -> np.ndarray:
        """``p`` interpolated with the trigram level where the candidate's context was seen: ``ctx``
        (context totals, types and seen flags by candidate id, or None) and ``following`` (the counts
        of the predicted word after each context)."""
        if ctx is None:
            return p
        total, types, seen = ctx
        counts = self._dense(following)[cands]
        return np.where(seen[cands], self._interp(3, counts, total[cands], types[cands], p), p)


def log_list(p: np.ndarray) -> np.ndarray:
    """``math.log`` of each element (numpy's vectorised log may differ from it in the last bit)."""
    return np.array([math.log(x) for x in p.tolist()], dtype=np.float64)


@lru_cache(maxsize=4)
def candidate_probs(lm: KneserNeyLM) -> CandidateProbs:
    """The tables of ``lm`` (built once per model, well under a second)."""
    return CandidateProbs(lm)
