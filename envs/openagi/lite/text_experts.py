"""The offline text experts of the lite zoo: real, fast methods under the OpenAGI tool names.

- Sentiment Analysis: VADER (lexicon and rules); compound >=
  :data:`~envs.openagi.lite.text.sentiment.SENTIMENT_THRESHOLD` -> "positive", else "negative"
  (VADER's own cut-off for "positive"; neutral counts as negative).
- Text Summarization: extractive; returns the most central sentence (TF-IDF degree centrality,
  i.e. continuous LexRank without the power iteration).
- Fill Mask: an interpolated Kneser-Ney trigram model trained on the EXPERT partition; each
  candidate content word is scored with its left context, the two words to its right, and its
  association with the other words of the text (trigger pairs learned on the same partition).
  Trained on first use (about 0.2 s), kept in memory.
- Question Answering: extractive; scores spans of every sentence by IDF-weighted overlap of the
  sentence with the query, the expected answer type (number, date, name) and the distance to the
  query's words in the sentence.
- Text Generation: a distractor: samples 8-15 words from the same trigram model mixed with a
  unigram cache of the input's content words (so it stays on topic), seeded from a hash of the
  input, and returns the continuation only (a text-generation pipeline with
  ``return_full_text=False``). Returning the input too was tried: an extractive QA expert then
  simply ignores the appended sentence, so misusing the tool cost nothing; this way, any plan
  that feeds its output to another expert is worse.

None of them reads ground truth. ``python -m envs.openagi.lite.text_experts`` prints quality and
timing figures on the task partition, and how plan choice changes them.

The experts live in :mod:`envs.openagi.lite.text`, one module each; this module registers them
under their OpenAGI names and reports on them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial

import numpy as np

from envs.openagi.lite.text.fill_mask import fill_mask
from envs.openagi.lite.text.generation import generate_text
from envs.openagi.lite.text.ngram import language_model, trigger_model
from envs.openagi.lite.text.qa import answer_questions
from envs.openagi.lite.text.sentiment import _vader, sentiment
from envs.openagi.lite.text.summarization import summarize
from envs.openagi.metrics.text import semantic_similarity, summary_similarity, token_f1
from envs.openagi.registry import ToolRegistry
from envs.openagi.task_data import texts as td
from envs.openagi.task_data.texts import MASK, cloze
from envs.openagi.tools import register_spec

# ------------------------------------------------------------------------------------ registration


def register_text_experts(registry: ToolRegistry, batched: bool = True) -> None:
    """Register the five offline text experts under their OpenAGI names and modalities; ``batched=False``:
    Fill Mask scores its candidates one by one (the reference its batched scoring is checked and timed against)."""
    register_spec(registry, "Sentiment Analysis", sentiment)
    register_spec(registry, "Text Summarization", summarize)
    register_spec(registry, "Fill Mask", fill_mask if batched else partial(fill_mask, batched=False))
    register_spec(registry, "Question Answering", answer_questions)
    register_spec(registry, "Text Generation", generate_text)


# ------------------------------------------------------------------------------------------ report


def _masked_word(original: str, clozed: str) -> str:
    """The word :func:`~envs.openagi.task_data.texts.cloze` replaced in ``original``."""
    i = clozed.index(MASK)
    return original[i : i + len(original) - len(clozed) + len(MASK)]


def fill_mask_top1(texts: Sequence[str], seed: int = 0) -> float:
    """Top-1 accuracy of Fill Mask on one cloze per text (case-insensitive word match)."""
    rng = np.random.default_rng(seed)
    clozed = [cloze(t, rng) for t in texts]
    filled = fill_mask(clozed)
    hits = 0
    for t, c, f in zip(texts, clozed, filled):
        i = c.index(MASK)
        gold = _masked_word(t, c)
        guess = f[i : i + len(f) - len(c) + len(MASK)]
        hits += gold.lower() == guess.lower()
    return hits / len(texts)


def report(n: int = 240, seed: int = 0, cloze_seeds: int = 5) -> None:
    """Print quality and timing figures on the TASK partition, and how plan choice changes them.

    Figures on clozed inputs are means over ``cloze_seeds`` independent clozes of every sample."""
    reviews = td.review_samples(n, seed)
    summaries = td.summary_samples(len(td.passages("task")), seed)
    qa = td.qa_samples(sum(len(p.questions) for p in td.passages("task")), seed)
    texts, labels = [x for x, _ in reviews], [y for _, y in reviews]
    docs, refs = [d for d, _ in summaries], [y for _, y in summaries]
    qdocs, qqs, answers = (list(col) for col in zip(*qa))

    def clozes(xs: list[str]) -> list[list[str]]:
        return [[td.cloze(x, np.random.default_rng([seed, k, i])) for i, x in enumerate(xs)]
                for k in range(cloze_seeds)]

    language_model(), trigger_model(), _vader()
    print("== timing per sample (2 cores; first call excluded)")
    for name, fn, args in (
        ("Sentiment Analysis", sentiment, (texts,)),
        ("Text Summarization", summarize, (docs,)),
        ("Fill Mask (passages)", fill_mask, (clozes(docs)[0],)),
        ("Fill Mask (reviews)", fill_mask, (clozes(texts)[0],)),
        ("Question Answering", answer_questions, (qdocs, qqs)),
        ("Text Generation", generate_text, (docs,)),
    ):
        fn(*(a[:2] for a in args))
        t0 = time.perf_counter()
        fn(*args)
        print(f"  {name:24s} {1000 * (time.perf_counter() - t0) / len(args[0]):6.2f} ms")

    print(f"== Fill Mask top-1 (task texts, {cloze_seeds} clozes each)")
    qs = [q.question for p in td.passages("task") for q in p.questions]
    for name, pool in (("reviews", [r.text for r in td.reviews("task")]),
                       ("passages", [p.text for p in td.passages("task")]), ("questions", qs)):  # fmt: skip
        print(f"  {name:10s} {np.mean([fill_mask_top1(pool, seed + k) for k in range(cloze_seeds)]):.3f}")

    def mean_over(clozed_sets: list[list[str]], score) -> float:
        return float(np.mean([score(c) for c in clozed_sets]))

    def acc(preds: list[str]) -> float:
        return float(np.mean([p == y for p, y in zip(preds, labels)]))

    ctexts = clozes(texts)
    print(f"== Sentiment accuracy ({len(texts)} task reviews)")
    rows = {
        "plain: SA": acc(sentiment(texts)),
        "plain: TG -> SA": acc(sentiment(generate_text(texts))),
        "plain: TS -> SA": acc(sentiment(summarize(texts))),
        "plain: FM -> SA (no-op)": acc(sentiment(fill_mask(texts))),
        "clozed: SA": mean_over(ctexts, lambda c: acc(sentiment(c))),
        "clozed: FM -> SA": mean_over(ctexts, lambda c: acc(sentiment(fill_mask(c)))),
        "clozed: TG -> SA": mean_over(ctexts, lambda c: acc(sentiment(generate_text(c)))),
        "clozed: TS -> SA": mean_over(ctexts, lambda c: acc(sentiment(summarize(c)))),
        "clozed: FM -> TG -> SA": mean_over(ctexts, lambda c: acc(sentiment(generate_text(fill_mask(c))))),
        "clozed: FM -> TS -> SA": mean_over(ctexts, lambda c: acc(sentiment(summarize(fill_mask(c))))),
    }
    for k, v in rows.items():
        print(f"  {k:26s} {v:.3f}")

    cdocs = clozes(docs)
    print(f"== Summarization ({len(docs)} task passages): semantic_similarity | summary_similarity")

    def sims(preds: list[str]) -> np.ndarray:
        return np.array([np.mean(semantic_similarity(preds, refs)), np.mean(summary_similarity(preds, refs))])

    rows = {
        "plain: TS": sims(summarize(docs)),
        "plain: TG -> TS": sims(summarize(generate_text(docs))),
        "plain: FM (no-op, no TS)": sims(fill_mask(docs)),
        "plain: TS -> TG": sims(generate_text(summarize(docs))),
        "clozed: TS": np.mean([sims(summarize(c)) for c in cdocs], axis=0),
        "clozed: FM -> TS": np.mean([sims(summarize(fill_mask(c))) for c in cdocs], axis=0),
        "clozed: TG -> TS": np.mean([sims(summarize(generate_text(c))) for c in cdocs], axis=0),
        "clozed: FM -> TG -> TS": np.mean([sims(summarize(generate_text(fill_mask(c)))) for c in cdocs], axis=0),
        "clozed: FM (no TS)": np.mean([sims(fill_mask(c)) for c in cdocs], axis=0),
    }
    for k, (a, b) in rows.items():
        print(f"  {k:26s} {a:.3f} | {b:.3f}")

    def f1(dd: list[str], qq: list[str]) -> float:
        return float(np.mean([token_f1(p, a) for p, a in zip(answer_questions(dd, qq), answers)]))

    cd, cq = clozes(qdocs), clozes(qqs)
    fd, fq = [fill_mask(c) for c in cd], [fill_mask(c) for c in cq]
    print(f"== QA token F1 ({len(qa)} task questions)")
    print(f"  {'':12s} {'query plain':>12s} {'clozed':>8s} {'clozed+FM':>10s}")
    print(f"  {'doc plain':12s} {f1(qdocs, qqs):12.3f} {np.mean([f1(qdocs, c) for c in cq]):8.3f}"
          f" {np.mean([f1(qdocs, c) for c in fq]):10.3f}")  # fmt: skip
    print(f"  {'clozed':12s} {np.mean([f1(c, qqs) for c in cd]):12.3f}"
          f" {np.mean([f1(a, b) for a, b in zip(cd, cq)]):8.3f} {np.mean([f1(a, b) for a, b in zip(cd, fq)]):10.3f}")
    print(f"  {'clozed+FM':12s} {np.mean([f1(c, qqs) for c in fd]):12.3f}"
          f" {np.mean([f1(a, b) for a, b in zip(fd, cq)]):8.3f} {np.mean([f1(a, b) for a, b in zip(fd, fq)]):10.3f}")
    print(f"  doc TG, query plain {f1(generate_text(qdocs), qqs):.3f};  doc plain, query TG "
          f"{f1(qdocs, generate_text(qqs)):.3f};  doc TS, query plain {f1(summarize(qdocs), qqs):.3f}")
    dev = [(p.text, q.question, q.answer) for p in td.passages("expert") for q in p.questions]
    preds = answer_questions([d for d, _, _ in dev], [q for _, q, _ in dev])
    print(f"  (expert-partition questions, plain: {np.mean([token_f1(p, a) for p, (_, _, a) in zip(preds, dev)]):.3f})")


if __name__ == "__main__":
    report()
