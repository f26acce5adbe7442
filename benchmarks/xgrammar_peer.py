"""The XGrammar peer of ``benchmarks/decoding.py``: HF ``generate`` constrained by XGrammar.

XGrammar (``pip install -e ".[bench]"``) is the grammar engine of the serving ecosystem (vLLM,
SGLang, TensorRT-LLM): a grammar over *strings* (EBNF), compiled against a tokenizer's vocabulary,
and a matcher per sequence that fills the next-token bitmask. Three things are needed to run it on
our plan language with our planners, and this module does them:

1. :func:`token_bytes` / :func:`tokenizer_info`: what each token id *writes*.
   ``TokenizerInfo.from_huggingface`` reads a WordPiece vocabulary as raw text: ``##ing`` would
   write ``"##ing"`` and ``image`` would write ``"image"`` with no word boundary, so no plan text
   could be produced. Here every token writes the bytes the tokenizer's decoder gives it *in
   context* (after an anchor word, decoder cleanup off): WordPiece ``image`` -> ``" image"``,
   ``##ing`` -> ``"ing"``; Metaspace ``▁Image`` -> ``" Image"``; byte-level BPE ``ĠImage`` ->
   ``" Image"`` (bytes, so partial UTF-8 pieces stay exact). Special tokens (``[CLS]``, ``<pad>``,
   ...) write nothing, which XGrammar treats as never allowed; EOS (``[SEP]`` for WordPiece) is
   the stop token.
2. :func:`plan_ebnf`: the plan language as a trie-shaped EBNF. The language is the benchmark's
   (``PrefixFn`` in ``decoding_openagi.py``): for one task signature, every valid plan's canonical text
   (``format_plan``: linear ``A, B`` and nonlinear ``(B1, B2) (C1) J, T`` plans in one row),
   tokenised whole, then EOS. Its string is what those tokens write (WordPiece: lowercased, a
   space before each word and each punctuation mark). The EBNF is written from the minimal DFA of
   the token sequences (:func:`constrained_decoding.dfa.build_dfa`): one rule per branching state,
   chains of single-choice tokens merged into one literal, and alternatives that share leading
   characters factored (``" image" (" captioning" s3 | " classification" s4)``), so the matcher
   never carries two live alternatives for more than a character. A flat list of plan strings
   (:func:`flat_ebnf`, ``root ::= "plan 1" | "plan 2" | ...``) is the same language and many times
   slower per mask (the Earley parser advances every alternative in parallel).
3. :class:`XGrammarLogitsProcessor`: a ``LogitsProcessor`` with one ``GrammarMatcher`` per row.
   ``xgrammar.contrib.hf.LogitsProcessor`` assumes row ``i`` stays row ``i``; under beam search HF
   reorders rows every step (the running beams are re-ranked), so it feeds tokens to the wrong
   matcher and fails. Here a row's matcher is found by its ancestry: matchers are keyed by
   ``(prompt, prefix)``; at each step a row's parent is its prefix minus the last token, a parent
   with several children is forked (``GrammarMatcher.fork``) and each child accepts its token.

The allowed token sequences are *not* exactly ours: XGrammar allows every tokenisation of a plan
string (WordPiece ``im ##age`` as well as ``image``), ours only the canonical one (what teacher
forcing scores). Both accept exactly the same plan strings, and XGrammar's set contains ours
(``tests/constrained_decoding/test_xgrammar_peer.py`` checks both).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
import xgrammar as xgr
from tokenizers import decoders
from transformers import LogitsProcessor

from constrained_decoding.dfa import TokenDFA, build_dfa
from constrained_decoding.rows import special_ids

__all__ = ["XGrammarLogitsProcessor", "XGrammarPlans", "flat_ebnf", "plan_ebnf", "token_bytes",
           "tokenizer_info"]


# ------------------------------------------------------------------------------ tokenizer info


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted (``Ġ`` -> 0x20, ...)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _is_byte_level(decoder) -> bool:
    if isinstance(decoder, decoders.ByteLevel):
        return True
    return '"ByteLevel"' in (decoder.__getstate__().decode() if hasattr(decoder, "__getstate__") else "")


def token_bytes(tokenizer, vocab_size: int | None = None) -> list[bytes]:
    """What each token id writes, as bytes (``b""`` for special tokens and ids past the tokenizer's
    vocabulary, e.g. a model's padded embedding rows); see the module docstring."""
    n = vocab_size if vocab_size is not None else len(tokenizer)
    pieces = tokenizer.convert_ids_to_tokens(list(range(min(n, len(tokenizer)))))
    special = set(tokenizer.all_special_ids) | {
        i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if t.special}
    backend = tokenizer.backend_tokenizer
    decoder = backend.decoder
    out: list[bytes] = []
    if decoder is not None and _is_byte_level(decoder):
        table = _byte_decoder()
        for i, p in enumerate(pieces):
            out.append(b"" if i in special or p is None else bytes(table[c] for c in p if c in table))
    else:
        if isinstance(decoder, decoders.WordPiece):  # no cleanup: " ," stays " ," (cleanup is text-level)
            decoder = decoders.WordPiece(prefix=decoder.prefix, cleanup=False)
        anchor = tokenizer.convert_ids_to_tokens(tokenizer.encode("a", add_special_tokens=False))[0]
        base = decoder.decode([anchor]) if decoder is not None else anchor
        for i, p in enumerate(pieces):
            if i in special or p is None:
                out.append(b"")
                continue
            s = decoder.decode([anchor, p]) if decoder is not None else anchor + p
            if not s.startswith(base):
                raise ValueError(f"cannot tell what token {i} ({p!r}) writes: {s!r} does not start with {base!r}")
            out.append(s[len(base):].encode("utf-8"))
    out += [b""] * (n - len(out))
    return out


def tokenizer_info(tokenizer, vocab_size: int | None = None,
                   strings: Sequence[bytes] | None = None) -> xgr.TokenizerInfo:
    """An XGrammar ``TokenizerInfo`` whose tokens write what :func:`token_bytes` says (or
    ``strings``); the stop token is the planner's end-of-row token (EOS, or SEP for WordPiece)."""
    eos, _ = special_ids(tokenizer)
    vocab = list(strings) if strings is not None else token_bytes(tokenizer, vocab_size)
    return xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, vocab_size=len(vocab), stop_token_ids=[eos])


