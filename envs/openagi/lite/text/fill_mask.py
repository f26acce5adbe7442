"""Fill Mask: each ``[MASK]`` replaced by the trigram model's best content word, scored with the
words on both sides and the trigger association with the rest of the text. By default every
candidate of a mask is scored at once (:mod:`envs.openagi.lite.text.ngram_batch`), bit for bit the
per-candidate loop that ``batched=False`` keeps."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

from envs.openagi.lite.text.common import (
    _TOKEN_RE,
    BOS,
    EOS,
    _check_texts,
    _is_word,
    content_words,
    lm_tokens,
    split_sentences,
)
from envs.openagi.lite.text.ngram import KneserNeyLM, TriggerModel, language_model, trigger_model
from envs.openagi.lite.text.ngram_batch import candidate_probs, log_list
from envs.openagi.task_data.texts import FUNCTION_WORDS, MASK

_SENT_END = re.compile(r"[.!?][\"')\]]?\s+")
_SENT_END_RIGHT = re.compile(r"[.!?][\"')\]]?(?:\s|$)")


FILL_CONTENT_WORDS_ONLY = True
"""Fill masks only with content words: :func:`~envs.openagi.task_data.texts.cloze` masks a content
word whenever a text has one, so a function word is almost never the answer (on held-out expert
text this raises top-1 from 0.127 to 0.152)."""


TRIGGER_WEIGHT = 0.5
"""Weight of the trigger association (per unit of PMI) added to the n-gram log-probability."""


RERANK_TOP = 30
"""Only the n-gram model's best candidates are rescored with the trigger association (speed)."""


@lru_cache(maxsize=2**16)
def _fillable(word: str) -> bool:
    """May ``word`` fill a mask (a word; a content word when :data:`FILL_CONTENT_WORDS_ONLY`)."""
    return _is_word(word) and not (FILL_CONTENT_WORDS_ONLY and (word in FUNCTION_WORDS or len(word) < 3))


def _scored_batched(lm: KneserNeyLM, left: list[str], right: list[str], cands: set[str]) -> list[tuple[float, str]]:
    """(-score, w) of every fillable candidate, all candidates' probabilities at once (trigram models,
    up to two right-hand words: what :func:`_fill_one` asks; anything else candidate by candidate)."""
    if lm.order != 3 or len(right) > 2:
        return _scored(lm, left, right, cands)
    words = [w for w in cands if _fillable(w)]
    if not words:
        return []
    probs = candidate_probs(lm)
    ids = np.fromiter((probs.id_of(w) for w in words), dtype=np.int64, count=len(words))
    score = log_list(probs.of_words(ids, left))
    if right:
        score = score + log_list(probs.after_candidates(right[0], left[-1], ids))
    if len(right) > 1:
        score = score + log_list(probs.two_after_candidates(right[1], right[0], ids))
    return list(zip((-score).tolist(), words))


def _scored(lm: KneserNeyLM, left: list[str], right: list[str], cands: set[str]) -> list[tuple[float, str]]:
    """(-score, w) of every fillable candidate, one candidate and one probability at a time."""
    scored = []
    for w in cands:
        if not _is_word(w) or (FILL_CONTENT_WORDS_ONLY and (w in FUNCTION_WORDS or len(w) < 3)):
            continue
        score = math.log(lm.prob(w, left))
        ctx = [*left, w]
        for r in right:
            score += math.log(lm.prob(r, ctx))
            ctx.append(r)
        scored.append((-score, w))
    return scored


def _best_word(lm: KneserNeyLM, left: list[str], right: list[str], extra: Iterable[str],
               triggers: TriggerModel | None = None, context: Sequence[str] = (),
               batched: bool = False) -> str:  # fmt: skip
    """argmax_w log P(w | left) + sum_k log P(right_k | left, w, right_<k)
    + TRIGGER_WEIGHT * association(w, context), the last term for the top candidates only;
    ties go to the alphabetically smaller word. ``batched``: the candidates' probabilities at once."""
    cands = lm.followers(left) | set(lm.frequent) | set(extra)
    if right:
        cands |= lm.preceders.get(right[0], frozenset())
    scored = (_scored_batched if batched else _scored)(lm, left, right, cands)
    if not scored:
        return lm.frequent[0]
    top = sorted(scored)[:RERANK_TOP]
    if triggers is not None and TRIGGER_WEIGHT:
        top = sorted((s - TRIGGER_WEIGHT * triggers.association(w, context), w) for s, w in top)
    return top[0][1]


def _fill_one(lm: KneserNeyLM, text: str, triggers: TriggerModel | None = None, batched: bool = False) -> str:
    """Replace each ``[MASK]`` of ``text``, left to right, with the model's top-1 word.

    Candidates are the words seen after the left context or before the right word, the most
    frequent words and the words of the text itself; the filled word takes the casing it has in
    the text or in training, and a capital at the start of a sentence.
    """
    if MASK not in text:
        return text
    surface_in_text: dict[str, str] = {}
    for s in split_sentences(text):
        for j, tok in enumerate(_TOKEN_RE.findall(s)):
            if j > 0 and tok != MASK:
                surface_in_text.setdefault(tok.lower(), tok)
    context = sorted(set(content_words(text.replace(MASK, " "))))
    pieces = re.split(r"(\[MASK\])", text)
    out = []
    for k, piece in enumerate(pieces):
        if piece != MASK:
            out.append(piece)
            continue
        before, after = "".join(out), "".join(pieces[k + 1 :])
        ends = list(_SENT_END.finditer(before))
        left_sent = before[ends[-1].end() :] if ends else before
        end = _SENT_END_RIGHT.search(after)
        right_sent = after[: end.start()] if end else after
        left = [BOS] * (lm.order - 1) + lm_tokens(left_sent)
        right = lm_tokens(right_sent)
        cut = right.index(MASK) if MASK in right else None  # the context stops at the next mask
        right = right[:cut][: lm.order - 1]
        if cut is None and len(right) < lm.order - 1:
            right.append(EOS)
        word = _best_word(lm, left, right, surface_in_text, triggers, context, batched)
        word = surface_in_text.get(word) or lm.surface.get(word, word)
        if not left_sent.strip():
            word = word[:1].upper() + word[1:]
        out.append(word)
    return "".join(out)


def fill_mask(texts: Sequence[str], batched: bool = True) -> list[str]:
    """Batched Fill Mask: each ``[MASK]`` replaced by the trigram model's top-1 word (``batched=False``:
    each candidate scored alone, the reference the batched scoring is checked and timed against)."""
    texts = _check_texts("Fill Mask", texts)
    lm, triggers = language_model(), trigger_model()
    return [_fill_one(lm, t, triggers, batched) for t in texts]
