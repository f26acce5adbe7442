"""Validity by construction: whatever the model, seed, registry and task, decoded text is a valid plan."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from constrained_decoding.decode import beam_search_plans, greedy_plans, sample_plans
from envs.openagi.grammar import GrammarError, plan_grammars
from envs.openagi.plans import PlanLimits, check_plan, enumerate_plans, format_plan, parse_plan
from envs.openagi.registry import IMAGE, TEXT
from envs.openagi.tools import OPENAGI_TOOLS, signature_registry
from tests.tiny_models import bpe_tokenizer, tiny_llama, tiny_t5, unigram_tokenizer, wordpiece_tokenizer

SIGNATURES = [((IMAGE,), IMAGE), ((IMAGE,), TEXT), ((TEXT,), TEXT), ((TEXT,), IMAGE), ((IMAGE, TEXT), TEXT),
              ((TEXT, TEXT), TEXT), ((TEXT, IMAGE), TEXT)]
PLANNERS = [(tiny_t5, unigram_tokenizer), (tiny_llama, bpe_tokenizer), (tiny_t5, wordpiece_tokenizer),
            (tiny_llama, unigram_tokenizer)]
NAMES = [t.name for t in OPENAGI_TOOLS]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    planner=st.sampled_from(PLANNERS),
    seed=st.integers(0, 2**16),
    sig=st.sampled_from(SIGNATURES),
    names=st.sets(st.sampled_from(NAMES), min_size=5, max_size=len(NAMES)),
    limits=st.builds(PlanLimits, st.integers(1, 4), st.integers(0, 3), st.integers(0, 2)),
    temperature=st.sampled_from([0.5, 1.0, 2.0]),
)
def test_decoded_text_always_parses_and_checks(planner, seed, sig, names, limits, temperature):
    check_decoding(planner, seed, sig, signature_registry(tuple(names)), limits, temperature)


@pytest.mark.parametrize("case", range(12))
def test_nonlinear_tasks_on_random_registries(case):
    """Seeded loop so that every planner meets every nonlinear signature (hypothesis may not draw them)."""
    rng = random.Random(case)
    planner = PLANNERS[case % len(PLANNERS)]
    sig = [s for s in SIGNATURES if len(s[0]) > 1][case % 3]
    names = tuple(rng.sample(NAMES, rng.randint(9, len(NAMES))))
    limits = PlanLimits(rng.randint(1, 4), rng.randint(0, 3), rng.randint(0, 2))
    check_decoding(planner, case, sig, signature_registry(names), limits, rng.choice([0.5, 1.0, 2.0]))


def check_decoding(planner, seed, sig, reg, limits, temperature):
    build, tokenizer = planner
    tok = tokenizer()
    model = build(tok, seed=seed)
    prompt = "Given noisy image and clozed English query, how to answer the question in English step by step?"
    if not any(True for _ in enumerate_plans(reg, *sig, limits)):
        with pytest.raises(GrammarError, match="no valid plan"):
            sample_plans(model, tok, [prompt], plan_grammars(tok, [sig], reg, limits))
        return
    drawn = sample_plans(model, tok, [prompt, prompt], plan_grammars(tok, [sig, sig], reg, limits),
                         k=3, temperature=temperature, seed=seed)
    beams = beam_search_plans(model, tok, [prompt], plan_grammars(tok, [sig], reg, limits), num_beams=4, branch_beams=1)
    greedy = greedy_plans(model, tok, [prompt], plan_grammars(tok, [sig], reg, limits))
    for d in [*drawn[0], *drawn[1], *beams[0], *greedy]:
        plan = parse_plan(d.text, reg)
        assert plan == d.plan and format_plan(plan) == d.text
        check_plan(plan, reg, *sig, limits)
        assert d.logprob <= 1e-6
