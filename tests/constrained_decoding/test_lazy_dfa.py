"""LazyTokenDFA (``constrained_decoding/lazy_dfa.py``): states numbered as discovered and expanded once, the
TokenDFA walks on its lazy views, a grammar's broken promises refused, and a lazy batch's stacked tables
(``lazy_tables.py``) laid out as rows reach states. The decoder's exactness on a lazy grammar is checked on
the pddl env's legal grammar (``tests/envs/pddl/test_legal_grammar.py``)."""

from __future__ import annotations

import pytest
import torch

from constrained_decoding.dfa import GrammarBuildError
from constrained_decoding.finish_bounds import table_bounds
from constrained_decoding.lazy_dfa import LazyTokenDFA, is_lazy
from constrained_decoding.lazy_tables import INITIAL_ROWS
from constrained_decoding.tables import stack_tables

A, B, EOS, PAD = 5, 6, 2, 0


def counter(limit: int, calls: list) -> LazyTokenDFA:
    """Rows ``A^n EOS`` and ``A^n B EOS`` for n <= limit: state key n (``B``: the key ``"b"``)."""

    def successors(key):
        calls.append(key)
        if key == "b":
            return {EOS: "end"}
        out = {EOS: "end", B: "b"}
        if key < limit:
            out[A] = key + 1
        return out

    return LazyTokenDFA(successors, 0, "end", PAD, (A, B, EOS), 3)


class Toy:
    """The least of a Grammar the tables read."""

    def __init__(self, dfa):
        self.dfa, self.root, self.pad_id = dfa, dfa.root, PAD


def test_states_are_numbered_as_found_and_expanded_once():
    calls = []
    d = counter(3, calls)
    assert (d.final, d.root, d.num_states, d.expansions, is_lazy(d)) == (0, 1, 2, 0, True)
    states, slots = d.walk(d.root, [A, A, B, EOS])
    assert states == [1, 3, 4, 2] and slots == [2, 2, 1, 0] and d.expansions == 4  # ("b" found at the root)
    d.walk(d.root, [A, A, B, EOS])
    assert calls == [0, 1, 2, "b"]  # nothing expanded twice
    with pytest.raises(ValueError, match="is not allowed here"):
        d.walk(d.root, [B, A])
    assert d.key_of(2) == "b" and d.forced_prefix(2) == ([EOS], 0)


def test_a_grammars_broken_promises_are_refused():
    with pytest.raises(GrammarBuildError, match="has no edge"):
        LazyTokenDFA(lambda k: {}, 0, "end", PAD, (A,), 1).edges(1)
    with pytest.raises(GrammarBuildError, match="declared at most 1"):
        LazyTokenDFA(lambda k: {A: "end", B: "end"}, 0, "end", PAD, (A, B), 1).edges(1)
    with pytest.raises(GrammarBuildError, match="outside the alphabet"):
        LazyTokenDFA(lambda k: {B: "end"}, 0, "end", PAD, (A,), 1).edges(1)


def test_lazy_tables_lay_out_rows_as_they_are_reached_and_grow():
    calls = []
    g = Toy(counter(3 * INITIAL_ROWS, calls))
    t = stack_tables((g,), torch.device("cpu"))
    assert t.lazy and calls == [0]  # the root (and the sink) laid out
    root = t.index(g, g.root)
    assert t.allowed[root].tolist() == [EOS, B, A] and t.valid[root].all()
    s, path = root, []
    for _ in range(2 * INITIAL_ROWS):  # A, A, ...: every step lays out the row it reaches
        s = int(t.next_state[s, 2])
        t.ensure(torch.tensor([s]))
        path.append(s)
    assert t.capacity > INITIAL_ROWS and len(calls) == 2 * INITIAL_ROWS + 1
    dist, final = table_bounds(t)
    assert final[t.index(g, g.dfa.final)] and not final[s] and dist[s] == 1
    b = int(t.next_state[s, 1])  # B: found, not laid out until reached
    assert not t.valid[b].any()
    t.ensure([b])
    assert t.allowed[b, 0] == EOS and t.final[t.next_state[b, 0]]
