"""Text utilities shared by the lite text experts: sentences, LM tokens, content words, and the
check that a batch holds text."""

from __future__ import annotations

import re
from collections.abc import Sequence

from envs.openagi.task_data.texts import FUNCTION_WORDS, MASK

BOS, EOS = "<s>", "</s>"

_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+")
_TOKEN_RE = re.compile(r"\[MASK\]|[A-Za-z0-9]+(?:['\-.,:][A-Za-z0-9]+)*|[,;:]")
_WORDLIKE = re.compile(r"^[a-z0-9]+(?:['\-.,:][a-z0-9]+)*$")


def _check_texts(name: str, batch: Sequence[object]) -> list[str]:
    bad = [x for x in batch if not isinstance(x, str)]
    if bad:
        raise TypeError(f"{name} expects text (str) inputs, got {type(bad[0]).__name__}")
    return list(batch)  # type: ignore[arg-type]


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (split after . ! ? followed by whitespace), stripped, non-empty."""
    return [s.strip() for s in _SENT_SPLIT.split(text.strip()) if s.strip()]


def lm_tokens(sentence: str, lower: bool = True) -> list[str]:
    """LM tokens of one sentence: words, numbers, commas (";" and ":" become ","), and
    ``[MASK]`` kept as is; lowercased unless ``lower=False``."""
    out = []
    for tok in _TOKEN_RE.findall(sentence):
        if tok == MASK:
            out.append(MASK)
        elif tok in ",;:":
            out.append(",")
        else:
            out.append(tok.lower() if lower else tok)
    return out


def _is_word(tok: str) -> bool:
    return bool(_WORDLIKE.match(tok)) and tok not in (BOS, EOS)


def content_words(text: str) -> list[str]:
    """Lowercase content words of a text (no function words, three letters or more)."""
    return [t for s in split_sentences(text) for t in lm_tokens(s)
            if _is_word(t) and t not in FUNCTION_WORDS and len(t) > 2 and not t[0].isdigit()]  # fmt: skip
