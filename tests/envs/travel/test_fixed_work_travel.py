"""Travel grammars are built once per (query content, tokenizer content) in a process (envs/travel/grammar_memo.py)."""

import copy
import gc
import weakref

import pytest

from envs.travel import grammar_memo
from envs.travel.env import TravelPlannerEnv
from envs.travel.grammar import build_travel_grammar
from rltf.planners.tokenizer import train_plan_tokenizer


@pytest.fixture(scope="module")
def env():
    return TravelPlannerEnv("all")


@pytest.fixture(scope="module")
def tok(env):
    texts = [q.query for q in env.queries()[:40]]
    return train_plan_tokenizer(texts, vocab_size=600, required=[])


@pytest.fixture
def builds(monkeypatch):
    """The queries whose grammar was built (not reused)."""
    built = []

    def counting(tokenizer, candidates, max_attractions=2):
        built.append(candidates.query_id)
        return build_travel_grammar(tokenizer, candidates, max_attractions)

    monkeypatch.setattr(grammar_memo, "build_travel_grammar", counting)
    grammar_memo.clear()
    return built


def another_env(env, **changes):
    """Another env of the same sandbox (an evaluation's, another arm's): its own grammar memo."""
    other = copy.copy(env)
    other._grammars = weakref.WeakKeyDictionary()
    other.__dict__.update(changes)
    return other


def _three_day(env, k=0):
    return [q for q in env.queries() if q.days == 3][k]


def test_a_second_env_and_a_reloaded_tokenizer_reuse_the_grammar(env, tok, builds):
    q = _three_day(env)
    g = env.grammar(tok, q)
    assert env.grammar(tok, q.id) is g and builds == [q.id]  # the env's own memo
    assert another_env(env).grammar(tok, q) is g
    reloaded = copy.deepcopy(tok)  # the same tokenizer content, another object
    assert env.grammar(reloaded, q) is g and builds == [q.id]


def test_other_content_builds_another_grammar(env, tok, builds):
    q, other = _three_day(env, 1), _three_day(env, 4)
    env = another_env(env)
    g = env.grammar(tok, q)
    assert env.grammar(tok, other) is not g
    other_tok = train_plan_tokenizer([x.query for x in env.queries()[40:80]], vocab_size=600, required=[])
    assert grammar_memo.tokenizer_key(other_tok) != grammar_memo.tokenizer_key(tok)
    g_other_tok = env.grammar(other_tok, q)
    assert g_other_tok is not g and g_other_tok.rows.tokens(0, 0) != g.rows.tokens(0, 0)
    narrow = another_env(env, max_attractions=1)
    assert narrow.grammar(tok, q).max_attractions == 1
    assert builds == [q.id, other.id, q.id, q.id]


def test_a_shared_grammar_is_the_one_built_cold(env, tok, builds):
    q = _three_day(env, 2)
    cold = build_travel_grammar(tok, env.candidates(q), env.max_attractions)
    shared = grammar_memo.shared_grammar(tok, env.candidates(q), env.max_attractions)
    assert shared.routes == cold.routes and shared.options == cold.options and shared.slots == cold.slots
    assert [shared.rows.tokens(0, h) for h in range(len(shared.routes))] == \
           [cold.rows.tokens(0, h) for h in range(len(cold.routes))]


def test_grammars_are_held_weakly(env, tok, builds):
    q = _three_day(env, 3)
    fresh = another_env(env)
    fresh.grammar(tok, q)
    del fresh
    gc.collect()
    another_env(env).grammar(tok, q)  # nobody held it: built again
    assert builds == [q.id, q.id]
