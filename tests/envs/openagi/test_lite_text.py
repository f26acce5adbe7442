"""The lite text side: corpus, task samples, cloze, the five text experts, and the text metrics."""

from __future__ import annotations

import re

import numpy as np
import pytest

from envs.openagi.lite import text_experts as te
from envs.openagi.lite.text.common import split_sentences
from envs.openagi.lite.text.fill_mask import fill_mask
from envs.openagi.lite.text.generation import GEN_WORDS, generate_text
from envs.openagi.lite.text.ngram import language_model
from envs.openagi.lite.text.qa import answer_questions
from envs.openagi.lite.text.sentiment import sentiment
from envs.openagi.lite.text.summarization import summarize
from envs.openagi.metrics.text import (
    exact_match,
    normalize_answer,
    semantic_similarity,
    summary_similarity,
    token_f1,
)
from envs.openagi.registry import TEXT, ToolRegistry
from envs.openagi.task_data import texts as td
from envs.openagi.tools import SPECS

TEXT_TOOLS = ("Sentiment Analysis", "Text Summarization", "Fill Mask", "Question Answering", "Text Generation")


# ------------------------------------------------------------------------------------------ corpus


def test_reviews_schema_and_balance():
    reviews = td.reviews()
    assert len(reviews) >= 160
    assert len({r.id for r in reviews}) == len(reviews)
    assert len({r.text for r in reviews}) == len(reviews)
    for r in reviews:
        assert r.label in td.SENTIMENTS and r.partition in td.PARTITIONS
        assert 1 <= len(split_sentences(r.text)) <= 3, r.text
    for part in td.PARTITIONS:
        labels = [r.label for r in td.reviews(part)]
        assert labels.count("positive") == labels.count("negative") > 0
    n_task = len(td.reviews("task"))
    assert 0.4 <= n_task / len(reviews) <= 0.6


def test_passages_schema_answers_are_spans():
    passages = td.passages()
    assert len(passages) >= 60
    assert len({p.id for p in passages}) == len(passages)
    for p in passages:
        sentences = split_sentences(p.text)
        assert 3 <= len(sentences) <= 6, p.id
        assert 2 <= len(p.questions) <= 3, p.id
        assert len(split_sentences(p.summary)) == 1, p.id
        assert p.summary not in sentences, f"{p.id}: the summary copies a sentence"
        for q in p.questions:
            assert q.answer and q.answer in p.text, f"{p.id}: {q.answer!r} is not a span"
            assert q.question.endswith("?")
    n_task = len(td.passages("task"))
    assert 0.4 <= n_task / len(passages) <= 0.6
    assert {p.topic for p in td.passages("task")} == {p.topic for p in td.passages("expert")}


def test_expert_text_never_contains_task_text():
    expert = "\n".join(td.expert_texts())
    for r in td.reviews("task"):
        assert r.text not in expert
    for p in td.passages("task"):
        assert p.text not in expert and p.summary not in expert
        assert all(q.question not in expert for q in p.questions)
    assert len(td.general_sentences()) >= 200


def test_bad_partition_is_rejected():
    with pytest.raises(ValueError, match="partition"):
        td.reviews("train")


# ---------------------------------------------------------------------------------------- samples


def test_samples_are_deterministic_and_seed_dependent():
    for fn in (td.review_samples, td.summary_samples, td.qa_samples):
        assert fn(30, 7) == fn(30, 7)
        assert fn(30, 7) != fn(30, 8)


def test_samples_come_only_from_the_task_partition():
    task_reviews = {(r.text, r.label) for r in td.reviews("task")}
    assert set(td.review_samples(300, 1)) <= task_reviews
    task_pairs = {(p.text, p.summary) for p in td.passages("task")}
    assert set(td.summary_samples(100, 1)) <= task_pairs
    task_qa = {(p.text, q.question, q.answer) for p in td.passages("task") for q in p.questions}
    assert set(td.qa_samples(300, 1)) <= task_qa


def test_review_samples_are_balanced():
    labels = [y for _, y in td.review_samples(41, 3)]
    assert abs(labels.count("positive") - labels.count("negative")) <= 1


def test_oversampling_uses_every_item_before_repeating():
    pool = len(td.passages("task"))
    drawn = td.summary_samples(pool + 5, 0)
    assert len(set(drawn[:pool])) == pool
    assert len(drawn) == pool + 5
    assert td.summary_samples(0, 0) == []
    with pytest.raises(ValueError, match="non-negative"):
        td.qa_samples(-1, 0)


# ------------------------------------------------------------------------------------------ cloze


