"""Fill Mask's batched candidate scoring gives the per-candidate loop's outputs, bit for bit: each
probability of the vectorised trigram tables is ``KneserNeyLM.prob``'s double, and the filled texts of
the lite suite's inputs (clozed or not, and what other experts make of them) are the same strings."""

from __future__ import annotations

import numpy as np
import pytest

from envs.openagi.env import OpenAGIEnv
from envs.openagi.lite import build_lite_registry
from envs.openagi.lite.text.fill_mask import fill_mask
from envs.openagi.lite.text.generation import generate_text
from envs.openagi.lite.text.ngram import language_model
from envs.openagi.lite.text.ngram_batch import CandidateProbs, candidate_probs
from envs.openagi.lite.text.summarization import summarize
from envs.openagi.plans import enumerate_plans
from envs.openagi.suite import build_suite
from envs.openagi.task_data import texts as td
from envs.openagi.task_data.texts import MASK


@pytest.fixture(scope="module")
def text_tasks():
    return [t for t in build_suite("lite", 0, 4) if "text" in t.inputs]


def test_candidate_probabilities_are_the_models_bit_for_bit():
    lm = language_model()
    probs = candidate_probs(lm)
    rng = np.random.default_rng(0)
    words = [*rng.choice(lm.vocab, 300, replace=False).tolist(), "zzzunseen", MASK, "</s>", "the", "of"]
    ids = np.array([probs.id_of(w) for w in words])
    # contexts seen in training (as trigram contexts or only as bigrams), unseen ones, sentence starts
    contexts = [list(c) for c in list(lm.tables[3])[::400]] + [["<s>", "<s>"], ["zzzunseen", "the"],
                                                                ["the", MASK], [MASK, MASK], ["of", "zzzunseen"]]
    for a, b in contexts:
        assert probs.of_words(ids, ["<s>", a, b]).tolist() == [lm.prob(w, [a, b]) for w in words]
        assert probs.after_candidates(b, a, ids).tolist() == [lm.prob(b, [a, w]) for w in words]
        assert probs.two_after_candidates(b, a, ids).tolist() == [lm.prob(b, [w, a]) for w in words]


def test_candidate_probabilities_take_trigram_models_only():
    with pytest.raises(ValueError, match="order=2"):
        CandidateProbs(type(language_model())([["a", "b"]], order=2))


def test_batched_fill_mask_is_the_per_candidate_one(text_tasks):
    inputs = sorted({x for t in text_tasks for s in t.samples for x in s.inputs if isinstance(x, str)})[::3]
    clozed = [td.cloze(td.cloze(x, np.random.default_rng([1, i])), np.random.default_rng([2, i]))
              for i, x in enumerate(inputs[:20])]  # two masks
    odd = [f"{MASK} is here.", f"It was {MASK}", f"{MASK} {MASK} {MASK}.", f"The {MASK} said: {MASK}!", MASK, "",
           "no mask"]
    texts = inputs + clozed + odd + [td.cloze(x, np.random.default_rng(3)) for x in generate_text(inputs[:10])
                                     + summarize(inputs[:10])]
    assert sum(MASK in t for t in texts) > 40
    assert fill_mask(texts) == fill_mask(texts, batched=False)


def test_batched_and_per_sample_envs_give_the_same_text_rewards(text_tasks):
    """Every valid plan (up to two tools) of a few text tasks, cold cache: identical per-sample scores."""
    fast, slow = (OpenAGIEnv(tasks=text_tasks, cache_bytes=0, registry=build_lite_registry(batched=b))
                  for b in (True, False))
    tasks = [t for t in text_tasks if any(MASK in x for s in t.samples for x in s.inputs if isinstance(x, str))][:3]
    pairs = [(t, p) for t in tasks for p in enumerate_plans(fast.registry, t.inputs, t.target, fast.limits)
             if len(p.all_tools) <= 2 and "Fill Mask" in p.all_tools][:12]
    assert len(pairs) >= 6
    got, want = fast.reward_plans(pairs), slow.reward_plans(pairs)
    assert [r.scores for r in got] == [r.scores for r in want]
    assert any(r.reward > 0 for r in got)
