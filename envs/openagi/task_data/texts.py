"""English text written for rltf, split into an EXPERT and a TASK partition, and the cloze degradation.

The corpus (``task_data/corpus/*.json``) holds short reviews with sentiment labels, short
passages with an abstractive reference summary and extractive questions, and general English
sentences. Every item has a fixed ``partition``: ``"expert"`` items only train learned experts
(the Fill Mask and Text Generation language model), ``"task"`` items only make benchmark
samples, so no learned expert is ever scored on text it was trained on.

Sampling rule when ``n`` exceeds the task pool: the pool is shuffled once per pass with the
sample RNG and passes are concatenated, so every item appears once before any appears twice
(duplicates are then different samples only after a degradation such as :func:`cloze`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

CORPUS_DIR = Path(__file__).with_name("corpus")
MASK = "[MASK]"
PARTITIONS: tuple[str, ...] = ("expert", "task")
SENTIMENTS: tuple[str, ...] = ("positive", "negative")

_CONTENT_IN_SKLEARN_STOP = frozenset(
    "amount bill bottom call cry describe detail empty fill find fire found front full give interest keep "
    "mill move name part serious show side sincere system take thick thin top".split()
)
FUNCTION_WORDS: frozenset[str] = (frozenset(ENGLISH_STOP_WORDS) - _CONTENT_IN_SKLEARN_STOP) | {"did", "does", "doing"}
"""scikit-learn's English stop words without the content words that list happens to contain
(and with the auxiliaries it misses)."""

_WORD_RE = re.compile(r"[A-Za-z]+(?:['\-][A-Za-z]+)*")
"""A word for the cloze: letters, with inner apostrophes or hyphens (``don't``, ``by-product``)."""


@dataclass(frozen=True)
class Review:
    id: str
    text: str
    label: str
    partition: str


@dataclass(frozen=True)
class Question:
    question: str
    answer: str


@dataclass(frozen=True)
class Passage:
    id: str
    topic: str
    text: str
    summary: str
    questions: tuple[Question, ...]
    partition: str


def _load(name: str) -> dict:
    path = CORPUS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {path} is missing (it ships with the package)")
    return json.loads(path.read_text(encoding="utf-8"))


def _check_partition(partition: str | None) -> None:
    if partition is not None and partition not in PARTITIONS:
        raise ValueError(f"partition={partition!r}: expected one of {PARTITIONS} or None (all)")


@lru_cache(maxsize=1)
def _reviews() -> tuple[Review, ...]:
    return tuple(Review(**item) for item in _load("reviews.json")["items"])


@lru_cache(maxsize=1)
def _passages() -> tuple[Passage, ...]:
    out = []
    for item in _load("passages.json")["items"]:
        qs = tuple(Question(**q) for q in item["questions"])
        out.append(Passage(**{**item, "questions": qs}))
    return tuple(out)


def reviews(partition: str | None = None) -> tuple[Review, ...]:
    """All reviews, or those of one partition, in corpus order."""
    _check_partition(partition)
    return tuple(r for r in _reviews() if partition is None or r.partition == partition)


def passages(partition: str | None = None) -> tuple[Passage, ...]:
    """All passages, or those of one partition, in corpus order."""
    _check_partition(partition)
    return tuple(p for p in _passages() if partition is None or p.partition == partition)


@lru_cache(maxsize=1)
def general_sentences() -> tuple[str, ...]:
    """Extra general English (expert partition only): language-model training text."""
    data = _load("general.json")
    if data.get("partition") != "expert":
        raise ValueError(f"general.json partition is {data.get('partition')!r}; expected 'expert'")
    return tuple(data["sentences"])


def expert_texts() -> tuple[str, ...]:
    """Every expert-partition text, the only text learned experts may train on."""
    out: list[str] = [r.text for r in reviews("expert")]
    for p in passages("expert"):
        out.append(p.text)
        out.append(p.summary)
        out.extend(q.question for q in p.questions)
    out.extend(general_sentences())
    return tuple(out)


def _draw(pool_size: int, n: int, rng: np.random.Generator) -> list[int]:
    """Indices into a pool: shuffled passes over the whole pool, concatenated, cut at ``n``."""
    if n < 0:
        raise ValueError(f"n={n}: expected a non-negative number of samples")
    if pool_size == 0:
        raise ValueError("the task pool is empty: the corpus has no task-partition items")
    idx: list[int] = []
    while len(idx) < n:
        idx.extend(int(i) for i in rng.permutation(pool_size))
    return idx[:n]


def review_samples(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` (review text, sentiment) pairs from the task partition, labels alternating.

    Positives and negatives are drawn from separate shuffled pools and interleaved in an order
    that starts with a random label, so any ``n`` is balanced to within one sample.
    """
    rng = np.random.default_rng(seed)
    pools = {lab: [r for r in reviews("task") if r.label == lab] for lab in SENTIMENTS}
    first = int(rng.integers(2))
    labels = [SENTIMENTS[(first + k) % 2] for k in range(n)]
    counts = {lab: labels.count(lab) for lab in SENTIMENTS}
    picks = {lab: iter(_draw(len(pools[lab]), counts[lab], rng)) for lab in SENTIMENTS}
    out = []
    for lab in labels:
        r = pools[lab][next(picks[lab])]
        out.append((r.text, r.label))
    return out


def summary_samples(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` (passage, reference summary) pairs from the task partition."""
    pool = passages("task")
    return [(pool[i].text, pool[i].summary) for i in _draw(len(pool), n, np.random.default_rng(seed))]


def qa_samples(n: int, seed: int) -> list[tuple[str, str, str]]:
    """``n`` (document, question, answer) triples from the task partition; answers are spans."""
    pool = [(p.text, q.question, q.answer) for p in passages("task") for q in p.questions]
    return [pool[i] for i in _draw(len(pool), n, np.random.default_rng(seed))]


def _is_content(word: str) -> bool:
    return len(word) >= 3 and word.lower() not in FUNCTION_WORDS


def cloze(text: str, rng: np.random.Generator) -> str:
    """``text`` with exactly one word replaced by :data:`MASK` (OpenAGI's "clozed" degradation).

    A content word (not a stop word, three letters or more) is chosen uniformly when there is
    one, else any word; punctuation around it stays in place ("great," -> "[MASK],"). Existing
    masks are never chosen.
    """
    if not isinstance(text, str):
        raise TypeError(f"cloze expects a str, got {type(text).__name__}")
    masked = [(m.start(), m.start() + len(MASK)) for m in re.finditer(re.escape(MASK), text)]
    words = [
        m for m in _WORD_RE.finditer(text)
        if not any(a <= m.start() < b for a, b in masked)
    ]  # fmt: skip
    if not words:
        raise ValueError(f"cannot cloze {text!r}: it has no word to mask")
    content = [m for m in words if _is_content(m.group())]
    pool = content or words
    m = pool[int(rng.integers(len(pool)))]
    return text[: m.start()] + MASK + text[m.end() :]
