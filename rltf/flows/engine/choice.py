"""A "choice among listed strings" grammar: the answer of a node is exactly one of its options.

:class:`ChoiceGrammar` implements :class:`constrained_decoding.protocol.Grammar` with one row
language (no branch rows): every option text tokenised in context (``add_special_tokens=False``)
followed by EOS, compiled to its minimal DFA by :func:`constrained_decoding.rows.build_row_languages`.
So constrained decoding can only emit an option, π_c sums to 1 over the options, and
:func:`constrained_decoding.logprobs.plan_logprobs` scores an option (or the decoded rows) exactly.

The decoder caches its tables per grammar object, so build one grammar per (tokenizer, options)
and reuse it: :func:`choice_grammar` caches them.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Sequence

from constrained_decoding.protocol import Row
from constrained_decoding.rows import (
    GrammarError,
    RowLanguageGrammar,
    RowText,
    build_row_languages,
)

__all__ = ["ChoiceError", "ChoiceGrammar", "choice_grammar"]


class ChoiceError(ValueError):
    """An answer that is not one of a choice grammar's options (probability 0 under π_c)."""


class ChoiceGrammar(RowLanguageGrammar):
    """Exactly one of ``options`` (see the module docstring). Actions are the option strings; an
    option listed twice is one option (``options`` keeps the first of each, in order)."""

    branching = False

    def __init__(self, tokenizer, options: Sequence[str]):
        opts = tuple(options)
        if not opts or not all(isinstance(o, str) and o for o in opts):
            raise GrammarError(f"a choice grammar needs a non-empty list of non-empty strings, got {options!r}")
        opts = tuple(dict.fromkeys(opts))  # an option listed twice is one answer (the same string)
        self.options = opts
        self._index = {o: i for i, o in enumerate(opts)}
        self.rows = build_row_languages(tokenizer, [[RowText(i, o) for i, o in enumerate(opts)]],
                                        where=f"a choice among {len(opts)} options",
                                        culprit=lambda text: f"the option {text!r}")

    # the Grammar protocol (the automaton half comes from RowLanguageGrammar)
    def branch_starts(self, root_tokens: Sequence[int]) -> tuple[int, ...]:
        return ()

    def assemble(self, root_tokens: Sequence[int], branch_tokens: Sequence[Sequence[int]] = ()) -> str:
        """The option a finished row spells."""
        if branch_tokens:
            raise ValueError("a choice grammar has no branch rows")
        return self.options[self.rows.meaning(self.root, root_tokens)]  # type: ignore[index]

    def rows_for(self, action: str) -> list[Row]:
        """The one row of an option; :class:`ChoiceError` for anything else."""
        i = self._index.get(action) if isinstance(action, str) else None
        if i is None:
            raise ChoiceError(f"{action!r} is not one of the options {list(self.options)}")
        return [(self.root, self.rows.tokens(0, i))]

    def format(self, action: str) -> str:
        return action

    def enumerate(self) -> Iterator[str]:
        return iter(self.options)

    def __repr__(self) -> str:
        shown = ", ".join(repr(o) for o in self.options[:4]) + (", ..." if len(self.options) > 4 else "")
        return f"ChoiceGrammar([{shown}], {self.dfa.num_states} states)"


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def choice_grammar(tokenizer, options: Sequence[str]) -> ChoiceGrammar:
    """The :class:`ChoiceGrammar` of ``options`` for ``tokenizer``, built once and reused (the
    decoder caches its tables per grammar object)."""
    key = tuple(options)
    try:
        per_tok = _CACHE.setdefault(tokenizer, {})
    except TypeError:  # a tokenizer that cannot be weakly referenced: no cache
        return ChoiceGrammar(tokenizer, key)
    g = per_tok.get(key)
    if g is None:
        g = per_tok[key] = ChoiceGrammar(tokenizer, key)
    return g
