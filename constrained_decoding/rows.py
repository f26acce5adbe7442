"""Row languages from enumerated texts: tokenisation in context, the minimal DFA, and meanings.

A grammar whose rows are small finite languages (OpenAGI's plans: at most ~17k rows per
signature) describes each language as a list of :class:`RowText` (what a finished row *means*
and its text) and calls :func:`build_row_languages`: every text is tokenised whole with the
tokenizer (``add_special_tokens=False``, then EOS where the row ends the action), and the minimal
DFA of all languages is built with one start state per language (:func:`constrained_decoding.dfa.build_dfa`).

*Tokenisation in context.* Whatever the tokenizer does at word boundaries (``▁Image`` vs
``Image``, byte-level ``ĠImage``, WordPiece ``##`` pieces, BPE merges across ``", "`` or ``)``)
the allowed sequences are exactly the ones teacher forcing sees. Rows that tokenise to ``<unk>``,
two texts that tokenise identically (a lowercasing tokenizer) and one text listed twice in a
language (two entries with the same name) are :class:`GrammarError`\\ s that name the cause.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from constrained_decoding.dfa import TokenDFA, build_dfa
from constrained_decoding.protocol import Tokens


class GrammarError(ValueError):
    """The tokenizer cannot express a grammar (unknown tokens, ambiguous tokenisation, no row)."""


def special_ids(tokenizer) -> tuple[int, int]:
    """(end-of-row id, pad id): EOS, else SEP (WordPiece tokenizers); pad falls back to EOS."""
    eos = tokenizer.eos_token_id
    if eos is None:
        eos = tokenizer.sep_token_id
    if eos is None:
        raise GrammarError(
            f"{type(tokenizer).__name__} has neither an eos_token nor a sep_token: a plan row needs an "
            "end-of-sequence token (set tokenizer.eos_token)"
        )
    pad = tokenizer.pad_token_id
    return int(eos), int(eos if pad is None else pad)


MEMO_LIMIT = 2_000_000  # encoded texts remembered per tokenizer (cleared when full)
_memos: "weakref.WeakKeyDictionary[Any, tuple[int, dict[str, tuple[int, ...]]]]" = weakref.WeakKeyDictionary()


def encode_texts(tokenizer, texts: list[str]) -> list[tuple[int, ...]]:
    """Token ids of each text as ``tokenizer(texts, add_special_tokens=False)`` gives them.

    Remembered per tokenizer (and its vocabulary size, so added tokens invalidate it): the grammars
    of many prompts share most of their row texts -- a travel query's ~13k rows are ~6x
    redundant across the benchmark's queries -- and encoding dominated building them."""
    if not texts:
        return []
    try:
        size, memo = _memos.get(tokenizer, (None, None))
    except TypeError:  # not weakly referenceable / hashable: no memo
        return _encode(tokenizer, texts)
    if memo is None or size != len(tokenizer):
        memo = {}
        _memos[tokenizer] = (len(tokenizer), memo)
    missing = [t for t in dict.fromkeys(texts) if t not in memo]
    fresh = dict(zip(missing, _encode(tokenizer, missing))) if missing else {}
    out = [memo[t] if t in memo else fresh[t] for t in texts]
    if len(memo) + len(fresh) > MEMO_LIMIT:
        memo.clear()
    memo.update(fresh)
    return out


