"""A lazy grammar's memory stays bounded (``constrained_decoding/lazy_dfa.py``: ``max_expanded``, the least
recently read states' edges dropped and expanded again when reached) and decoding stays exact: the same
walks as an unbounded grammar, and pddl's legal grammar (``envs/pddl/grammar.py``) with a cap far below
the states a decode reaches still gives probabilities that sum to 1 and a sampler that reports the
scorer's log-probabilities."""

from __future__ import annotations

import random

import pytest
import torch

from constrained_decoding.decode import sample_plans
from constrained_decoding.lazy_dfa import MAX_EXPANDED, LazyTokenDFA
from constrained_decoding.logprobs import plan_logprobs
from envs.pddl.generators import blocksworld
from envs.pddl.grammar import build_legal_grammar
from envs.pddl.grounding import ground
from envs.pddl.instances import shipped_domain
from envs.pddl.parsing import read_domain, read_problem
from envs.pddl.simulator import simulate
from envs.pddl.writing import problem_text
from rltf.planners.tokenizer import train_plan_tokenizer
from tests.tiny_models import tiny_t5

A, B, EOS, PAD = 5, 6, 2, 0
PROMPT = "stack a on b"
BW3 = """(define (problem bw-tiny)
  (:domain blocksworld-4ops)
  (:objects a b c)
  (:init (arm-empty) (on-table a) (on b a) (clear b) (on-table c) (clear c))
  (:goal (and (on a b) (on b c))))
"""


def chain(limit: int, calls: list, cap: int) -> LazyTokenDFA:
    """Rows ``A^n EOS`` and ``A^n B EOS`` for n <= limit (key n; ``B`` leads to ``("b", n)``)."""

    def successors(key):
        calls.append(key)
        if isinstance(key, tuple):
            return {EOS: "end"}
        return {EOS: "end", B: ("b", key), **({A: key + 1} if key < limit else {})}

    return LazyTokenDFA(successors, 0, "end", PAD, (A, B, EOS), 3, max_expanded=cap)


def test_a_long_walk_keeps_at_most_the_cap_and_walks_as_an_unbounded_grammar():
    calls, free_calls = [], []
    bounded, free = chain(5000, calls, cap=16), chain(5000, free_calls, cap=10 ** 9)
    assert MAX_EXPANDED >= 10_000 and free.max_expanded == 10 ** 9
    rng = random.Random(0)
    rows = [[A] * rng.randrange(0, 5000) + ([B] if rng.random() < 0.5 else []) + [EOS] for _ in range(12)]
    for row in rows:
        assert bounded.walk(bounded.root, row) == free.walk(free.root, row)  # same states, same edge slots
        assert bounded.cached <= 16
    assert free.cached > 4000  # (what the bound saves)
    assert bounded.expansions > free.expansions  # evicted states were expanded again when a row came back
    assert bounded.num_states == free.num_states  # every state keeps its number: a decode in flight stays valid
    with pytest.raises(ValueError, match="max_expanded must be >= 1"):
        chain(3, [], cap=0)


@pytest.fixture(scope="module")
def legal_setup():
    blocks = read_domain(shipped_domain("blocksworld"))
    three = ground(blocks, read_problem(blocks, text=BW3))
    seven = ground(blocks, read_problem(blocks, text=problem_text(blocksworld(blocks, 7, random.Random(5), "p7"),
                                                                  False)))
    tok = train_plan_tokenizer([BW3, PROMPT, " ".join(a.text for t in (three, seven) for a in t.actions)],
                               vocab_size=200, required=[])
    torch.manual_seed(0)
    return three, seven, tok, tiny_t5(tok, seed=1)


def test_the_legal_grammar_stays_bounded_on_a_long_random_walk(legal_setup):
    _, seven, tok, _ = legal_setup
    bounded, free = build_legal_grammar(tok, seven, 16, max_expanded=40), build_legal_grammar(tok, seven, 16)
    rng = random.Random(1)
    for _ in range(60):  # random executable plans of up to 16 actions: thousands of automaton states
        state, plan = seven.init, []
        for _ in range(rng.randrange(1, 17)):
            a = seven.actions[rng.choice(seven.applicable(state))]
            plan.append(a.text)
            state = (state & ~a.delete) | a.add
        ((root, row),) = bounded.rows_for(tuple(plan))
        assert bounded.dfa.walk(root, row) == free.dfa.walk(free.root, row)
        assert bounded.dfa.cached <= 40
    assert free.dfa.cached > 400 and bounded.dfa.num_states == free.dfa.num_states


def test_a_tiny_cap_keeps_the_legal_grammar_exact(legal_setup):
    three, _, tok, model = legal_setup
    g = build_legal_grammar(tok, three, 3, max_expanded=2)  # far fewer than the states every plan visits
    plans = list(g.enumerate())
    with torch.no_grad():
        p = plan_logprobs(model, tok, [PROMPT] * len(plans), [g] * len(plans), plans).exp()
    torch.testing.assert_close(float(p.sum()), 1.0, rtol=0.0, atol=1e-5 + len(plans) * 1.2e-7)
    assert g.dfa.cached <= 2 and g.expansions > g.dfa.num_states  # states were dropped and expanded again
    g6 = build_legal_grammar(tok, three, 6, max_expanded=3)
    (drawn,) = sample_plans(model, tok, [PROMPT], [g6], k=8, temperature=1.0, seed=3)
    with torch.no_grad():
        want = plan_logprobs(model, tok, [PROMPT] * len(drawn), [g6] * len(drawn), [d.plan for d in drawn])
    torch.testing.assert_close(torch.tensor([d.logprob for d in drawn]), want.float(), rtol=1e-5, atol=1e-5)
    assert all(simulate(three, list(d.plan)).valid for d in drawn) and g6.dfa.cached <= 3
