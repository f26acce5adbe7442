"""Sentiment Analysis: VADER's compound score thresholded into positive / negative."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from envs.openagi.lite.text.common import _check_texts

SENTIMENT_THRESHOLD = 0.05


@lru_cache(maxsize=1)
def _vader():
    return SentimentIntensityAnalyzer()


def sentiment(texts: Sequence[str]) -> list[str]:
    """Batched Sentiment Analysis: VADER compound score thresholded into positive / negative."""
    texts = _check_texts("Sentiment Analysis", texts)
    analyzer = _vader()
    return [
        "positive" if analyzer.polarity_scores(t)["compound"] >= SENTIMENT_THRESHOLD else "negative"
        for t in texts
    ]