# --------------------------------------------------------------------------------------- EBNF


def _literal(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _factored(alts: list[tuple[str, str]]) -> str:
    """``alt1 | alt2 | ...`` for (literal, rule reference or "") pairs, alternatives with common
    leading characters grouped under their shared prefix (a trie of the literals)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for lit, ref in alts:
        groups.setdefault(lit[:1], []).append((lit, ref))
    parts = []
    for first, group in groups.items():
        if first == "" or len(group) == 1:
            parts += [" ".join(x for x in (_literal(lit) if lit else "", ref) if x) or '""' for lit, ref in group]
            continue
        k = 1
        while all(len(lit) > k for lit, _ in group) and len({lit[k] for lit, _ in group}) == 1:
            k += 1
        rest = [(lit[k:], ref) for lit, ref in group]
        parts.append(f"{_literal(group[0][0][:k])} ({_factored(rest)})")
    return " | ".join(parts)


def plan_ebnf(dfa: TokenDFA, start: int, strings: Sequence[bytes], eos: int) -> str:
    """The EBNF of the strings of the token sequences accepted from ``start`` (they end in ``eos``,
    the stop token XGrammar adds itself): one rule per state with a choice, single-choice chains
    merged into literals, shared leading characters factored."""
    trans = dfa.transitions

    def text(tok: int) -> str:
        return strings[tok].decode("utf-8", errors="surrogateescape")

    def chain(s: int) -> tuple[str, int | None]:
        """Literal written from ``s`` up to the next state with a choice (None: the end, EOS only)."""
        lit = []
        while len(trans[s]) == 1:
            (tok, nxt), = trans[s].items()
            if tok == eos:
                return "".join(lit), None
            lit.append(text(tok))
            s = nxt
        return "".join(lit), s

    rules: dict[int, str] = {}
    first_lit, first = chain(start)
    todo = [first] if first is not None else []
    while todo:
        s = todo.pop()
        if s in rules:
            continue
        alts = []
        for tok, nxt in trans[s].items():
            if tok == eos:
                alts.append(("", ""))
                continue
            lit, t = chain(nxt)
            alts.append((text(tok) + lit, f"s{t}" if t is not None else ""))
            if t is not None and t not in rules:
                todo.append(t)
        rules[s] = _factored(alts)
    root = " ".join(x for x in (_literal(first_lit) if first_lit else "",
                                 f"s{first}" if first is not None else "") if x)
    lines = [f"root ::= {root}"] + [f"s{s} ::= {body}" for s, body in sorted(rules.items())]
    return "\n".join(lines) + "\n"


def flat_ebnf(sequences: Sequence[Sequence[int]], strings: Sequence[bytes], eos: int) -> str:
    """The same language as one alternative per plan (``root ::= "plan 1" | "plan 2" | ...``): the
    naive way to write it, for comparison."""
    texts = sorted({b"".join(strings[t] for t in seq if t != eos).decode("utf-8", errors="surrogateescape")
                    for seq in sequences})
    return "root ::= " + " | ".join(_literal(t) for t in texts) + "\n"


class XGrammarPlans:
    """Compiled XGrammar grammars of token-sequence languages (one per language), with their times.

    ``languages``: per language the allowed token sequences, each ending in the tokenizer's EOS
    (the benchmark's canonical plans). ``layout``: "trie" (:func:`plan_ebnf`) or "flat"
    (:func:`flat_ebnf`). Times: ``info_s`` (TokenizerInfo and compiler setup, once per tokenizer),
    ``dfa_s`` (the minimal DFA of all languages' token sequences, that the trie EBNF is written
    from), ``compile_s`` per language (EBNF writing, parsing and XGrammar's compilation: its token
    mask cache)."""

    def __init__(self, tokenizer, languages: Sequence[Sequence[Sequence[int]]], vocab_size: int | None = None,
                 layout: str = "trie", threads: int = 1):
        t = time.perf_counter()
        self.eos, self.pad = special_ids(tokenizer)
        self.strings = token_bytes(tokenizer, vocab_size)
        self.info = tokenizer_info(tokenizer, strings=self.strings)
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=threads, cache_enabled=False)
        self.info_s = time.perf_counter() - t
        self.vocab_size = len(self.strings)
        t = time.perf_counter()
        dfa, starts = build_dfa(languages, pad_id=self.pad) if layout == "trie" else (None, [None] * len(languages))
        self.dfa_s = time.perf_counter() - t
        self.ebnf: list[str] = []
        self.compiled: list[xgr.CompiledGrammar] = []
        self.compile_s: list[float] = []
        for lang, start in zip(languages, starts):
            t = time.perf_counter()
            if layout == "trie":
                ebnf = plan_ebnf(dfa, start, self.strings, self.eos)
            elif layout == "flat":
                ebnf = flat_ebnf(lang, self.strings, self.eos)
            else:
                raise ValueError(f"layout must be 'trie' or 'flat', not {layout!r}")
            self.compiled.append(self.compiler.compile_grammar(ebnf))
            self.compile_s.append(time.perf_counter() - t)
            self.ebnf.append(ebnf)

    def matcher(self, language: int) -> xgr.GrammarMatcher:
        return xgr.GrammarMatcher(self.compiled[language])


# ---------------------------------------------------------------------------- logits processor


class XGrammarLogitsProcessor(LogitsProcessor):
    """HF ``LogitsProcessor``: masks every row's scores to what its XGrammar matcher allows.

    ``grammars[b]``: the compiled grammar of prompt ``b``; ``rows_per_prompt``: rows of each prompt
    in the batch (``num_beams`` under beam search, ``num_return_sequences`` when sampling). With
    ``beam=True`` matchers follow the rows' ancestry (see the module docstring); else row ``i``
    keeps its matcher. A row whose matcher has stopped (or that took a token its grammar rejects:
    a beam HF keeps at score -inf when fewer tokens than beams are allowed) may only emit ``pad``.
    One processor per ``generate`` call. ``threads``: XGrammar's threads filling the masks.

    ``apply``: how the bitmask is applied to the scores. "sparse" (default) keeps the allowed
    scores (read off the bitmask's set bits) and fills the rest with -inf: ~2 ms for 128 rows of a
    30,522-token vocabulary on one CPU thread, where XGrammar's own CPU kernel
    (``xgrammar.apply_token_bitmask_inplace``, "xgrammar") takes ~35 ms and would dominate the
    peer's cost. ``seconds`` accumulates the processor's own time (matchers, mask, apply)."""

    def __init__(self, grammars: Sequence[xgr.CompiledGrammar], rows_per_prompt: int, pad_id: int,
                 beam: bool, threads: int = 1, apply: str = "sparse"):
        if apply not in ("sparse", "xgrammar"):
            raise ValueError(f"apply must be 'sparse' or 'xgrammar', not {apply!r}")
        self.apply = apply
        self.seconds = 0.0
        self._shifts = torch.arange(32, dtype=torch.int32)
        self.grammars = list(grammars)
        self.rows_per_prompt = rows_per_prompt
        self.pad = pad_id
        self.beam = beam
        self.vocab_size = self.grammars[0].tokenizer_info.vocab_size
        self.filler = xgr.BatchGrammarMatcher(max_threads=threads)
        self.bitmask: torch.Tensor | None = None
        self.matchers: dict[object, xgr.GrammarMatcher | None] | None = None  # None: dead row

    def _step_beam(self, ids: list[list[int]]) -> list[object]:
        """Advance the matchers to the rows' new tokens; the rows' keys."""
        rpp = self.rows_per_prompt
        keys: list[object] = [(i // rpp, tuple(row)) for i, row in enumerate(ids)]
        if self.matchers is None:
            self.matchers = {k: xgr.GrammarMatcher(self.grammars[k[0]]) for k in dict.fromkeys(keys)}
            return keys
        children: dict[object, list[object]] = {}
        for k in dict.fromkeys(keys):
            children.setdefault((k[0], k[1][:-1]), []).append(k)
        new: dict[object, xgr.GrammarMatcher | None] = {}
        for parent, kids in children.items():
            m = self.matchers.get(parent)
            if m is None:  # a dead row's children are dead (or an unknown parent: a bug)
                if parent not in self.matchers:
                    raise RuntimeError(f"row prefix {parent} has no matcher: rows do not follow the beams")
                new.update(dict.fromkeys(kids))
                continue
            ms = [m.fork() for _ in kids[1:]] + [m]
            for kid, mk in zip(kids, ms):
                tok = kid[1][-1]
                new[kid] = mk if (not mk.is_terminated() and mk.accept_token(tok)) else None
        self.matchers = new
        return keys

    def _step_rows(self, ids: list[list[int]]) -> list[object]:
        keys: list[object] = list(range(len(ids)))
        if self.matchers is None:
            self.matchers = {i: xgr.GrammarMatcher(self.grammars[i // self.rows_per_prompt]) for i in keys}
            return keys
        for i, row in enumerate(ids):
            m = self.matchers[i]
            if m is not None and not m.is_terminated() and not m.accept_token(row[-1]):
                self.matchers[i] = None
        return keys

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        t = time.perf_counter()
        try:
            return self._call(input_ids, scores)
        finally:
            self.seconds += time.perf_counter() - t

    def _apply_sparse(self, scores: torch.Tensor, bitmask: torch.Tensor) -> None:
        """``scores[i, j] = -inf`` where bit ``j`` of row ``i`` is unset (read the set bits only)."""
        rows, words = bitmask.nonzero().unbind(1)
        bits = ((bitmask[rows, words].unsqueeze(-1) >> self._shifts) & 1).bool()
        hit, bit = bits.nonzero().unbind(1)
        rows, cols = rows[hit], words[hit] * 32 + bit
        keep = cols < scores.shape[1]
        rows, cols = rows[keep], cols[keep]
        kept = scores[rows, cols]
        scores.fill_(float("-inf"))
        scores[rows, cols] = kept

    def _call(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        n = input_ids.shape[0]
        if self.bitmask is None or self.bitmask.shape[0] < n:
            self.bitmask = xgr.allocate_token_bitmask(n, self.vocab_size)
        ids = input_ids.tolist()
        keys = self._step_beam(ids) if self.beam else self._step_rows(ids)
        first: dict[object, int] = {}
        fill, fill_rows, copies, stopped = [], [], [], []
        for i, k in enumerate(keys):
            if k in first:
                copies.append((i, first[k]))
                continue
            first[k] = i
            m = self.matchers[k]
            if m is None or m.is_terminated():
                stopped.append(i)
            else:
                fill.append(m)
                fill_rows.append(i)
        bitmask = self.bitmask
        if fill:
            self.filler.batch_fill_next_token_bitmask(fill, bitmask, fill_rows)
        if stopped:
            bitmask[stopped] = 0
            bitmask[stopped, self.pad // 32] = torch.tensor(1 << (self.pad % 32), dtype=torch.int64).to(torch.int32)
        for i, j in copies:
            bitmask[i] = bitmask[j]
        if self.apply == "sparse":
            self._apply_sparse(scores, bitmask[:n])
        else:
            xgr.apply_token_bitmask_inplace(scores, bitmask[:n], vocab_size=self.vocab_size)
        return scores
