"""The ``legal`` grammar (only applicable actions; ``envs/pddl/grammar.py``) and the lazily expanded grammars
it needs (``constrained_decoding/lazy_dfa.py``, ``lazy_tables.py``): the decoder's exactness checks on a
tiny T5 and a tiny LLaMA, every decoded plan executable, and states expanded only as rows reach them."""

from __future__ import annotations

import random

import pytest
import torch

import envs
from constrained_decoding.decode import beam_search_plans, sample_plans
from constrained_decoding.lazy_tables import INITIAL_ROWS
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.tables import stack_tables
from constrained_decoding.without_replacement import sample_distinct_plans
from envs.checker import check_rltf_env
from envs.pddl.generators import blocksworld
from envs.pddl.grammar import GRAMMAR_KINDS, PlanOutsideGrammar, build_legal_grammar, build_syntax_grammar
from envs.pddl.grounding import ground, split_plan_text
from envs.pddl.parsing import read_problem
from envs.pddl.simulator import simulate
from envs.pddl.writing import problem_text
from rltf.config.loading import load_config
from rltf.evaluation.data_source import data_source
from rltf.planners.tokenizer import train_plan_tokenizer
from tests.envs.pddl.conftest import BW_PROBLEM
from tests.envs.pddl.test_pddl_env import byte_bpe
from tests.tiny_models import tiny_llama, tiny_t5

pytestmark = pytest.mark.usefixtures("one_torch_thread")
PROMPT = "stack a on b"


@pytest.fixture(scope="module")
def three(blocks):
    """``bw-tiny``: b on a, c on the table; 3 blocks, 30 ground actions."""
    return ground(blocks, read_problem(blocks, text=BW_PROBLEM))


@pytest.fixture(scope="module")
def seven(blocks):
    """Seven blocks: 37,633 simulator states with the arm empty alone (every one reachable)."""
    return ground(blocks, read_problem(blocks, text=problem_text(blocksworld(blocks, 7, random.Random(5), "p7"),
                                                                  False)))


def walk(task, n: int, rng: random.Random) -> tuple[str, ...]:
    """``n`` actions drawn uniformly among the applicable ones, in turn."""
    state, out = task.init, []
    for _ in range(n):
        a = task.actions[rng.choice(task.applicable(state))]
        out.append(a.text)
        state = (state & ~a.delete) | a.add
    return tuple(out)


@pytest.fixture(scope="module")
def planners(blocks, three, seven):
    """A tiny T5 and a tiny LLaMA, each taught (15 steps on random walks of 6 actions, through the legal
    grammar's scorer) to write plans longer than the empty one that random weights prefer."""
    texts = [BW_PROBLEM, PROMPT, " ".join(a.text for t in (three, seven) for a in t.actions)]
    t5_tok = train_plan_tokenizer(texts, vocab_size=200, required=[])
    llama_tok = byte_bpe(texts)
    out = {"t5": (tiny_t5(t5_tok, seed=1), t5_tok), "llama": (tiny_llama(llama_tok, seed=2), llama_tok)}
    rng = random.Random(0)
    for model, tok in out.values():
        grammars = [build_legal_grammar(tok, t, 32) for t in (three, seven)]
        plans = [(g, walk(g.task, 6, rng)) for g in grammars for _ in range(4)]
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        model.train()
        for _ in range(15):
            lp = plan_logprobs(model, tok, [PROMPT] * len(plans), [g for g, _ in plans], [p for _, p in plans])
            opt.zero_grad()
            (-lp.mean()).backward()
            opt.step()
        model.eval()
    return out


def executable(task, plans) -> list[bool]:
    return [simulate(task, list(p)).valid for p in plans]


