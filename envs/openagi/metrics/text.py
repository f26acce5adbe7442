"""Text metrics: exact match and token F1 (SQuAD normalisation), MiniLM semantic similarity, and
a length-aware variant of it for summaries.

Every metric scores a non-``str`` prediction (e.g. an image array from a plan that ends on the
wrong modality) 0.0 rather than raising: a wrong plan is a low reward, not a crash.
"""

from __future__ import annotations

import os
import re
import string
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from common.minilm import minilm_dir

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_EMBED_CACHE_SIZE = 20_000


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _check_target(target: Any) -> str:
    if not isinstance(target, str):
        raise TypeError(f"text metric target must be a str, got {type(target).__name__}: {target!r}")
    return target


def exact_match(pred: Any, target: str) -> float:
    """1.0 when prediction and target are equal after :func:`normalize_answer`, else 0.0."""
    target = _check_target(target)
    if not isinstance(pred, str):
        return 0.0
    return float(normalize_answer(pred) == normalize_answer(target))


def token_f1(pred: Any, target: str) -> float:
    """SQuAD token F1 between normalised prediction and target (both empty -> 1.0)."""
    target = _check_target(target)
    if not isinstance(pred, str):
        return 0.0
    p, t = normalize_answer(pred).split(), normalize_answer(target).split()
    if not p or not t:
        return float(p == t)
    common = sum((Counter(p) & Counter(t)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(t)
    return 2 * precision * recall / (precision + recall)


class _MiniLM:
    """all-MiniLM-L6-v2 (:func:`common.minilm.minilm_dir`), loaded once, offline, in float32."""

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        # heavy: torch + transformers (seconds), kept out of `import envs`; only when MiniLM scores
        import torch
        from transformers import AutoModel, AutoTokenizer  # heavy: as torch, the line above

        path = str(minilm_dir("the semantic-similarity metric"))
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path, dtype=torch.float32).eval()
        self.cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.lock = threading.Lock()

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Unit-norm mean-pooled embeddings, one row per text (cached by text)."""
        import torch  # heavy: kept out of `import envs` (loaded by __init__ above already)

        with self.lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
            for i in range(0, len(todo), batch_size):
                chunk = todo[i : i + batch_size]
                enc = self.tokenizer(chunk, padding=True, truncation=True, max_length=256, return_tensors="pt")
                with torch.no_grad():
                    hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, dim=-1).numpy()
                for t, v in zip(chunk, pooled):
                    self.cache[t] = v
                    if len(self.cache) > _EMBED_CACHE_SIZE:
                        self.cache.popitem(last=False)
            return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)


_MODEL: _MiniLM | None = None
_MODEL_LOCK = threading.Lock()


def _minilm() -> _MiniLM:
    global _MODEL
    with _MODEL_LOCK:
        if _MODEL is None:
            _MODEL = _MiniLM()
        return _MODEL


def semantic_similarity(preds: Sequence[Any], targets: Sequence[str]) -> list[float]:
    """Cosine similarity of MiniLM sentence embeddings, clipped to [0, 1]; non-str preds score 0."""
    if len(preds) != len(targets):
        raise ValueError(f"semantic_similarity: {len(preds)} predictions for {len(targets)} targets")
    targets = [_check_target(t) for t in targets]
    live = [i for i, p in enumerate(preds) if isinstance(p, str)]
    scores = [0.0] * len(preds)
    if not live:
        return scores
    model = _minilm()
    a = model.embed([preds[i] for i in live])
    b = model.embed([targets[i] for i in live])
    for i, s in zip(live, (a * b).sum(axis=1)):
        scores[i] = float(min(1.0, max(0.0, s)))
    return scores


SUMMARY_MAX_RATIO = 2.0
"""A summary up to this many times the reference's length (in words) is not penalised."""


def summary_similarity(
    preds: Sequence[Any], targets: Sequence[str], max_ratio: float = SUMMARY_MAX_RATIO
) -> list[float]:
    """:func:`semantic_similarity` times a brevity factor ``min(1, max_ratio * |target| / |pred|)``.

    Why: a mean-pooled embedding does not see length, and the lite passages are short, so the
    passage returned unchanged is more similar to its one-sentence reference summary (0.80 on the
    task partition) than any single extracted sentence can be (0.71 at best). Without the factor,
    a plan that skips summarisation would beat the one that summarises.
    """
    if max_ratio <= 0:
        raise ValueError(f"max_ratio={max_ratio}: expected a positive length ratio")
    sims = semantic_similarity(preds, targets)
    out = []
    for s, p, t in zip(sims, preds, targets):
        if not isinstance(p, str):
            out.append(0.0)
            continue
        n_pred, n_ref = max(1, len(p.split())), max(1, len(t.split()))
        out.append(s * min(1.0, max_ratio * n_ref / n_pred))
    return out
