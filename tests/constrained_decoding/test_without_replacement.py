"""Stochastic beam search over π_c (issue 37 items 1 and 3): K distinct plans per prompt, an exact
sample without replacement, for linear and branching grammars, on tiny T5 and LLaMA planners whose
plan sets are small enough to enumerate.

- the distribution of the drawn sets (χ² against the exact set probabilities) and of each plan's
  inclusion (a z-test per plan, Bonferroni over the plans);
- the threshold κ: the priority-sampling estimate Σ_S f(s)·p(s)/q_κ(s) averages to E[f];
- the sampler's log π_c equals the teacher-forced scorer's, at temperature 1 and not;
- fewer valid plans than K: all of them, and the draw says it is complete;
- the unordered-set estimator on these draws, through the model's parameters: its mean over many
  draws equals the exact ∇E[f] of the planner (every plan enumerated and back-propagated).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.without_replacement import sample_distinct_plans
from envs.openagi.grammar import plan_grammars
from envs.openagi.plans import PlanLimits, enumerate_plans
from envs.openagi.registry import IMAGE, TEXT
from rltf.algorithms.unordered_set import unordered_set_weights
from tests.rl.test_unordered_set import set_probability
from tests.tiny_models import bpe_tokenizer, small_registry, tiny_llama, tiny_t5, unigram_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REG = small_registry()
LIMITS = PlanLimits(max_tools=3, max_branch=2, max_tail=1)
LINEAR = ((IMAGE,), TEXT)  # 26 plans
NONLINEAR = ((IMAGE, TEXT), TEXT)  # 127 plans: a head row, then one row per input
PROMPTS = {LINEAR: "Given noisy blurry image, how to return the caption in English step by step?",
           NONLINEAR: "Given noisy image and clozed English query, how to answer the question in German step by step?"}


@functools.lru_cache(maxsize=None)
def planner(kind: str, seed: int = 1):
    if kind == "t5":
        tok = unigram_tokenizer()
        return tiny_t5(tok, seed=seed), tok
    tok = bpe_tokenizer()
    return tiny_llama(tok, seed=seed), tok


def setup(kind: str, sig, temperature: float = 1.0):
    model, tok = planner(kind)
    g = plan_grammars(tok, [sig], REG, LIMITS)[0]
    plans = list(enumerate_plans(REG, *sig, LIMITS))
    with torch.no_grad():
        lp = plan_logprobs(model, tok, [PROMPTS[sig]] * len(plans), [g] * len(plans), plans, temperature).double()
    p = lp.exp().numpy()
    assert abs(p.sum() - 1) < 1e-5  # the enumeration is every plan π_c gives mass to
    return model, tok, g, plans, p / p.sum()


def draws(model, tok, g, sig, k: int, n: int, temperature: float = 1.0, kind_seed: int = 0):
    """``n`` independent draws of ``k`` plans (batches of identical prompts, one seed per batch)."""
    out = []
    for seed in range(kind_seed, kind_seed + n // 250):
        out += sample_distinct_plans(model, tok, [PROMPTS[sig]] * 250, [g] * 250, k, temperature, seed=seed)
    return out


@pytest.mark.parametrize("kind", ["llama", "t5"])
def test_the_drawn_sets_follow_sampling_without_replacement(kind):
    """K = 2 over a linear grammar's 26 plans: the 325 sets' frequencies against their exact
    probabilities (χ² over sets expected 5+ times, the rest pooled)."""
    model, tok, g, plans, p = setup(kind, LINEAR)
    index = {g.format(x): i for i, x in enumerate(plans)}
    n = 2000
    counts: dict[tuple[int, int], int] = {}
    for d in draws(model, tok, g, LINEAR, 2, n):
        ids = tuple(sorted(index[x.text] for x in d.plans))
        assert len(set(ids)) == 2 and not d.complete
        counts[ids] = counts.get(ids, 0) + 1
    sets = list(itertools.combinations(range(len(plans)), 2))
    expected = np.array([set_probability(p, s) for s in sets]) * n
    observed = np.array([counts.get(s, 0) for s in sets])
    assert expected.sum() == pytest.approx(n)
    big = expected >= 5
    chi2 = (((observed[big] - expected[big]) ** 2) / expected[big]).sum()
    rest_o, rest_e = observed[~big].sum(), expected[~big].sum()
    chi2 += (rest_o - rest_e) ** 2 / rest_e
    assert stats.chi2.sf(chi2, big.sum()) > 1e-3, (chi2, big.sum())


def test_each_plan_of_a_branching_grammar_is_included_as_often_as_it_should_be():
    """K = 3 over the 127 plans of a two-input task (head row, then each branch row in turn): every
    plan's inclusion frequency against its exact inclusion probability (binomial test per plan,
    Bonferroni over the plans)."""
    model, tok, g, plans, p = setup("llama", NONLINEAR)
    index = {g.format(x): i for i, x in enumerate(plans)}
    n = 1000
    counts = np.zeros(len(plans))
    for d in draws(model, tok, g, NONLINEAR, 3, n):
        ids = [index[x.text] for x in d.plans]
        assert len(set(ids)) == 3
        counts[ids] += 1
    inclusion = np.zeros(len(plans))  # Σ over ordered draws of 3
    for i, j in itertools.permutations(range(len(plans)), 2):
        pij = p[i] * p[j] / (1 - p[i])
        left = 1 - p[i] - p[j]
        inclusion[i] += pij
        inclusion[j] += pij
        inclusion += pij * p / left  # the third: every other plan l
        inclusion[i] -= pij * p[i] / left
        inclusion[j] -= pij * p[j] / left
    assert inclusion.sum() == pytest.approx(3.0)
    worst = min(stats.binomtest(int(c), n, q).pvalue for c, q in zip(counts, inclusion))  # (exact: rare plans)
    assert worst * len(plans) > 1e-3, worst


def test_the_threshold_makes_priority_sampling_unbiased():
    """Σ_S f(s)·p(s)/q(s), q(s) = 1 − exp(−exp(log p(s) − κ)): its mean over draws is E[f]."""
    model, tok, g, plans, p = setup("llama", LINEAR)
    index = {g.format(x): i for i, x in enumerate(plans)}
    f = np.random.default_rng(0).random(len(plans))
    est = []
    for d in draws(model, tok, g, LINEAR, 3, 1500):
        q = np.exp(d.inclusion_logprobs())
        est.append(sum(p[index[x.text]] * f[index[x.text]] / qq for x, qq in zip(d.plans, q)))
        assert d.threshold < min(d.keys)
    est = np.array(est)
    assert abs(est.mean() - p @ f) < 4 * est.std() / np.sqrt(len(est))


@pytest.mark.parametrize("kind,sig,temperature", [("llama", LINEAR, 1.0), ("t5", NONLINEAR, 1.0),
                                                  ("llama", NONLINEAR, 0.7), ("t5", LINEAR, 1.6)])
def test_the_samplers_logprobs_are_the_scorers_and_draws_are_seeded(kind, sig, temperature):
    model, tok, g, plans, p = setup(kind, sig, temperature)
    index = {g.format(x): i for i, x in enumerate(plans)}
    got = sample_distinct_plans(model, tok, [PROMPTS[sig]] * 3, [g] * 3, 5, temperature, seed=4)
    again = sample_distinct_plans(model, tok, [PROMPTS[sig]] * 3, [g] * 3, 5, temperature, seed=4)
    assert [[x.text for x in d.plans] for d in got] == [[x.text for x in d.plans] for d in again]
    for d in got:
        assert len({x.text for x in d.plans}) == 5 and d.keys == sorted(d.keys, reverse=True)
        with torch.no_grad():
            scored = plan_logprobs(model, tok, [PROMPTS[sig]] * 5, [g] * 5, d.plans, temperature)
        np.testing.assert_allclose([x.logprob for x in d.plans], scored.numpy(), atol=2e-5)
        np.testing.assert_allclose([x.logprob for x in d.plans], np.log(p[[index[x.text] for x in d.plans]]),
                                   atol=2e-5)


def test_fewer_plans_than_k_gives_them_all_and_says_so():
    model, tok, g, plans, p = setup("llama", LINEAR)
    d = sample_distinct_plans(model, tok, [PROMPTS[LINEAR]], [g], 40, seed=0)[0]
    assert sorted(x.text for x in d.plans) == sorted(g.format(x) for x in plans)
    assert d.complete and d.inclusion_logprobs() == [0.0] * len(plans)
    assert sum(np.exp(x.logprob) for x in d.plans) == pytest.approx(1.0, abs=1e-5)
    exactly = sample_distinct_plans(model, tok, [PROMPTS[LINEAR]], [g], len(plans), seed=1)[0]
    assert exactly.complete and len(exactly.plans) == len(plans)
    assert not sample_distinct_plans(model, tok, [PROMPTS[LINEAR]], [g], len(plans) - 1, seed=1)[0].complete


def test_the_estimator_on_these_draws_is_the_planners_exact_gradient_on_average():
    """f fixed per plan; ∇E[f] of the tiny planner's parameters, exactly: Σ_plans f ∇π_c (every plan
    back-propagated). The unordered-set estimate Σ_S p·R(S, s)·(f − B)·∇log π_c(s) of every draw,
    projected on two fixed directions: its mean is the exact projection within 4 standard errors."""
    model, tok, g, plans, p = setup("llama", LINEAR)
    index = {g.format(x): i for i, x in enumerate(plans)}
    f = np.random.default_rng(1).random(len(plans))
    params = [q for q in model.parameters() if q.requires_grad]
    gen = torch.Generator().manual_seed(0)
    directions = [[torch.randn(q.shape, generator=gen) for q in params] for _ in range(2)]
    dlogp = np.zeros((len(plans), 2))  # ∇log π_c(plan) · direction, per plan
    model.eval()
    for i, plan in enumerate(plans):
        lp = plan_logprobs(model, tok, [PROMPTS[LINEAR]], [g], [plan])[0]
        grads = torch.autograd.grad(lp, params)
        dlogp[i] = [sum(float((gr * v).sum()) for gr, v in zip(grads, d)) for d in directions]
    exact = (p * (f - p @ f)) @ dlogp
    est = []
    for d in draws(model, tok, g, LINEAR, 4, 1000):
        ids = [index[x.text] for x in d.plans]
        w, b = unordered_set_weights(np.array([x.logprob for x in d.plans]), f[ids], d.complete)
        est.append((w * (f[ids] - b)) @ dlogp[ids])
    est = np.array(est)
    se = est.std(0) / np.sqrt(len(est))
    assert np.all(np.abs(est.mean(0) - exact) < 4 * se), (est.mean(0), exact, se)
    assert np.all(np.abs(exact) > 2 * se)  # (the check has power: the gradient is not lost in the noise)