@pytest.mark.parametrize("seed", range(20))
def test_cloze_masks_exactly_one_content_word(seed):
    rng = np.random.default_rng(seed)
    text = td.passages("task")[seed].text
    clozed = td.cloze(text, rng)
    assert clozed.count(td.MASK) == 1
    i = clozed.index(td.MASK)
    tail = len(clozed) - i - len(td.MASK)
    assert clozed[:i] == text[:i] and clozed[len(clozed) - tail :] == text[len(text) - tail :]
    word = text[i : len(text) - tail]
    assert re.fullmatch(r"[A-Za-z]+(?:['\-][A-Za-z]+)*", word), word
    assert word.lower() not in td.FUNCTION_WORDS and len(word) >= 3


def test_cloze_keeps_punctuation_and_is_seeded():
    assert td.cloze("Great!", np.random.default_rng(0)) == "[MASK]!"
    masked = td.cloze("It is, (really) good.", np.random.default_rng(0))
    assert masked in ("It is, ([MASK]) good.", "It is, (really) [MASK].")
    a = td.cloze(td.reviews()[0].text, np.random.default_rng(5))
    assert a == td.cloze(td.reviews()[0].text, np.random.default_rng(5))
    assert td.cloze("a b", np.random.default_rng(0)).count(td.MASK) == 1  # only function words: any word
    once = td.cloze("The food was cold.", np.random.default_rng(1))
    assert td.cloze(once, np.random.default_rng(1)).count(td.MASK) == 2  # never re-masks a mask
    with pytest.raises(ValueError, match="no word"):
        td.cloze("... 42 !", np.random.default_rng(0))


# ---------------------------------------------------------------------------------------- experts


@pytest.fixture(scope="module")
def registry() -> ToolRegistry:
    reg = ToolRegistry()
    te.register_text_experts(reg)
    return reg


def test_experts_registered_with_openagi_modalities_and_batched(registry):
    assert set(registry.names) == set(TEXT_TOOLS)
    docs = [p.text for p in td.passages("task")[:3]]
    for name in TEXT_TOOLS:
        tool = registry.get(name)
        assert tool.inputs == SPECS[name].inputs and tool.output == SPECS[name].output == TEXT
        batches = [docs] if tool.arity == 1 else [docs, ["What is it?"] * 3]
        out = tool(*batches)
        assert len(out) == 3 and all(isinstance(o, str) for o in out)
    with pytest.raises(TypeError, match="str"):
        registry.get("Sentiment Analysis")([np.zeros((4, 4, 3), np.float32)])


def test_fill_mask_leaves_unmasked_text_and_fills_with_a_real_word(registry):
    fill = registry.get("Fill Mask")
    plain = "The soup was hot, and the bread was fresh."
    assert fill([plain]) == [plain]
    vocab = set(language_model().vocab)
    for text in ("The food was [MASK] and the staff were friendly.", "[MASK] was the best film of the year.",
                 "We had a [MASK] time at the hotel, and the [MASK] was clean."):  # fmt: skip
        out = fill([text])[0]
        assert td.MASK not in out
        pattern = re.escape(text).replace(re.escape(td.MASK), r"([A-Za-z][\w'\-]*)")
        m = re.fullmatch(pattern, out)
        assert m, out
        assert all(w.lower() in vocab and w.lower() not in td.FUNCTION_WORDS for w in m.groups())
    assert fill(["[MASK] is fun."])[0][0].isupper()  # a sentence starts with a capital


def test_fill_mask_uses_both_contexts():
    # the same left context (a sentence start) with different right contexts gives different words
    a, b = fill_mask(["[MASK] was the best film of the year.", "[MASK] is the capital of the region."])
    assert a.split()[0] != b.split()[0]
    assert fill_mask(["We waited an [MASK] for the bus."]) == ["We waited an hour for the bus."]


def test_text_generation_is_a_deterministic_continuation(registry):
    gen = registry.get("Text Generation")
    texts = [r.text for r in td.reviews("task")[:6]] + ["The food was", ""]
    out = gen(texts)
    assert out == gen(texts)
    assert len(set(out)) == len(out)
    for t, o in zip(texts, out):
        assert not t or not o.startswith(t)  # the continuation only, as with return_full_text=False
        n_new = len(re.findall(r"[A-Za-z0-9][\w'\-,.:]*", o))
        assert GEN_WORDS[0] <= n_new <= GEN_WORDS[1], o
        assert o.endswith(".")


def test_text_generation_misuse_makes_plans_worse():
    samples = td.qa_samples(60, 0)
    docs, qs, gold = zip(*samples)

    def f1(d, q):
        return np.mean([token_f1(a, g) for a, g in zip(answer_questions(list(d), list(q)), gold)])

    assert f1(generate_text(docs), qs) < f1(docs, qs) - 0.3
    reviews = td.review_samples(60, 0)
    texts, labels = zip(*reviews)
    acc = np.mean([p == y for p, y in zip(sentiment(list(texts)), labels)])
    misused = np.mean([p == y for p, y in zip(sentiment(generate_text(texts)), labels)])
    assert misused < acc - 0.05


