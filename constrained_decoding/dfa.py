"""A minimal acyclic automaton over token ids, laid out as tensors for batched decoding.

The plan grammar of a task is a finite language: the token sequences a tokenizer really produces
for each allowed row text (see :mod:`constrained_decoding.rows`). We store it as the minimal
acyclic DFA of that language (a trie with equal sub-tries merged), so that one decoding step for a
whole batch is three gathers: ``allowed[state]`` (the allowed token ids, padded to the maximum
out-degree ``D``), ``valid[state]`` (which of the ``D`` slots are real) and
``next_state[state, slot]`` (the transition). Nothing per row runs in Python in the decoding loop.

Every language is *prefix-free* (no sequence is a proper prefix of another; rows end in EOS or a
closing bracket), so all accepting paths end in one sink state ``final``, which we give a single
self-loop on the pad token: a finished row keeps emitting pad with log-probability exactly 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


class GrammarBuildError(ValueError):
    """The token sequences cannot form a plan grammar (duplicates, prefixes, empty rows)."""


@dataclass(eq=False)
class TokenDFA:
    """A minimal acyclic DFA over token ids (state ``final`` is the accepting sink).

    ``transitions[s]`` maps token id -> next state (the Python view, for walking a given row);
    ``allowed``/``valid``/``next_state`` are the same edges as ``[num_states, D]`` arrays, slot
    ``j`` of state ``s`` being the ``j``-th edge in ``transitions[s]`` order.
    """

    transitions: list[dict[int, int]]
    final: int
    pad_id: int
    slot_of: list[dict[int, int]] = field(init=False, repr=False)
    # the edges in compressed rows: state s's slots are edges indptr[s]:indptr[s+1] (a real-table travel
    # grammar has ~40k states but a few hundred-wide ones: dense [states, D] arrays would hold ~50 MB per
    # grammar, its edges ~0.5 MB; the dense arrays are built when a batch's tables are stacked)
    indptr: np.ndarray = field(init=False, repr=False)
    edge_token: np.ndarray = field(init=False, repr=False)
    edge_next: np.ndarray = field(init=False, repr=False)
    width: int = field(init=False, repr=False)  # the most slots of a state (D)

    def __post_init__(self) -> None:
        self.slot_of = []
        tokens: list[int] = []
        nexts: list[int] = []
        counts = np.zeros(len(self.transitions), dtype=np.int64)
        for s, edges in enumerate(self.transitions):
            if s == self.final:
                edges = {self.pad_id: self.final}
            tokens += edges.keys()
            nexts += edges.values()
            counts[s] = len(edges)
            self.slot_of.append({tok: j for j, tok in enumerate(edges)})
        self.indptr = np.concatenate([[0], np.cumsum(counts)])
        self.edge_token = np.asarray(tokens, dtype=np.int64)
        self.edge_next = np.asarray(nexts, dtype=np.int64)
        self.width = max(1, int(counts.max(initial=0)))

    @property
    def num_states(self) -> int:
        return len(self.transitions)

    def _dense(self, values: np.ndarray, fill, dtype) -> np.ndarray:
        """``[num_states, width]``: slot j of state s holds its j-th edge's value, ``fill`` beyond."""
        counts = np.diff(self.indptr)
        rows = np.repeat(np.arange(self.num_states), counts)
        out = np.full((self.num_states, self.width), fill, dtype=dtype)
        out[rows, np.arange(len(rows)) - self.indptr[rows]] = values
        return out

    @property
    def allowed(self) -> np.ndarray:
        """``[num_states, D]`` allowed token ids (``pad_id`` beyond a state's slots); built on each call."""
        return self._dense(self.edge_token, self.pad_id, np.int64)

    @property
    def valid(self) -> np.ndarray:
        """``[num_states, D]`` which slots are real; built on each call."""
        return self._dense(np.ones(len(self.edge_token), dtype=bool), False, bool)

    @property
    def next_state(self) -> np.ndarray:
        """``[num_states, D]`` the state each slot leads to (``final`` beyond a state's slots); built on each call."""
        return self._dense(self.edge_next, self.final, np.int64)

    def walk(self, start: int, tokens: Sequence[int]) -> tuple[list[int], list[int]]:
        """States before each token and the slot each token takes; ``ValueError`` if not in the language."""
        states, slots, s = [], [], start
        for i, tok in enumerate(tokens):
            if s == self.final:
                raise ValueError(f"token {i} ({tok}) follows the end of the row")
            slot = self.slot_of[s].get(int(tok))
            if slot is None:
                raise ValueError(f"token {i} ({tok}) is not allowed here; allowed: {sorted(self.transitions[s])}")
            states.append(s)
            slots.append(slot)
            s = self.transitions[s][int(tok)]
        if s != self.final:
            raise ValueError(f"the row ends after {len(tokens)} tokens before reaching the end of the grammar")
        return states, slots

    def forced_prefix(self, start: int) -> tuple[list[int], int]:
        """The tokens that are the only choice from ``start`` on (log-probability 0), and the state after them."""
        out, s = [], start
        while s != self.final and len(self.transitions[s]) == 1:
            (tok, s), = self.transitions[s].items()
            out.append(tok)
        return out, s


def build_dfa(languages: Sequence[Sequence[Sequence[int]]], pad_id: int) -> tuple[TokenDFA, list[int]]:
    """The minimal DFA recognising each language from its own start state (states are shared).

    Each language is a set of non-empty, prefix-free token sequences. Returns the DFA and the start
    state of each language, in order. Cost: linear in the total number of tokens (after a sort).
    """
    transitions: list[dict[int, int]] = [{}]  # state 0: the accepting sink
    register: dict[tuple[tuple[int, int], ...], int] = {}

    def build(seqs: list[tuple[int, ...]], lo: int, hi: int, depth: int) -> int:
        if len(seqs[lo]) == depth:
            if hi - lo > 1:
                raise GrammarBuildError(
                    f"token sequence {list(seqs[lo])} is a prefix of {list(seqs[lo + 1])}: a row cannot end "
                    "where another continues (is the end-of-row token missing?)"
                )
            return 0
        edges: list[tuple[int, int]] = []
        i = lo
        while i < hi:
            tok = seqs[i][depth]
            j = i + 1
            while j < hi and seqs[j][depth] == tok:
                j += 1
            edges.append((tok, build(seqs, i, j, depth + 1)))
            i = j
        key = tuple(edges)
        sid = register.get(key)
        if sid is None:
            sid = register[key] = len(transitions)
            transitions.append(dict(edges))
        return sid

    starts = []
    for k, lang in enumerate(languages):
        seqs = sorted({tuple(int(t) for t in s) for s in lang})
        if not seqs:
            raise GrammarBuildError(f"language {k} is empty: no row can be decoded")
        if len(seqs[0]) == 0:
            raise GrammarBuildError(f"language {k} contains the empty sequence")
        if len(seqs) != len(lang):
            raise GrammarBuildError(f"language {k} lists the same token sequence twice")
        starts.append(build(seqs, 0, len(seqs), 0))
    return TokenDFA(transitions, final=0, pad_id=pad_id), starts
