"""The constrained policy's diversity (issue 37 item 4, ``rltf/evaluation/diversity.py``): distinct plans
among seeded samples, the top plan's probability and the entropy of π_c, exact over an enumerated plan
set or estimated from the samples, and its place in the validation rows, the results and the plot."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from constrained_decoding.logprobs import plan_logprobs
from envs.openagi.grammar import plan_grammars
from envs.openagi.plans import PlanLimits, enumerate_plans, format_plan
from envs.openagi.registry import IMAGE, TEXT
from rltf.evaluation.diversity import (
    DIVERSITY_KEYS,
    PREFIX,
    Diversity,
    TaskDiversity,
    diversity_curve,
    diversity_results,
    policy_diversity,
)
from rltf.rl.training_state import VALIDATION_SCORE
from rltf.run.tracking import plot_rewards
from tests.tiny_models import bpe_tokenizer, small_registry, tiny_llama, tiny_t5, unigram_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REG = small_registry()
LIMITS = PlanLimits(max_tools=3, max_branch=2, max_tail=1)
LINEAR, TEXT_TEXT, NONLINEAR = ((IMAGE,), TEXT), ((TEXT,), TEXT), ((IMAGE, TEXT), TEXT)  # 26, 4 and 127 plans
PROMPTS = {
    LINEAR: "Given noisy blurry image, how to return the caption in English step by step?",
    TEXT_TEXT: "Given clozed English text, how to translate the text in German step by step?",
    NONLINEAR: "Given noisy image and clozed English query, how to answer the question in German step by step?",
}
SIGS = (LINEAR, TEXT_TEXT, NONLINEAR)


def planner(kind: str = "t5", seed: int = 0):
    if kind == "t5":
        tok = unigram_tokenizer()
        return tiny_t5(tok, seed=seed, init=4.0), tok  # sharp logits: far from uniform
    tok = bpe_tokenizer()
    return tiny_llama(tok, seed=seed, init=0.5), tok


def grammars(tok, sigs=SIGS):
    return plan_grammars(tok, list(sigs), REG, LIMITS)


def exact_by_hand(model, tok, sig, temperature: float = 1.0) -> np.ndarray:
    """π_c of every plan of ``sig`` (enumerated by the plan syntax, not the grammar), teacher-forced."""
    plans = list(enumerate_plans(REG, *sig, LIMITS))
    with torch.no_grad():
        lp = plan_logprobs(model, tok, [PROMPTS[sig]] * len(plans), grammars(tok, [sig] * len(plans)), plans,
                           temperature)
    return np.exp(lp.double().numpy()), plans


@pytest.mark.parametrize("kind", ["t5", "llama"])
def test_the_exact_entropy_is_minus_sum_p_log_p_over_every_plan(kind):
    model, tok = planner(kind)
    div = policy_diversity(model, tok, [PROMPTS[s] for s in SIGS], grammars(tok), samples=8, max_plans=200)
    for sig, t in zip(SIGS, div.tasks):
        p, plans = exact_by_hand(model, tok, sig)
        assert abs(p.sum() - 1.0) < 1e-5  # π_c is normalised over the valid plans
        assert t.exact and t.plan_count == len(plans) and t.entropy_se == 0.0
        assert t.entropy == pytest.approx(float(-(p * np.log(p)).sum()), rel=1e-5, abs=1e-6)  # (float32, batched apart)
        assert t.top_plan_prob == pytest.approx(float(p.max()), rel=1e-5)
        assert t.top_plan == format_plan(plans[int(np.argmax(p))])
        assert 0.0 <= t.entropy <= math.log(len(plans)) + 1e-9
    assert div.means()["entropy_exact_share"] == 1.0


def test_a_uniform_token_policy_has_the_entropy_of_its_grammar_walks():
    """All logits equal: π_c picks uniformly among a state's allowed tokens, so π_c(plan) is the product
    of 1/|allowed| along the plan's rows, computed here from the grammar's automaton alone (no model)."""
    model, tok = planner("t5")
    with torch.no_grad():
        model.lm_head.weight.zero_()
    gs = grammars(tok)
    div = policy_diversity(model, tok, [PROMPTS[s] for s in SIGS], gs, samples=64, max_plans=200)
    for sig, g, t in zip(SIGS, gs, div.tasks):
        logp = []
        for plan in enumerate_plans(REG, *sig, LIMITS):
            lp = 0.0
            for start, tokens in g.rows_for(plan):
                state = start
                for token in tokens:
                    lp -= math.log(len(g.dfa.transitions[state]))
                    state = g.dfa.transitions[state][token]
            logp.append(lp)
        p = np.exp(logp)
        assert p.sum() == pytest.approx(1.0, abs=1e-9)
        assert t.entropy == pytest.approx(float(-(p * np.log(p)).sum()), abs=1e-4)
        assert t.top_plan_prob == pytest.approx(float(p.max()), abs=1e-5)
        # near-uniform: 64 draws see most of a small plan set
        assert t.distinct_plans >= min(len(p), 64) // 2


@pytest.mark.parametrize("samples", [1, 3, 64])
def test_distinct_plans_are_bounded_by_the_samples_and_the_plan_set(samples):
    model, tok = planner("t5")
    with torch.no_grad():
        model.lm_head.weight.mul_(0.05)  # flatter: many plans get drawn
    div = policy_diversity(model, tok, [PROMPTS[s] for s in SIGS], grammars(tok), samples=samples, max_plans=200)
    for t in div.tasks:
        assert 1 <= t.distinct_plans <= min(samples, t.plan_count) and t.samples == samples
    text_text = div.tasks[1]  # 4 plans, 64 draws of a flat policy: all of them
    assert text_text.plan_count == 4 and (samples < 64 or text_text.distinct_plans == 4)


def test_the_estimate_agrees_with_the_exact_entropy_within_its_standard_error():
    model, tok = planner("t5", seed=1)
    with torch.no_grad():
        model.lm_head.weight.mul_(0.3)  # every task uncertain, none uniform
    prompts, gs = [PROMPTS[s] for s in SIGS], grammars(tok)
    exact = policy_diversity(model, tok, prompts, gs, samples=16, max_plans=200)
    est = policy_diversity(model, tok, prompts, gs, samples=400, max_plans=0, num_beams=32)
    for e, x in zip(exact.tasks, est.tasks):
        assert e.exact and not x.exact and x.plan_count is None and x.entropy_se > 0
        assert abs(x.entropy - e.entropy) <= 4 * x.entropy_se + 1e-3, (x.entropy, e.entropy, x.entropy_se)
        # a wide beam finds the mode; the estimate's top plan is never above the true one
        assert x.top_plan_prob <= e.top_plan_prob * (1 + 1e-5)
        assert x.top_plan_prob == pytest.approx(e.top_plan_prob, rel=1e-5) and x.top_plan == e.top_plan
    m = est.means()
    assert m["entropy_exact_share"] == 0.0
    assert m["entropy_se"] == pytest.approx(math.sqrt(sum(t.entropy_se ** 2 for t in est.tasks)) / 3)


def test_the_plan_set_cap_decides_exact_or_estimated_per_task():
    model, tok = planner("t5")
    div = policy_diversity(model, tok, [PROMPTS[s] for s in SIGS], grammars(tok), samples=8, max_plans=26)
    assert [t.exact for t in div.tasks] == [True, True, False]  # 26, 4 plans enumerated; 127 not
    assert [t.plan_count for t in div.tasks] == [26, 4, None]
    assert div.means()["entropy_exact_share"] == pytest.approx(2 / 3)


def test_draws_are_seeded_per_task_and_leave_the_global_rngs_alone():
    model, tok = planner("t5")
    with torch.no_grad():
        model.lm_head.weight.mul_(0.05)
    prompts, gs = [PROMPTS[s] for s in SIGS], grammars(tok)
    states = torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()
    a = policy_diversity(model, tok, prompts, gs, samples=16, keys=[7, 8, 9], max_plans=0, seed=3)
    assert torch.equal(torch.get_rng_state(), states[0])
    assert np.array_equal(np.random.get_state()[1], states[1]) and random.getstate() == states[2]
    assert a == policy_diversity(model, tok, prompts, gs, samples=16, keys=[7, 8, 9], max_plans=0, seed=3)
    # a task's draws depend on (seed, its key) only, not on the tasks decoded with it
    alone = policy_diversity(model, tok, prompts[2:], gs[2:], samples=16, keys=[9], max_plans=0, seed=3)
    same, t = alone.tasks[0], a.tasks[2]  # the same plans drawn (log-probs: float32 in another batch)
    assert (same.distinct_plans, same.top_plan, same.key) == (t.distinct_plans, t.top_plan, 9)
    assert same.entropy == pytest.approx(t.entropy, rel=1e-5)
    other = policy_diversity(model, tok, prompts, gs, samples=16, keys=[7, 8, 9], max_plans=0, seed=4)
    assert [t.entropy for t in other.tasks] != [t.entropy for t in a.tasks]
    assert model.training is False


def test_at_another_temperature_exact_and_estimated_top_plans_agree():
    model, tok = planner("t5", seed=2)
    prompts, gs = [PROMPTS[s] for s in SIGS], grammars(tok)
    exact = policy_diversity(model, tok, prompts, gs, samples=8, max_plans=200, temperature=0.5)
    est = policy_diversity(model, tok, prompts, gs, samples=8, max_plans=0, num_beams=64, temperature=0.5)
    for sig, e, x in zip(SIGS, exact.tasks, est.tasks):
        p, _ = exact_by_hand(model, tok, sig, temperature=0.5)
        assert e.top_plan_prob == pytest.approx(float(p.max()), rel=1e-5)
        assert e.entropy == pytest.approx(float(-(p * np.log(p)).sum()), rel=1e-5, abs=1e-6)
        assert x.top_plan_prob == pytest.approx(e.top_plan_prob, rel=1e-5) and x.top_plan == e.top_plan


def test_an_enumeration_that_misses_plans_falls_back_to_the_estimate(monkeypatch):
    from rltf.evaluation import diversity  # (to cut its enumeration short)

    model, tok = planner("t5")
    with torch.no_grad():
        model.lm_head.weight.mul_(0.3)  # no plan near 0 or 1
    monkeypatch.setattr(diversity, "enumerated_plans", lambda g, n: list(g.enumerate())[::2])  # half of them
    with pytest.warns(RuntimeWarning, match="the enumeration misses plans"):
        div = policy_diversity(model, tok, [PROMPTS[LINEAR]], grammars(tok, [LINEAR]), samples=8, max_plans=200)
    assert not div.tasks[0].exact and div.tasks[0].plan_count is None and div.tasks[0].entropy_se >= 0


def _task(key, distinct, top, entropy, se, exact):
    return TaskDiversity(key, 16, distinct, top, entropy, se, exact, 4 if exact else None, "A")


def test_means_rows_curve_results_and_the_plot(tmp_path):
    div = Diversity((_task(1, 2, 0.9, 0.3, 0.0, True), _task(2, 4, 0.5, 1.1, 0.2, False)))
    m = div.means()
    assert set(m) == set(DIVERSITY_KEYS)
    assert m == pytest.approx({"distinct_plans": 3.0, "top_plan_prob": 0.7, "entropy": 0.7, "entropy_se": 0.1,
                               "entropy_exact_share": 0.5})
    assert div.row() == {PREFIX + k: v for k, v in m.items()} and Diversity(()).means() == {}
    validation = [{"step": 0, VALIDATION_SCORE: 0.5, **div.row()}, {"step": 5, VALIDATION_SCORE: 0.6}]
    curve = diversity_curve(validation)
    assert curve == [{"step": 0, **m}]
    found, md = diversity_results(validation, div, 16)
    assert found["policy_diversity"]["curve"] == curve and found["policy_diversity"]["samples"] == 16
    assert found["policy_diversity"]["last"]["tasks"][1]["entropy_se"] == 0.2
    assert "## Policy diversity" in md and "| 0 | 3.00 | 0.700 | 0.700 ± 0.100 | 0.50 |" in md
    assert diversity_results([{"step": 0, VALIDATION_SCORE: 0.5}], None, 16) == ({}, "")
    # rewards.png: a second panel (a taller figure) when there is a diversity curve
    import matplotlib.image  # (a test of the plot only)

    history = [{"step": s, "train/reward": 0.1 * s} for s in range(1, 6)]
    plain = plot_rewards(history, tmp_path / "plain.png", validation=validation)
    both = plot_rewards(history, tmp_path / "both.png", validation=validation, diversity=curve)
    assert matplotlib.image.imread(plain).shape[0] == 480 and matplotlib.image.imread(both).shape[0] == 840


@pytest.mark.slow
def test_the_main_job_logs_plots_and_writes_diversity_without_changing_training(tmp_path):
    import json  # (the slow end-to-end test only)

    from rltf.config.loading import load_config
    from tests.stages.test_main_job import TINY, _run_printing
    from train.rltf import run

    def job(name, *extra):
        args = [f"output_dir={tmp_path}", f"run_name={name}", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY,
                "eval.schemas=[finetuned,rltf]", "rltf.k_samples=4", *extra]
        summary, out = _run_printing(run, load_config(args))
        return summary, out, json.loads((tmp_path / name / "rltf_history.json").read_text())

    on, out_on, hist_on = job("with", "eval.diversity_samples=6", "eval.diversity_max_plans=100")
    off, out_off, hist_off = job("without", "eval.diversity_samples=0")
    assert out_on[-1] == out_off[-1] and on["table"] == off["table"]  # the same training and evaluation
    keys = [PREFIX + k for k in DIVERSITY_KEYS]
    for a, b in zip(hist_on, hist_off):  # the same step rows, plus the validation's diversity
        assert {k: v for k, v in a.items() if k not in keys and k != "train/plans_per_s"} == \
            {k: v for k, v in b.items() if k != "train/plans_per_s"}  # (a timing)
        assert set(keys) <= set(a) and not set(keys) & set(b)
        assert 1 <= a[PREFIX + "distinct_plans"] <= 6 and 0 < a[PREFIX + "top_plan_prob"] <= 1
    found = on["policy_diversity"]
    assert [r["step"] for r in found["curve"]] == [0, 1, 2] and found["samples"] == 6
    assert found["curve"][-1] == {"step": 2, **found["last"]["means"]} and found["last"]["tasks"]
    assert all(set(r) >= set(keys) for r in on["rltf_selection"]["validation"])
    assert "policy_diversity" not in off and "## Policy diversity" in (tmp_path / "with" / "results.md").read_text()
    assert "## Policy diversity" not in (tmp_path / "without" / "results.md").read_text()