def test_vader_gets_clear_cut_reviews_right(registry):
    sa = registry.get("Sentiment Analysis")
    assert sa(["The food was excellent and the staff were wonderful.",
               "Terrible service, and the food was cold and disgusting.",
               "I loved this book; it is a beautiful, moving story.",
               "The worst hotel ever: dirty, noisy and rude staff."]) == [  # fmt: skip
        "positive", "negative", "positive", "negative"]


def test_sentiment_accuracy_on_task_reviews():
    samples = td.review_samples(120, 0)
    preds = sentiment([x for x, _ in samples])
    assert np.mean([p == y for p, (_, y) in zip(preds, samples)]) >= 0.85


def test_summarization_returns_the_most_central_sentence(registry):
    ts = registry.get("Text Summarization")
    for p in td.passages("task")[:10]:
        (summary,) = ts([p.text])
        assert summary in split_sentences(p.text)
    assert ts(["One sentence only."]) == ["One sentence only."]
    doc = "Cats sleep a lot. Cats and dogs sleep in the sun. Dogs bark at night. Fish swim."
    assert ts([doc]) == ["Cats and dogs sleep in the sun."]


def test_question_answering_returns_a_span_of_the_document(registry):
    qa = registry.get("Question Answering")
    samples = td.qa_samples(40, 2)
    answers = qa([d for d, _, _ in samples], [q for _, q, _ in samples])
    for (doc, _, _), a in zip(samples, answers):
        assert a and a in doc
    assert np.mean([token_f1(a, gold) for a, (_, _, gold) in zip(answers, samples)]) >= 0.5
    doc = "The bridge opened in 1932. It was designed by Mary Stone and cost four million dollars."
    assert qa([doc] * 3, ["Who designed the bridge?", "When did the bridge open?", "How much did it cost?"]) == [
        "Mary Stone", "1932", "four million dollars"]  # fmt: skip


def test_clozed_inputs_hurt_and_fill_mask_helps_the_query():
    """Plan choice matters: a clozed query costs F1, and Fill Mask on it recovers some."""
    samples = td.qa_samples(len(td.passages("task")) * 3, 0)
    docs, qs, gold = zip(*samples)
    rng = np.random.default_rng(0)
    clozed = [td.cloze(q, rng) for q in qs]

    def f1(queries):
        return np.mean([token_f1(a, g) for a, g in zip(answer_questions(docs, queries), gold)])

    plain, masked, filled = f1(qs), f1(clozed), f1(fill_mask(clozed))
    assert plain > filled > masked


# ---------------------------------------------------------------------------------------- metrics


def test_exact_match_normalises():
    assert normalize_answer("  The  Cat's, hat! ") == "cats hat"
    assert exact_match("The Eiffel Tower.", "eiffel   tower") == 1.0
    assert exact_match("positive", "negative") == 0.0
    assert exact_match(np.zeros((2, 2, 3)), "cat") == 0.0
    with pytest.raises(TypeError, match="target"):
        exact_match("cat", 3)


def test_token_f1_known_values():
    assert token_f1("red blue", "blue green yellow") == pytest.approx(0.4)  # P 1/2, R 1/3
    assert token_f1("the Nile river", "Nile") == pytest.approx(2 / 3)
    assert token_f1("Mainz", "mainz.") == 1.0
    assert token_f1("Paris", "London") == 0.0
    assert token_f1("", "") == 1.0 and token_f1("the", "x") == 0.0
    assert token_f1(None, "x") == 0.0


def test_semantic_similarity():
    a = "The cat sat on the warm mat by the fire."
    scores = semantic_similarity(
        [a, "A cat was sitting on a mat near the fireplace.", "Stock markets fell sharply on Tuesday.",
         np.zeros((8, 8, 3), np.float32)],
        [a, a, a, a],
    )  # fmt: skip
    assert scores[0] == pytest.approx(1.0, abs=1e-4)
    assert scores[0] > scores[1] > scores[2] >= 0.0
    assert scores[1] > 0.6 and scores[2] < 0.3
    assert scores[3] == 0.0
    assert semantic_similarity([], []) == []
    with pytest.raises(ValueError, match="targets"):
        semantic_similarity(["a"], [])


def test_summary_similarity_penalises_returning_the_passage():
    p = td.passages("task")[0]
    (summary,) = summarize([p.text])
    whole, central = summary_similarity([p.text, summary], [p.summary] * 2)
    assert central > whole
    assert whole < semantic_similarity([p.text], [p.summary])[0]
    assert central == pytest.approx(semantic_similarity([summary], [p.summary])[0])  # short: no penalty
    assert summary_similarity([None], [p.summary]) == [0.0]
