"""A token automaton whose states are expanded when first reached: grammars too large to enumerate.

A :class:`~constrained_decoding.dfa.TokenDFA` holds every state's edges. Some grammars cannot: a planner
constrained to the actions applicable in the state its prefix reached (the pddl env's ``legal`` grammar)
has one automaton state per simulator state it can reach, ~58 million for Blocksworld with 10 blocks.
:class:`LazyTokenDFA` numbers states as they are discovered and asks the grammar for a state's edges
(``successors(key) -> {token id: successor key}``, keys any hashable value the grammar chooses) the first
time anything reads them, then keeps them: a second decode of the same grammar expands nothing new.

It reads like a ``TokenDFA`` where the decoder walks it on the host (``transitions[s]``, ``slot_of[s]``,
:meth:`walk`, :meth:`forced_prefix`, ``final``, ``pad_id``); what the decoder lays out as tensors over
every state it cannot have, so it declares instead what a batch's stacked tables need before any state
is expanded: ``alphabet`` (every token id a state may allow) and ``width`` (the most edges of a state).
The stacked tables (:mod:`constrained_decoding.lazy_tables`) then grow a row per state as rows reach it.
The grammar's promise is the protocol's: every state reaches the end of the row (no dead ends), every
row language is prefix-free.

**Memory stays bounded.** A grammar lives as long as its env (a whole training run), and every row a decode
visits would otherwise add its states' edges for good. At most ``max_expanded`` states keep their edges
(:data:`MAX_EXPANDED` by default): past it the least recently read state's edges are dropped and expanded
again if a row comes back (``successors`` is a function of the key, and a key keeps its number, so a
re-expansion gives the same edges: decoding stays exact). What is kept for every state found is its key and
number, the smallest part, so that numbers held by a decode in flight (a batch's stacked tables) stay valid.
``expansions`` counts every expansion, re-expansions included; ``cached`` the states holding edges now.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence

from constrained_decoding.dfa import GrammarBuildError, TokenDFA

Successors = Callable[[Hashable], dict[int, Hashable]]

MAX_EXPANDED = 200_000
"""States whose edges a lazy grammar keeps by default (least recently read dropped first): ~100 MB at
most for pddl's legal grammar, far above what one decode of a batch reaches."""


class _Edges(Sequence):
    """``transitions`` / ``slot_of`` of a lazy DFA: item ``s`` expands state ``s`` on first read."""

    def __init__(self, dfa: LazyTokenDFA, slots: bool):
        self.dfa, self.slots = dfa, slots

    def __getitem__(self, s):
        edges = self.dfa.edges(s)
        return {tok: j for j, tok in enumerate(edges)} if self.slots else edges

    def __len__(self) -> int:
        return self.dfa.num_states


class LazyTokenDFA:
    """The automaton of ``successors`` from ``root_key``; ``final_key``: the accepting sink (module docstring).

    State 0 is the sink (it loops on ``pad_id``), state 1 the root; others are numbered as discovered."""

    lazy = True

    def __init__(self, successors: Successors, root_key: Hashable, final_key: Hashable, pad_id: int,
                 alphabet: Iterable[int], width: int, max_expanded: int = MAX_EXPANDED):
        if int(max_expanded) < 1:
            raise ValueError(f"max_expanded must be >= 1 (states whose edges are kept), got {max_expanded}")
        self.max_expanded = int(max_expanded)
        self._recent: OrderedDict[int, None] = OrderedDict()  # the expanded states (not the sink), least recent first
        self.successors, self.pad_id, self.final = successors, int(pad_id), 0
        self.alphabet = tuple(sorted({int(t) for t in alphabet} | {self.pad_id}))
        self.width = max(1, int(width))
        self._keys: list[Hashable] = [final_key]
        self._ids: dict[Hashable, int] = {final_key: 0}
        self._edges: list[dict[int, int] | None] = [{self.pad_id: 0}]
        self.root = self.state_of(root_key)
        self.expansions = 0  # states expanded so far (each once)
        self._lock = threading.Lock()  # (flow backends decode from several threads)
        self.transitions, self.slot_of = _Edges(self, False), _Edges(self, True)

    @property
    def num_states(self) -> int:
        """States discovered so far (expanded or not)."""
        return len(self._keys)

    def state_of(self, key: Hashable) -> int:
        """The number of the state ``key`` (a new one is numbered next)."""
        sid = self._ids.get(key)
        if sid is None:
            sid = self._ids[key] = len(self._keys)
            self._keys.append(key)
            self._edges.append(None)
        return sid

    def key_of(self, s: int) -> Hashable:
        return self._keys[s]

    def is_expanded(self, s: int) -> bool:
        """Whether state ``s`` holds its edges now (an evicted state is expanded again when read)."""
        return self._edges[s] is not None

    @property
    def cached(self) -> int:
        """States holding their edges now (the sink apart): at most ``max_expanded``."""
        return len(self._recent)

    def edges(self, s: int) -> dict[int, int]:
        """State ``s``'s edges ``{token id: next state}``, expanded on first use (then cached, the
        ``max_expanded`` most recently read states)."""
        edges = self._edges[s]
        if edges is None:
            with self._lock:
                edges = self._edges[s]
                if edges is None:
                    edges = self._expand(s)
        elif s:
            try:
                self._recent.move_to_end(s)
            except KeyError:  # evicted by another thread between the two reads: its edges are still right
                pass
        return edges

    def _expand(self, s: int) -> dict[int, int]:
        succ = self.successors(self._keys[s])
        if not succ:
            raise GrammarBuildError(f"lazy grammar state {self._keys[s]!r} has no edge: a row would dead-end there")
        if len(succ) > self.width:
            raise GrammarBuildError(f"lazy grammar state {self._keys[s]!r} has {len(succ)} edges; the grammar "
                                    f"declared at most {self.width}")
        alphabet = set(self.alphabet)
        edges = {}
        for tok, key in succ.items():
            if int(tok) not in alphabet:
                raise GrammarBuildError(f"lazy grammar state {self._keys[s]!r} allows token {tok}, outside the "
                                        "alphabet it declared")
            edges[int(tok)] = self.state_of(key)
        self._edges[s] = edges
        self.expansions += 1
        if s:
            self._recent[s] = None
            while len(self._recent) > self.max_expanded:  # the least recently read state's edges go
                old, _ = self._recent.popitem(last=False)
                self._edges[old] = None
        return edges

    walk = TokenDFA.walk  # (they read ``final``, ``transitions`` and ``slot_of`` alone: the lazy views serve)
    forced_prefix = TokenDFA.forced_prefix


def is_lazy(dfa: object) -> bool:
    """Whether a grammar's automaton is expanded on demand (its batch's tables grow as rows reach states)."""
    return bool(getattr(dfa, "lazy", False))