def rows_of(g, state=None, prefix=()):
    """Every row of the lazy automaton, depth first through its edges (expanding as it goes)."""
    state = g.root if state is None else state
    if state == g.dfa.final:
        yield prefix
        return
    for tok, nxt in g.dfa.transitions[state].items():
        yield from rows_of(g, nxt, (*prefix, tok))


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_the_plans_are_the_executable_ones(three, planners, name):
    _, tok = planners[name]
    legal, syntax = build_legal_grammar(tok, three, 3), build_syntax_grammar(tok, three, 3)
    plans = list(legal.enumerate())
    want = [p for p, ok in zip(syntax.enumerate(), executable(three, syntax.enumerate())) if ok]
    assert sorted(plans) == sorted(want) and len(plans) < 1 + 30 + 30 ** 2 + 30 ** 3
    rows = list(rows_of(legal))  # the automaton's own language, walked through its lazy edges
    assert sorted(legal.assemble(r) for r in rows) == sorted(plans)
    for row in rows:  # a legal row is the syntax grammar's row of the same plan, token for token
        assert [(syntax.root, row)] == syntax.rows_for(legal.assemble(row))
        assert [(legal.root, row)] == legal.rows_for(legal.assemble(row))
    with pytest.raises(PlanOutsideGrammar, match=r"action 1 \(pick-up a\) is not applicable"):
        legal.rows_for("(pick-up a)")
    with pytest.raises(PlanOutsideGrammar, match="the grammar's cap is 3"):
        legal.rows_for("(unstack b a) (put-down b) (pick-up b) (put-down b)")


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_probabilities_of_all_plans_sum_to_one(three, planners, name):
    model, tok = planners[name]
    g = build_legal_grammar(tok, three, 3)
    plans = list(g.enumerate())
    with torch.no_grad():
        p = plan_logprobs(model, tok, [PROMPT] * len(plans), [g] * len(plans), plans).exp()
    torch.testing.assert_close(float(p.sum()), 1.0, rtol=0.0, atol=1e-5 + len(plans) * 1.2e-7)
    assert float(p.min()) > 0 and float(p.max()) < 0.9


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_the_sampler_reports_the_scorers_log_probabilities(three, planners, name):
    model, tok = planners[name]
    legal, syntax = build_legal_grammar(tok, three, 6), build_syntax_grammar(tok, three, 6)
    for temperature in (1.0, 0.7):  # a batch of a lazy and an eager grammar: both parts of the tables
        drawn = sample_plans(model, tok, [PROMPT, PROMPT], [legal, syntax], k=6, temperature=temperature, seed=3)
        for g, ds in zip((legal, syntax), drawn):
            got = torch.tensor([d.logprob for d in ds])
            with torch.no_grad():
                want = plan_logprobs(model, tok, [PROMPT] * len(ds), [g] * len(ds), [d.plan for d in ds], temperature)
            torch.testing.assert_close(got, want.float(), rtol=1e-5, atol=1e-5)
        assert all(executable(three, [d.plan for d in drawn[0]]))
        assert not all(executable(three, [d.plan for d in drawn[1]]))  # (the syntax grammar's are not)


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_beam_search_and_sampling_without_replacement(three, planners, name):
    model, tok = planners[name]
    g = build_legal_grammar(tok, three, 2)
    every = set(g.enumerate())
    found = beam_search_plans(model, tok, [PROMPT], [g], num_beams=4)[0]
    assert len({d.plan for d in found}) == 4 and {d.plan for d in found} <= every
    scores = [d.logprob for d in found]
    assert scores == sorted(scores, reverse=True)
    with torch.no_grad():
        want = plan_logprobs(model, tok, [PROMPT] * 4, [g] * 4, [d.plan for d in found])
    torch.testing.assert_close(torch.tensor(scores), want.float(), rtol=1e-5, atol=1e-5)
    drawn = sample_distinct_plans(model, tok, [PROMPT], [g], k=len(every) + 3, seed=1)[0]
    assert drawn.complete and {d.plan for d in drawn.plans} == every  # all of them, each once
    some = sample_distinct_plans(model, tok, [PROMPT], [g], k=5, seed=1)[0]
    assert not some.complete and len({d.plan for d in some.plans}) == 5 and {d.plan for d in some.plans} <= every


def test_states_are_expanded_lazily_and_cached(seven, planners):
    model, tok = planners["t5"]
    g = build_legal_grammar(tok, seven, 32)
    assert g.expansions == 0  # nothing before a row reaches it
    drawn = sample_plans(model, tok, [PROMPT], [g], k=4, seed=0)[0]
    assert all(executable(seven, [d.plan for d in drawn]))
    assert max(len(d.plan) for d in drawn) > 3
    first = g.expansions
    tokens = sum(len(r) for d in drawn for r in d.rows)
    assert 1 < first <= tokens + 1 < 37_633  # only the states the rows went through
    again = sample_plans(model, tok, [PROMPT], [g], k=4, seed=0)[0]
    assert [d.plan for d in again] == [d.plan for d in drawn] and g.expansions == first  # nothing new
    tables = stack_tables((g,), torch.device("cpu"))
    assert tables.lazy and INITIAL_ROWS < len(tables.final_host) <= g.dfa.num_states < 37_633  # (grown)


def test_the_kind_is_registered_and_shared_per_initial_state(blocks, three, planners):
    _, tok = planners["t5"]
    assert set(GRAMMAR_KINDS) == {"syntax", "legal"}
    other = ground(blocks, read_problem(blocks, text=BW_PROBLEM.replace("(on b a) (clear b)",
                                                                        "(on-table b) (clear b) (clear a)")))
    legal, syntax = GRAMMAR_KINDS["legal"], GRAMMAR_KINDS["syntax"]
    assert syntax.share_key(three) == syntax.share_key(other) and legal.share_key(three) != legal.share_key(other)
    g = legal.build(tok, other, 2)
    assert "(pick-up a)" in {p[0] for p in g.enumerate() if p} and not executable(three, [("(pick-up a)",)])[0]


def test_the_env_gives_each_initial_state_its_legal_grammar(planners):
    _, tok = planners["t5"]
    settings = {"name": "pddl", "pddl": {"grammar": "legal", "train_size": 8, "validation_size": 2,
                                         "test_size": 3, "test_long_size": 0, "max_plan_length": 12}}
    train = envs.make_train_and_held_out(settings)[0]
    check_rltf_env(train, tok)
    grammars = [train.grammar(tok, t) for t in train.tasks()]
    assert all(train.grammar(tok, t.id) is g for t, g in zip(train.tasks(), grammars))  # cached
    # tasks 1 and 7 have the same objects and initial-state bits (the true atoms come first) but not the same atoms
    assert train.instances[1].task.init == train.instances[7].task.init and grammars[0] is not grammars[6]
    for t, g in zip(train.tasks(), grammars):  # each task's own plan
        assert g.assemble(g.rows_for(t.reference_plan)[0][1]) == tuple(split_plan_text(t.reference_plan))


def test_results_name_the_grammar():
    for kind in GRAMMAR_KINDS:
        cfg = load_config(["env.name=pddl", f"env.pddl.grammar={kind}", "env.pddl.max_plan_length=12"])
        data = data_source(cfg.env, None, ["test"])
        assert data["grammar"] == kind and data["max_plan_length"] == 12
        assert f"; grammar {kind} (plans of at most 12 actions); evaluated: test" in data.line
