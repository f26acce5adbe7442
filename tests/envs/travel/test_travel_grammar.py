"""The travel plan grammar (envs/travel/grammar.py) under the constrained decoder.

Tiny random planners (T5 with a T5-style BPE, LLaMA with a byte-level BPE, both trained here on
the sandbox's names so entity strings encode to a few pieces): every plan the decoder can emit is
delivered, within the sandbox and complete; the solver's plans are in the grammar; Σ π_c = 1 over
every plan of a query whose candidates are cut down to a few hundred plans; the sampler reports
the teacher-forced scorer's log-probabilities.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from constrained_decoding.decode import beam_search_plans, sample_plans
from constrained_decoding.logprobs import plan_logprobs
from envs.travel.env import TravelPlannerEnv
from envs.travel.grammar import (
    PlanOutsideGrammar,
    build_travel_grammar,
    enumerate_routes,
    head_text,
    slot_text,
)
from envs.travel.plans import PlanParseError, parse_plan
from rltf.planners.tokenizer import train_plan_tokenizer
from tests.tiny_models import tiny_llama, tiny_t5

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LOGPROB_TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def env():
    return TravelPlannerEnv("all")


def sandbox_texts(env) -> list[str]:
    texts = [q.query for q in env.queries()]
    for q in env.queries()[::7]:
        c = env.candidates(q.id)
        for table in (c.restaurants, c.attractions, c.accommodations):
            for names in table.values():
                texts += names
        texts += [t for per_day in c.transport.values() for opts in per_day.values() for t in opts]
        texts += [head_text(r) for r in list(enumerate_routes(c))[:3]]
    texts += [slot_text(1, "from A to B", f, "-") for f in ("transportation", "breakfast", "lunch", "dinner",
                                                             "attraction", "accommodation")]
    return list(dict.fromkeys(texts))


def byte_bpe(texts: list[str], vocab_size: int = 1500) -> PreTrainedTokenizerFast:
    """Byte-level BPE with LLaMA's conventions (as tiny_models.bpe_tokenizer) on the sandbox's texts."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")


@pytest.fixture(scope="module")
def planners(env):
    texts = sandbox_texts(env)
    t5_tok = train_plan_tokenizer(texts, vocab_size=1500, required=[])
    llama_tok = byte_bpe(texts)
    return {"t5": (tiny_t5(t5_tok, seed=1), t5_tok), "llama": (tiny_llama(llama_tok, seed=2), llama_tok)}


def query_of(env, days: int, k: int = 0):
    return [q for q in env.queries() if q.days == days][k]


def small_candidates(env):
    """A 3-day, one-city trip over two possible cities, one restaurant / attraction / hotel per city and
    one transport option per leg and day: 2 routes x 256 plans."""
    q = query_of(env, 5)
    c = env.candidates(q.id)
    cities = [x for x in c.route_cities
              if 0 in c.transport.get((c.org, x), {}) and 2 in c.transport.get((x, c.org), {})][:2]
    assert len(cities) == 2
    keep = [c.org, *cities]
    first = lambda table: {city: table[city][:1] for city in cities} | {c.org: []}  # noqa: E731
    transport = {leg: {d: opts[:1] for d, opts in per_day.items() if d < 3}
                 for leg, per_day in c.transport.items() if set(leg) <= set(keep)}
    return dataclasses.replace(c, days=3, dates=c.dates[:3], visiting_city_number=1, route_cities=cities,
                               restaurants=first(c.restaurants), attractions=first(c.attractions),
                               accommodations=first(c.accommodations), transport=transport), q


# ------------------------------------------------------------------------------ the language
@pytest.mark.parametrize("days", [3, 5, 7])
def test_solver_plans_are_in_the_grammar(env, planners, days):
    _, tok = planners["t5"]
    for k in range(3):
        q = query_of(env, days, k)
        g = env.grammar(tok, q.id)
        ref = env.reference_plan(q.id)
        rows = g.rows_for(ref)
        assert rows[0][0] == g.root and [s for s, _ in rows[1:]] == list(g.branch_starts(rows[0][1]))
        plan = g.assemble(rows[0][1], [t for _, t in rows[1:]])
        assert plan == json.loads(ref) and g.format(plan) == ref


def test_rows_are_the_texts_tokenised_in_context(env, planners):
    _, tok = planners["t5"]
    q = query_of(env, 5)
    g = env.grammar(tok, q.id)
    rows = g.rows_for(env.reference_plan(q.id))
    head = g.rows.meaning(g.root, rows[0][1])
    enc = lambda s: tuple(tok(s, add_special_tokens=False)["input_ids"]) + (g.eos_id,)  # noqa: E731
    assert rows[0][1] == enc(head_text(g.routes[head]))
    plan = g.assemble(rows[0][1], [t for _, t in rows[1:]])
    for (d, f), (start, toks) in zip(g.slots[head], rows[1:]):
        assert toks == enc(slot_text(d, g.routes[head][d - 1], f, plan[d - 1][f]))
        prefix, _ = g.dfa.forced_prefix(start)  # the day, its city and the field are forced
        assert len(prefix) >= len(enc(slot_text(d, g.routes[head][d - 1], f, ""))) - 3