def _encode(tokenizer, texts: list[str]) -> list[tuple[int, ...]]:
    """Fast tokenizers go straight to their Rust backend (several times faster on the ~17k plans
    of a full-registry signature), after checking on a sample that it agrees with the HF call."""
    if not texts:
        return []
    backend = getattr(tokenizer, "backend_tokenizer", None)
    via_hf = lambda xs: [tuple(ids) for ids in tokenizer(xs, add_special_tokens=False)["input_ids"]]  # noqa: E731
    if backend is None or len(texts) < 256:
        return via_hf(texts)
    fast = [tuple(e.ids) for e in backend.encode_batch(texts, add_special_tokens=False)]
    probe = texts[:: max(1, len(texts) // 64)]
    if via_hf(probe) != fast[:: max(1, len(texts) // 64)]:
        return via_hf(texts)
    return fast


@dataclass(frozen=True)
class RowText:
    """One allowed row: what it means when finished, its text, and whether EOS ends it (a row
    that ends the action; a row closed by its own text, such as ``...)``, needs none)."""

    meaning: Hashable
    text: str
    eos: bool = True


@dataclass(eq=False)
class RowLanguages:
    """The minimal DFA of several row languages (one start state each) and the rows' meanings."""

    dfa: TokenDFA = field(repr=False)
    starts: tuple[int, ...]
    eos_id: int
    pad_id: int
    _meaning: list[dict[Tokens, Hashable]] = field(repr=False)
    _tokens: list[dict[Hashable, Tokens]] = field(repr=False)
    _language: dict[int, int] = field(repr=False)

    def language_of(self, start: int) -> int:
        """The language whose start state is ``start``."""
        return self._language[start]

    def meaning(self, start: int, tokens: Sequence[int]) -> Hashable:
        """What a finished row of the language starting at ``start`` means (``ValueError`` if none)."""
        try:
            return self._meaning[self._language[start]][tuple(int(t) for t in tokens)]
        except KeyError:
            raise ValueError(f"token ids {list(tokens)} are not a complete row starting at state {start}") from None

    def tokens(self, language: int, meaning: Hashable) -> Tokens:
        """The token ids of the row of ``language`` that means ``meaning`` (``KeyError`` if none)."""
        return self._tokens[language][meaning]

    def size(self, language: int) -> int:
        return len(self._tokens[language])


def _same_ids(tokenizer, first: str, second: str, where: str) -> str:
    """Why two rows of one language have the same token ids: the same text given twice (the
    grammar's builder listed one row twice -- two table rows with the same name, say), or two
    texts the tokenizer does not tell apart."""
    if first == second:
        return (f"{where} lists the row {first!r} twice (two entries that write the same text, such as two "
                "table rows with the same name): the decoder can only offer it once, so its builder should "
                "list each text once")
    return (f"{type(tokenizer).__name__} gives the same token ids to {first!r} and {second!r}: the decoder "
            "could not tell these plans apart (a lowercasing tokenizer with tool names that differ only in case?)")


def _row_culprit(text: str) -> str:
    return f"the row text {text!r}"


def build_row_languages(tokenizer, languages: Sequence[Sequence[RowText]], *, where: str,
                        culprit: Callable[[str], str] = _row_culprit) -> RowLanguages:
    """Tokenise every row text in context and build the minimal DFA of the languages.

    ``where`` names the grammar in errors; ``culprit(text)`` names what of a row text a tokenizer
    cannot represent (a tool name, say). Meanings must be unique within a language."""
    eos, pad = special_ids(tokenizer)
    flat = [(k, row) for k, lang in enumerate(languages) for row in lang]
    encoded = encode_texts(tokenizer, [row.text for _, row in flat])
    unk = tokenizer.unk_token_id
    meanings: list[dict[Tokens, Hashable]] = [{} for _ in languages]
    tokens_of: list[dict[Hashable, Tokens]] = [{} for _ in languages]
    texts: list[dict[Tokens, str]] = [{} for _ in languages]
    for (k, row), ids in zip(flat, encoded):
        if unk is not None and unk in ids:
            raise GrammarError(
                f"{type(tokenizer).__name__} cannot represent {culprit(row.text)}: "
                f"it encodes to the unknown token {tokenizer.unk_token!r} (needed for {where})"
            )
        if not ids:
            raise GrammarError(f"{type(tokenizer).__name__} encodes the row {row.text!r} to no tokens")
        seq = tuple(ids) + ((eos,) if row.eos else ())
        if seq in meanings[k]:
            raise GrammarError(_same_ids(tokenizer, texts[k][seq], row.text, where))
        meanings[k][seq], texts[k][seq] = row.meaning, row.text
        tokens_of[k][row.meaning] = seq
    dfa, starts = build_dfa([list(m) for m in meanings], pad_id=pad)
    language: dict[int, int] = {}
    for k, s in enumerate(starts):
        language.setdefault(s, k)
    if len(language) != len(starts):  # two row languages with identical token sets: impossible
        raise GrammarError(f"two row types of {where} tokenise identically")  # pragma: no cover
    return RowLanguages(dfa, tuple(starts), eos, pad, meanings, tokens_of, language)


class RowLanguageGrammar:
    """The automaton half of the Grammar protocol for a grammar whose rows are one
    :class:`RowLanguages` (``self.rows``, root language first): envs subclass it and add the
    meaning half (``branch_starts``, ``assemble``, ``rows_for``, ``format``, ``enumerate``)."""

    rows: RowLanguages

    @property
    def dfa(self) -> TokenDFA:
        return self.rows.dfa

    @property
    def eos_id(self) -> int:
        return self.rows.eos_id

    @property
    def pad_id(self) -> int:
        return self.rows.pad_id

    @property
    def root(self) -> int:
        return self.rows.starts[0]

