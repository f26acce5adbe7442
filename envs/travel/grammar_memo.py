"""One plan grammar per query content and tokenizer content in a process, shared by every env.

A cold grammar costs 0.03-1.3 s (3- to 7-day queries, :mod:`envs.travel.grammar`), and the decoder
caches its tables by grammar identity. :meth:`envs.travel.env.TravelPlannerEnv.grammar` keeps the
grammars of its own queries; this memo lets a second env of the same sandbox (the held-out env of
an evaluation, another arm, a rebuilt env) and a reloaded copy of the same tokenizer reuse the
grammar already built, instead of building it again.

The key is the query's candidates (:meth:`envs.travel.candidates.QueryCandidates.as_json`: every
string a plan may name, in order), ``max_attractions`` and the tokenizer's content (a fast
tokenizer's full serialisation: vocabulary, merges, normaliser, added tokens). Grammars are held
weakly: one lives as long as an env (or the decoder) holds it, so the memo adds no memory. A
tokenizer without a serialisation is not shared (each build is its own).
"""

from __future__ import annotations

import hashlib
import json
import weakref
from typing import Any

from envs.travel.candidates import QueryCandidates
from envs.travel.grammar import TravelPlanGrammar, build_travel_grammar

_GRAMMARS: weakref.WeakValueDictionary[tuple[str, str, int], TravelPlanGrammar] = weakref.WeakValueDictionary()
_TOKENIZER_KEYS: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()


def tokenizer_key(tokenizer: Any) -> str | None:
    """A digest of what tokenises a row: the tokenizer's class and full serialisation (memoised per
    tokenizer object), or None for a tokenizer that cannot be serialised."""
    try:
        return _TOKENIZER_KEYS[tokenizer]
    except (KeyError, TypeError):
        pass
    backend = getattr(tokenizer, "backend_tokenizer", None)
    key = None
    if backend is not None and hasattr(backend, "to_str"):
        h = hashlib.sha256(type(tokenizer).__qualname__.encode())
        h.update(backend.to_str().encode())
        h.update(json.dumps(getattr(tokenizer, "special_tokens_map", {}), sort_keys=True, default=str).encode())
        key = h.hexdigest()
    try:
        _TOKENIZER_KEYS[tokenizer] = key
    except TypeError:  # not weakly referenceable: computed again next time
        pass
    return key


def candidates_key(candidates: QueryCandidates) -> str:
    """A digest of the query's candidates, in their order (the grammar's options keep it)."""
    return hashlib.sha256(json.dumps(candidates.as_json()).encode()).hexdigest()


def shared_grammar(tokenizer: Any, candidates: QueryCandidates, max_attractions: int = 2) -> TravelPlanGrammar:
    """:func:`envs.travel.grammar.build_travel_grammar`, built once per (tokenizer content,
    candidates, ``max_attractions``) while any holder keeps the grammar alive."""
    tok = tokenizer_key(tokenizer)
    if tok is None:
        return build_travel_grammar(tokenizer, candidates, max_attractions)
    key = (tok, candidates_key(candidates), int(max_attractions))
    grammar = _GRAMMARS.get(key)
    if grammar is None:
        grammar = build_travel_grammar(tokenizer, candidates, max_attractions)
        _GRAMMARS[key] = grammar
    return grammar


def clear() -> None:
    """Forget every shared grammar (a benchmark's cold start)."""
    _GRAMMARS.clear()
