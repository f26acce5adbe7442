"""Constrained sampling, beam search and the teacher-forced scorer agree on one distribution π_c.

Tiny random planners (T5 with a Unigram tokenizer, LLaMA with a byte-level BPE, T5 with MiniLM's
WordPiece vocabulary, and PEFT-LoRA-wrapped versions) over a small registry whose plans can all
be enumerated.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
from scipy import stats

from constrained_decoding import runner as runner_mod
from constrained_decoding.decode import beam_search_plans, greedy_plans, sample_plans
from constrained_decoding.logprobs import plan_logprobs
from envs.openagi.grammar import plan_grammars
from envs.openagi.plans import PlanLimits, check_plan, enumerate_plans, format_plan, parse_plan
from envs.openagi.registry import IMAGE, TEXT
from tests.tiny_models import (
    bpe_tokenizer,
    small_registry,
    tiny_llama,
    tiny_t5,
    unigram_tokenizer,
    with_lora,
    wordpiece_tokenizer,
)

REG = small_registry()
LIMITS = PlanLimits(max_tools=3, max_branch=2, max_tail=1)
LINEAR = ((IMAGE,), TEXT)
NONLINEAR = ((IMAGE, TEXT), TEXT)
PROMPT = {
    LINEAR: "Given noisy blurry image, how to return the caption in English step by step?",
    NONLINEAR: "Given noisy image and clozed English query, how to answer the question in German step by step?",
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


PLANNERS = {
    "t5-unigram": lambda: (tiny_t5(unigram_tokenizer(), seed=1), unigram_tokenizer()),
    "llama-bpe": lambda: (tiny_llama(bpe_tokenizer(), seed=2), bpe_tokenizer()),
    "t5-wordpiece": lambda: (tiny_t5(wordpiece_tokenizer(), seed=3), wordpiece_tokenizer()),
    "lora-t5": lambda: (with_lora(tiny_t5(unigram_tokenizer(), seed=4), seed=5), unigram_tokenizer()),
    "lora-llama": lambda: (with_lora(tiny_llama(bpe_tokenizer(), seed=6), seed=7), bpe_tokenizer()),
}
_BUILT: dict[str, tuple] = {}


def planner(name: str):
    if name not in _BUILT:
        _BUILT[name] = PLANNERS[name]()
    return _BUILT[name]


def all_plans(sig):
    return list(enumerate_plans(REG, *sig, LIMITS))


# Tolerances. The paths compared (incremental decoding with a KV cache, teacher forcing, the full
# vocabulary or the model's own forward) run the same maths with other reduction orders, which vary
# with the CPU's vector width and the thread count, so float32 results agree to a relative ~1e-6,
# not bitwise. A log-probability adds one log-softmax per token, each off by a few ulps of the
# logits: rtol for long plans, atol for log-probabilities near 0 (forced tokens).
LOGPROB_TOL = dict(rtol=1e-5, atol=1e-5)
FEATURE_TOL = dict(rtol=1e-5, atol=2e-5)  # features are O(1) (|x| <= ~4 here)


def assert_sums_to_one(p: torch.Tensor) -> None:
    """Σ p over every valid plan is 1: each p_i is off by its log-probability's error (≤ ~1e-5
    relative, so ≤ ~1e-5 in the sum) and the float32 sum of n terms by up to n roundings."""
    tol = 1e-5 + p.numel() * torch.finfo(torch.float32).eps
    torch.testing.assert_close(float(p.sum()), 1.0, rtol=0.0, atol=tol)


def scores(model, tok, sig, plans, temperature=1.0, head="auto"):
    with torch.no_grad():
        return plan_logprobs(model, tok, [PROMPT[sig]] * len(plans),
                             plan_grammars(tok, [sig] * len(plans), REG, LIMITS), plans, temperature, head=head)


@pytest.mark.parametrize("name", PLANNERS)
@pytest.mark.parametrize("sig", [LINEAR, NONLINEAR], ids=["linear", "nonlinear"])
def test_probabilities_of_all_valid_plans_sum_to_one(name, sig):
    model, tok = planner(name)
    plans = all_plans(sig)
    p = scores(model, tok, sig, plans).exp()
    assert_sums_to_one(p)
    assert float(p.min()) > 0 and float(p.max()) < 0.9  # a real distribution over many plans
    p_hot = scores(model, tok, sig, plans, temperature=0.5).exp()
    assert_sums_to_one(p_hot)
    assert float(p_hot.max()) > float(p.max())


@pytest.mark.parametrize("name", PLANNERS)
@pytest.mark.parametrize("sig", [LINEAR, NONLINEAR], ids=["linear", "nonlinear"])
def test_sampler_reports_the_scorers_log_probabilities(name, sig):
    model, tok = planner(name)
    for temperature in (1.0, 0.7):
        drawn = sample_plans(model, tok, [PROMPT[sig]], plan_grammars(tok, [sig], REG, LIMITS),
                             k=24, temperature=temperature, seed=11)[0]
        assert len(drawn) == 24
        want = scores(model, tok, sig, [d.plan for d in drawn], temperature)
        got = torch.tensor([d.logprob for d in drawn])
        torch.testing.assert_close(got, want.float(), **LOGPROB_TOL)
        for d in drawn:
            assert d.text == format_plan(d.plan)
            check_plan(parse_plan(d.text, REG), REG, *sig, LIMITS)
            assert len(d.rows) == (1 if sig == LINEAR else 3)


@pytest.mark.parametrize("name,sig", [("t5-unigram", NONLINEAR), ("llama-bpe", LINEAR), ("lora-llama", NONLINEAR)])
def test_sample_frequencies_match_scored_probabilities(name, sig):
    model, tok = planner(name)
    plans = all_plans(sig)
    p = scores(model, tok, sig, plans).exp().double().numpy()
    n = 3000
    drawn = sample_plans(model, tok, [PROMPT[sig]], plan_grammars(tok, [sig], REG, LIMITS), k=n, seed=123)[0]
    counts = collections.Counter(d.plan for d in drawn)
    assert set(counts) <= set(plans)
    observed = np.array([counts[q] for q in plans], dtype=float)
    expected = p * n
    big = expected >= 5  # pool the rare plans into one bin for the chi-square test
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-3
    assert 0.5 * np.abs(observed / n - p).sum() < 0.08  # total variation


def test_sampling_is_seeded():
    model, tok = planner("llama-bpe")
    def run(seed):
        return [d.text for d in sample_plans(model, tok, [PROMPT[NONLINEAR]],
                                             plan_grammars(tok, [NONLINEAR], REG, LIMITS), k=16, seed=seed)[0]]

    assert run(5) == run(5)
    assert run(5) != run(6)


@pytest.mark.parametrize("name", ["t5-unigram", "llama-bpe", "lora-t5"])
@pytest.mark.parametrize("sig", [LINEAR, NONLINEAR], ids=["linear", "nonlinear"])
def test_beam_search_returns_valid_distinct_plans_best_first(name, sig):
    model, tok = planner(name)
    res = beam_search_plans(model, tok, [PROMPT[sig]], plan_grammars(tok, [sig], REG, LIMITS), num_beams=8)[0]
    assert 1 <= len(res) <= 8
    texts = [r.text for r in res]
    assert len(set(texts)) == len(texts)
    lps = [r.logprob for r in res]
    assert lps == sorted(lps, reverse=True)
    for r in res:
        check_plan(parse_plan(r.text, REG), REG, *sig, LIMITS)
    want = scores(model, tok, sig, [r.plan for r in res])
    torch.testing.assert_close(torch.tensor(lps), want.float(), **LOGPROB_TOL)


@pytest.mark.parametrize("name", ["t5-wordpiece", "lora-llama"])
@pytest.mark.parametrize("sig", [LINEAR, NONLINEAR], ids=["linear", "nonlinear"])
def test_wide_beam_search_finds_the_exact_best_plans(name, sig):
    model, tok = planner(name)
    plans = all_plans(sig)
    lp = scores(model, tok, sig, plans)
    exact = [format_plan(plans[i]) for i in torch.argsort(lp, descending=True)[:5].tolist()]
    res = beam_search_plans(model, tok, [PROMPT[sig]], plan_grammars(tok, [sig], REG, LIMITS),
                            num_beams=256, num_return=5, branch_beams=16)[0]
    assert [r.text for r in res] == exact
    greedy = greedy_plans(model, tok, [PROMPT[sig]], plan_grammars(tok, [sig], REG, LIMITS))[0]
    assert greedy.text in {format_plan(p) for p in plans}
    torch.testing.assert_close(greedy.logprob, float(lp[[format_plan(p) for p in plans].index(greedy.text)]),
                               **LOGPROB_TOL)


def test_mixed_batch_of_linear_and_nonlinear_tasks():
    model, tok = planner("t5-unigram")
    sigs = [LINEAR, NONLINEAR, ((TEXT, TEXT), TEXT), LINEAR]
    prompts = [PROMPT[LINEAR], PROMPT[NONLINEAR], "Given clozed English document and clozed English query, "
               "how to answer the question in English step by step?", "Given blurry image, how to return the class"
               " label in English step by step?"]
    drawn = sample_plans(model, tok, prompts, plan_grammars(tok, sigs, REG, LIMITS), k=5, seed=3)
    beams = beam_search_plans(model, tok, prompts, plan_grammars(tok, sigs, REG, LIMITS), num_beams=4)
    flat = [(p, s, d) for p, s, ds in zip(prompts, sigs, drawn) for d in ds]
    flat += [(p, s, d) for p, s, ds in zip(prompts, sigs, beams) for d in ds]
    for _, s, d in flat:
        check_plan(d.plan, REG, *s, LIMITS)
    with torch.no_grad():
        want = plan_logprobs(model, tok, [p for p, _, _ in flat],
                             plan_grammars(tok, [s for _, s, _ in flat], REG, LIMITS), [d.text for _, _, d in flat])
    torch.testing.assert_close(torch.tensor([d.logprob for _, _, d in flat]), want, **LOGPROB_TOL)


def test_scorer_is_differentiable_and_trains_only_lora_weights():
    model, tok = planner("lora-t5")
    plans = all_plans(NONLINEAR)[:6]
    lp = plan_logprobs(model, tok, [PROMPT[NONLINEAR]] * 6, plan_grammars(tok, [NONLINEAR] * 6, REG, LIMITS), plans)
    assert lp.requires_grad
    model.zero_grad()
    (-lp.sum()).backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    assert grads and all("lora_" in n for n in grads)
    assert any(g is not None and float(g.abs().sum()) > 0 for g in grads.values())
    model.zero_grad()


def test_full_vocabulary_path_gives_the_same_numbers():
    """Models whose logits are not body x output matrix fall back to the full forward: same results."""
    model, tok = planner("llama-bpe")
    plans = all_plans(NONLINEAR)
    grammars = plan_grammars(tok, [NONLINEAR], REG, LIMITS)
    fast = scores(model, tok, NONLINEAR, plans)
    fast_drawn = sample_plans(model, tok, [PROMPT[NONLINEAR]], grammars, k=8)[0]
    slow = scores(model, tok, NONLINEAR, plans, head="full")
    slow_drawn = sample_plans(model, tok, [PROMPT[NONLINEAR]], grammars, k=8, head="full")[0]
    torch.testing.assert_close(fast, slow, **LOGPROB_TOL)
    assert [d.text for d in fast_drawn] == [d.text for d in slow_drawn]


@pytest.mark.parametrize("name", ["t5-unigram", "llama-bpe", "lora-t5", "lora-llama"])
@pytest.mark.parametrize("sig", [LINEAR, NONLINEAR], ids=["linear", "nonlinear"])
def test_scoring_through_the_models_own_forward_gives_the_same_numbers(name, sig):
    """The FSDP path (one call of the wrapper's ``forward``, full logits) equals the sub-module path,
    gradients included."""
    model, tok = planner(name)
    plans = all_plans(sig)[:12]
    n = len(plans)
    model.eval()
    grammars = plan_grammars(tok, [sig] * n, REG, LIMITS)
    sub = plan_logprobs(model, tok, [PROMPT[sig]] * n, grammars, plans, temperature=0.7)
    top = plan_logprobs(model, tok, [PROMPT[sig]] * n, grammars, plans, through_forward=True, temperature=0.7)
    torch.testing.assert_close(sub, top, **LOGPROB_TOL)
    params = [p for p in model.parameters() if p.requires_grad]
    g_sub = torch.autograd.grad(sub.sum(), params, allow_unused=True)
    g_top = torch.autograd.grad(top.sum(), params, allow_unused=True)
    for a, b in zip(g_sub, g_top):
        if a is None or b is None:
            assert (a is None or not a.abs().sum()) and (b is None or not b.abs().sum())
        else:  # gradients reach ~1e2 here: elementwise rtol, and for the entries near 0 (sums of
            # large terms that cancel) an atol relative to the gradient's norm
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6 * max(float(a.norm()), float(b.norm())))


def test_lora_on_the_output_layer_is_detected():
    from peft import LoraConfig, get_peft_model

    tok = bpe_tokenizer()
    torch.manual_seed(0)
    model = get_peft_model(tiny_llama(tok, seed=8), LoraConfig(r=2, target_modules=["lm_head", "q_proj"],
                                                               init_lora_weights=False)).eval()
    r = runner_mod.PlannerRunner(model, tok, ["x"], pad_id=tok.pad_token_id)
    assert not r.restricted
    p = scores(model, tok, LINEAR, all_plans(LINEAR)).exp()
    assert_sums_to_one(p)


def test_decoding_restores_training_mode_and_checks_arguments():
    model, tok = planner("t5-unigram")
    model.train()
    try:
        sample_plans(model, tok, [PROMPT[LINEAR]], plan_grammars(tok, [LINEAR], REG, LIMITS), k=2)
        assert model.training
    finally:
        model.eval()
    with pytest.raises(ValueError, match="temperature"):
        sample_plans(model, tok, [PROMPT[LINEAR]], plan_grammars(tok, [LINEAR], REG, LIMITS), temperature=0)
    with pytest.raises(ValueError, match="one per prompt"):
        sample_plans(model, tok, [PROMPT[LINEAR]], plan_grammars(tok, [LINEAR, LINEAR], REG, LIMITS))
    with pytest.raises(Exception) as e:
        scores(model, tok, LINEAR, ["Fill Mask"])
    assert getattr(e.value, "reason", None) == "bad_start"


def test_no_default_grammar_the_env_supplies_it():
    """No silent default (OpenAGI's 15 tools): a signature is not a grammar; the env's grammar plans
    with the env's own registry and limits."""
    from tests.toy_env import toy_env

    model, tok = planner("t5-unigram")
    with pytest.raises(TypeError, match="env.grammar"):
        greedy_plans(model, tok, [PROMPT[LINEAR]], [LINEAR])
    env = toy_env()
    tasks = env.tasks()[:3]
    grammars = [env.grammar(tok, t) for t in tasks]
    assert grammars == [env.grammar(tok, t.id) for t in tasks]  # cached: the same objects
    for t, d in zip(tasks, greedy_plans(model, tok, [t.description for t in tasks], grammars)):
        check_plan(d.plan, env.registry, t.inputs, t.target, env.limits)
        assert env.reward_plans([(t, d.plan)])[0].valid


@pytest.mark.parametrize("name", ["llama-bpe", "t5-unigram"])
@pytest.mark.parametrize("share_prompts", [True, False])
def test_cached_prefill_matches_teacher_forcing(name, share_prompts):
    """Left-padded prefill (with and without the shared prompt cache) then steps == one teacher-forced pass."""
    model, tok = planner(name)
    r = runner_mod.PlannerRunner(model, tok, [PROMPT[LINEAR], PROMPT[NONLINEAR]], pad_id=tok.pad_token_id)
    if not share_prompts and not r.encoder_decoder:
        r.prompt_ids[0] = r.prompt_ids[0][-1:]  # a one-token prompt: nothing to share, whole-row prefill
    rows = [[5, 6, 7, 8, 20], [9, 10, 11, 12, 21], [13, 14, 15, 16, 22]]
    prompt_idx = torch.tensor([0, 1, 1])
    prefixes = [[5, 6], [9], []]
    with torch.no_grad():
        want = r.teacher_force(prompt_idx, rows)
        got = [r.start(prompt_idx, prefixes)]
        pos = [len(p) for p in prefixes]
        for _ in range(2):  # rows advance by their next token
            got.append(r.step(torch.tensor([rows[i][pos[i]] for i in range(3)])))
            pos = [p + 1 for p in pos]
    for t, feats in enumerate(got):
        for i in range(3):
            torch.testing.assert_close(feats[i], want[i, len(prefixes[i]) + t], **FEATURE_TOL)


def test_prompt_format():
    from constrained_decoding.prompts import PLAN_SEPARATOR, encode_prompts, format_prompt

    assert format_prompt("Given x, how to y?", encoder_decoder=True) == "Given x, how to y?"
    assert format_prompt("Given x, how to y?", encoder_decoder=False) == "Given x, how to y?" + PLAN_SEPARATOR
    ids = encode_prompts(bpe_tokenizer(), ["Given image"], encoder_decoder=False)[0]
    assert ids[0] == bpe_tokenizer().bos_token_id
    ids = encode_prompts(unigram_tokenizer(), ["Given image"], encoder_decoder=True)[0]
    assert ids[-1] == unigram_tokenizer().eos_token_id
    with pytest.raises(TypeError, match="description"):
        format_prompt(3, encoder_decoder=True)


def test_decoded_rows_are_scored_as_they_are():
    """A DecodedPlan carries its rows (start states and token ids): the scorer teacher-forces them
    without rebuilding them from the plan, with the same numbers."""
    model, tok = planner("t5-unigram")
    prompts, sigs = [PROMPT[LINEAR], PROMPT[NONLINEAR]], [LINEAR, NONLINEAR]
    grammars = plan_grammars(tok, sigs, REG, LIMITS)
    drawn = sample_plans(model, tok, prompts, grammars, k=4, temperature=0.8, seed=2)
    flat = [(p, g, d) for p, g, ds in zip(prompts, grammars, drawn) for d in ds]
    for _, g, d in flat:
        assert d.row_pairs() == g.rows_for(d.plan)
        assert d.text == format_plan(d.plan) and d.grammar is g
    with torch.no_grad():
        reused = plan_logprobs(model, tok, [p for p, _, _ in flat], [g for _, g, _ in flat], [d for *_, d in flat], 0.8)
        rebuilt = plan_logprobs(model, tok, [p for p, _, _ in flat], [g for _, g, _ in flat],
                                [d.plan for *_, d in flat], 0.8)
    assert torch.equal(reused, rebuilt)
