"""Text Summarization: extractive, the most central sentence by TF-IDF degree centrality."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from envs.openagi.lite.text.common import _check_texts, split_sentences
from envs.openagi.task_data.texts import FUNCTION_WORDS, MASK


def _summarize_one(text: str) -> str:
    sents = split_sentences(text)
    if len(sents) <= 1:
        return text.strip()
    vec = TfidfVectorizer(
        stop_words=sorted(FUNCTION_WORDS), token_pattern=r"(?u)\b[A-Za-z][A-Za-z]+\b", sublinear_tf=True
    )
    try:
        x = vec.fit_transform([s.replace(MASK, " ") for s in sents])
    except ValueError:  # nothing but stop words: no centrality to compute
        return sents[0]
    sim = (x @ x.T).toarray()
    np.fill_diagonal(sim, 0.0)
    return sents[int(np.argmax(sim.sum(axis=1)))]


def summarize(texts: Sequence[str]) -> list[str]:
    """Batched Text Summarization: the sentence most similar to the rest of the text."""
    texts = _check_texts("Text Summarization", texts)
    return [_summarize_one(t) for t in texts]