def test_enumeration_is_the_automatons_language(env, planners):
    _, tok = planners["t5"]
    c, _ = small_candidates(env)
    g = build_travel_grammar(tok, c)
    plans = list(g.enumerate())
    assert len(plans) == g.num_plans == 2 * 256 and len(g.routes) == 2
    texts = {g.format(p) for p in plans}
    assert len(texts) == len(plans)
    for p in plans[::17]:  # rows_for inverts assemble on every plan
        rows = g.rows_for(p)
        assert g.assemble(rows[0][1], [t for _, t in rows[1:]]) == p


def test_rows_for_rejects_plans_outside_the_grammar(env, planners):
    _, tok = planners["t5"]
    q = query_of(env, 3)
    g = env.grammar(tok, q.id)
    good = json.loads(env.reference_plan(q.id))

    def bad(day, field, value):
        p = [dict(u) for u in good]
        p[day - 1][field] = value
        return p

    other = next(c for c in env.index.city_state if c not in g.candidates.route_cities and c != q.org)
    for plan, why in [
        (bad(2, "lunch", "-"), "lunch"),  # a stay day needs its meals
        (bad(2, "dinner", f"Nowhere Diner, {g.routes[0][1]}"), "dinner"),  # not in the sandbox
        (bad(2, "current_city", other), "route"),
        (bad(3, "accommodation", good[1]["accommodation"]), "accommodation"),  # last day sleeps at home
        (good[:2], "day"),
    ]:
        with pytest.raises(PlanOutsideGrammar, match=why):
            g.rows_for(plan)
    with pytest.raises(PlanParseError):
        g.rows_for("not a plan")


def test_env_caches_one_grammar_per_tokenizer_and_query(env, planners):
    (_, t5_tok), (_, llama_tok) = planners["t5"], planners["llama"]
    q = query_of(env, 7)
    g = env.grammar(t5_tok, q.id)
    assert env.grammar(t5_tok, q) is g and env.grammar(t5_tok, q.query) is g
    assert env.grammar(llama_tok, q.id) is not g


# ----------------------------------------------------------------------- under the decoder
def scores(model, tok, prompt, g, plans, temperature=1.0):
    with torch.no_grad():
        return plan_logprobs(model, tok, [prompt] * len(plans), [g] * len(plans), plans, temperature)


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_probabilities_of_all_plans_sum_to_one(env, planners, name):
    model, tok = planners[name]
    c, q = small_candidates(env)
    g = build_travel_grammar(tok, c)
    p = scores(model, tok, q.query, g, list(g.enumerate())).exp()
    tol = 1e-5 + p.numel() * torch.finfo(torch.float32).eps
    torch.testing.assert_close(float(p.sum()), 1.0, rtol=0.0, atol=tol)
    assert float(p.min()) > 0 and float(p.max()) < 0.99  # a real distribution over many plans


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_sampled_plans_are_delivered_in_the_sandbox_and_complete(env, planners, name):
    model, tok = planners[name]
    qs = [query_of(env, 3, k) for k in (0, 1)]  # 3-day queries: the 7-day decodes took minutes here
    grammars = [env.grammar(tok, q.id) for q in qs]
    drawn = sample_plans(model, tok, [q.query for q in qs], grammars, k=3, seed=5)
    texts = set()
    for q, g, ds in zip(qs, grammars, drawn):
        for d in ds:
            assert parse_plan(d.text) == d.plan
            ev = env.reward_plans([(q.id, d.text)])[0].evaluation
            assert ev.delivered, ev.error
            for rule in ("within_sandbox", "complete_information", "within_current_city", "reasonable_city_route"):
                assert ev.commonsense[rule].passed, (rule, ev.commonsense[rule])
            assert ev.hard is not None  # judged: complete and within the sandbox
            texts.add(d.text)
    assert len(texts) == sum(len(ds) for ds in drawn)  # random planners: distinct plans


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_sampler_reports_the_scorers_log_probabilities(env, planners, name):
    model, tok = planners[name]
    q = query_of(env, 3, 1)
    g = env.grammar(tok, q.id)
    for temperature in (1.0, 0.7):
        drawn = sample_plans(model, tok, [q.query], [g], k=3, temperature=temperature, seed=3)[0]
        got = torch.tensor([d.logprob for d in drawn])
        torch.testing.assert_close(got, scores(model, tok, q.query, g, drawn, temperature).float(), **LOGPROB_TOL)
        # rebuilt from the plans themselves (rows_for), not the decoded rows
        want = scores(model, tok, q.query, g, [d.plan for d in drawn], temperature)
        torch.testing.assert_close(got, want.float(), **LOGPROB_TOL)


def test_beam_search_gives_valid_plans(env, planners):
    model, tok = planners["t5"]
    q = query_of(env, 3)
    g = env.grammar(tok, q.id)
    best = beam_search_plans(model, tok, [q.query], [g], num_beams=2, num_return=2)[0]
    assert len(best) == 2 and best[0].logprob >= best[1].logprob
    for d in best:
        ev = env.reward_plans([(q.id, d.text)])[0].evaluation
        assert (ev.delivered and ev.commonsense["within_sandbox"].passed
                and ev.commonsense["complete_information"].passed)
