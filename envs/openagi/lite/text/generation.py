"""Text Generation, the distractor expert: a short continuation sampled from the trigram model
mixed with a cache of the input's content words, seeded from the input."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from envs.openagi.lite.text.common import BOS, EOS, _check_texts, _is_word, lm_tokens, split_sentences
from envs.openagi.lite.text.ngram import KneserNeyLM, language_model
from envs.openagi.task_data.texts import FUNCTION_WORDS

GEN_WORDS = (8, 15)
"""Inclusive range of words the Text Generation distractor appends."""
GEN_CACHE_WEIGHT = 0.3
"""Probability of drawing the next word from the input's own content words (a unigram cache,
Kuhn & De Mori 1990): keeps the continuation on the input's topic, as a real generator would."""


def _text_seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


def _continue_one(lm: KneserNeyLM, text: str) -> str:
    rng = np.random.default_rng(_text_seed(text))
    n_words = int(rng.integers(GEN_WORDS[0], GEN_WORDS[1] + 1))
    stripped = text.rstrip()
    open_sentence = bool(stripped) and not re.search(r"[.!?][\"')\]]?$", stripped)
    ctx = [BOS] * (lm.order - 1)
    if open_sentence:
        ctx += lm_tokens(split_sentences(stripped)[-1])
    cache = [t for s in split_sentences(stripped) for t in lm_tokens(s)
             if _is_word(t) and t not in FUNCTION_WORDS and len(t) > 2]  # fmt: skip
    surface = {t.lower(): t for s in split_sentences(stripped) for t in lm_tokens(s, lower=False)[1:]}
    words: list[str] = []
    pieces: list[str] = []
    start_of_sentence = not open_sentence
    while len(words) < n_words:
        w = lm.sample(ctx, rng)
        if cache and rng.random() < GEN_CACHE_WEIGHT:
            pick = cache[int(rng.integers(len(cache)))]
            w = w if pick == ctx[-1] else pick  # no immediate repeats ("food food")
        if w == EOS or (w == "," and (start_of_sentence or (pieces and pieces[-1].endswith(",")))):
            if pieces and not start_of_sentence:
                pieces[-1] = pieces[-1].rstrip(",") + "."
                start_of_sentence = True
                if len(words) >= GEN_WORDS[0]:
                    break
            ctx = [BOS] * (lm.order - 1)
            continue
        if w == "," and not pieces:
            pass  # the input's open sentence took the comma; nothing to attach it to
        elif w == ",":
            pieces[-1] += ","
        else:
            surf = surface.get(w) or lm.surface.get(w, w)
            pieces.append(surf[:1].upper() + surf[1:] if start_of_sentence else surf)
            words.append(w)
            start_of_sentence = False
        ctx.append(w)
    cont = " ".join(pieces).rstrip(",")
    return cont if cont.endswith(".") else cont + "."


def generate_text(texts: Sequence[str]) -> list[str]:
    """Batched Text Generation: 8-15 words continuing each input (deterministic per input)."""
    texts = _check_texts("Text Generation", texts)
    lm = language_model()
    return [_continue_one(lm, t) for t in texts]
