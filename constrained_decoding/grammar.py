"""The plan grammar of one task signature, over the token ids a real tokenizer produces.

A *row* is one decoder sequence. A linear task has one row per plan; a nonlinear task has a
*head* row (its join tool and tail) and one *branch* row per input (see
:mod:`constrained_decoding` for the factorisation). The texts of the rows are

====================  ==============================================================
linear row            ``Image Denoising, Image Captioning`` + EOS (the canonical plan)
head row              ``Visual Question Answering, Machine Translation`` + EOS
branch row ``i``      ``Visual Question Answering, Machine Translation; branch 1: (Image Denoising)``
====================  ==============================================================

so the decoded rows assemble into exactly :func:`envs.openagi.plans.format_plan`'s text.

*Tokenisation in context.* We enumerate every allowed row text of the signature, tokenise each
whole text with the tokenizer (``add_special_tokens=False``, then EOS) and build the minimal DFA
of those token sequences. Whatever the tokenizer does at word boundaries (``▁Image`` vs
``Image``, byte-level ``ĠImage``, WordPiece ``##`` pieces, BPE merges across ``", "`` or ``)``)
the allowed sequences are exactly the ones teacher forcing sees. Rows that tokenise to ``<unk>``
or two texts that tokenise identically (a lowercasing tokenizer) are errors that name the cause.

Size: the full OpenAGI registry has at most ~17k linear plans per signature (PlanLimits()
default); nonlinear signatures are factorised, so their rows number in the hundreds. A grammar is
built once per (tokenizer, registry, signature, limits) and cached.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from constrained_decoding.dfa import TokenDFA, build_dfa
from envs.openagi.plans import (
    SEP,
    LinearPlan,
    NonlinearPlan,
    Plan,
    PlanLimits,
    check_plan,
    enumerate_plans,
    parse_plan,
)
from envs.openagi.registry import ToolRegistry

BRANCH_MARK = "; branch {index}: ("
"""Between the head text and the branch content in a branch row (``index`` counts from 1)."""


class GrammarError(ValueError):
    """The tokenizer cannot express the plan grammar (unknown tokens, ambiguous tokenisation)."""


Signature = tuple[tuple[str, ...], str]


def as_signature(obj: object) -> Signature:
    """``(inputs, target)`` from a tuple or from any object with ``inputs`` and ``target`` (a Task)."""
    if hasattr(obj, "inputs") and hasattr(obj, "target"):
        inputs, target = obj.inputs, obj.target  # type: ignore[attr-defined]
    else:
        try:
            inputs, target = obj  # type: ignore[misc]
        except (TypeError, ValueError):
            raise TypeError(f"expected a task signature (inputs, target) or a Task, got {obj!r}") from None
    if isinstance(inputs, str):
        inputs = (inputs,)
    inputs = tuple(inputs)
    if not inputs or not all(isinstance(m, str) for m in inputs) or not isinstance(target, str):
        raise TypeError(f"bad task signature {obj!r}: expected (tuple of input modalities, target modality)")
    return inputs, target


def head_text(join: str, tail: Sequence[str]) -> str:
    """The head row's text: the join tool and the tail, as in the canonical plan."""
    return SEP.join((join, *tail))


def branch_text(join: str, tail: Sequence[str], index: int, branch: Sequence[str]) -> str:
    """Branch row ``index`` (from 0): the head text, the branch indicator, the bracketed branch."""
    return head_text(join, tail) + BRANCH_MARK.format(index=index + 1) + SEP.join(branch) + ")"


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


def registry_key(registry: ToolRegistry) -> tuple:
    """What of a registry the grammar depends on: names and modalities, in order."""
    return tuple((t.name, t.inputs, t.output) for t in registry)


def _chains(registry: ToolRegistry, start: str, end: str, max_len: int, banned: Iterable[str]) -> list[tuple[str, ...]]:
    """Chains of distinct single-input tools from modality ``start`` to ``end`` (the empty one if equal)."""
    out: list[tuple[str, ...]] = [()] if start == end else []
    banned = set(banned)
    names = [t.name for t in registry.single_input() if t.name not in banned]
    if max_len >= 1 and names:
        sub = registry.subset(names)
        out += [p.tools for p in enumerate_plans(sub, (start,), end, PlanLimits(max_tools=max_len))]
    return out


@dataclass(eq=False)
class PlanGrammar:
    """Allowed token sequences of the rows of one task signature, and their meaning.

    ``root`` is the start state of the first row (the linear plan, or the head of a nonlinear
    plan); ``branch_start[h][i]`` the start of branch row ``i`` under head ``heads[h]``.
    """

    inputs: tuple[str, ...]
    target: str
    limits: PlanLimits
    registry: ToolRegistry = field(repr=False)
    eos_id: int
    pad_id: int
    dfa: TokenDFA = field(repr=False)
    root: int
    heads: tuple[tuple[str, tuple[str, ...]], ...] = ()
    branch_start: tuple[tuple[int, ...], ...] = ()
    _meaning: list[dict[tuple[int, ...], object]] = field(default_factory=list, repr=False)
    _tokens: list[dict[object, tuple[int, ...]]] = field(default_factory=list, repr=False)
    _start_lang: dict[int, int] = field(default_factory=dict, repr=False)

    @property
    def is_linear(self) -> bool:
        return len(self.inputs) == 1

    @property
    def num_branches(self) -> int:
        return 0 if self.is_linear else len(self.inputs)

    def _lang(self, start: int) -> int:
        return self._start_lang[start]

    def meaning(self, start: int, tokens: Sequence[int]):
        """What a finished row means: a LinearPlan (linear root), a head index, or a branch tuple."""
        try:
            return self._meaning[self._lang(start)][tuple(int(t) for t in tokens)]
        except KeyError:
            raise ValueError(f"token ids {list(tokens)} are not a complete row of {self}") from None

    def rows_for(self, plan: Plan | str) -> list[tuple[int, tuple[int, ...]]]:
        """The rows ``(start state, token ids)`` of a plan: what teacher forcing scores.

        Raises :class:`envs.openagi.plans.PlanError` (with the checker's reason) for a plan that is not valid here."""
        if isinstance(plan, str):
            plan = parse_plan(plan, self.registry)
        check_plan(plan, self.registry, self.inputs, self.target, self.limits)
        try:
            if isinstance(plan, LinearPlan):
                return [(self.root, self._tokens[0][plan.tools])]
            h = self.heads.index((plan.join, tuple(plan.tail)))
            rows = [(self.root, self._tokens[0][h])]
            for i, branch in enumerate(plan.branches):
                start = self.branch_start[h][i]
                rows.append((start, self._tokens[self._lang(start)][tuple(branch)]))
            return rows
        except (KeyError, ValueError) as e:  # pragma: no cover - would be a grammar bug
            raise RuntimeError(f"plan {plan} passes check_plan but is missing from the grammar ({e!r})") from e

    def assemble(self, root_tokens: Sequence[int], branch_tokens: Sequence[Sequence[int]] = ()) -> Plan:
        """The plan of decoded rows (the branch rows follow the head's ``branch_start``)."""
        first = self.meaning(self.root, root_tokens)
        if self.is_linear:
            return first  # type: ignore[return-value]
        join, tail = self.heads[first]  # type: ignore[index]
        if len(branch_tokens) != self.num_branches:
            raise ValueError(f"expected {self.num_branches} branch rows, got {len(branch_tokens)}")
        branches = [self.meaning(self.branch_start[first][i], t) for i, t in enumerate(branch_tokens)]
        return NonlinearPlan(tuple(branches), join, tail)

    def __repr__(self) -> str:
        return (f"PlanGrammar({'+'.join(self.inputs)}->{self.target}, {self.dfa.num_states} states, "
                f"{len(self._tokens[0])} {'plans' if self.is_linear else 'heads'})")


def _encode(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text as ``tokenizer(texts, add_special_tokens=False)`` gives them.

    Fast tokenizers go straight to their Rust backend (several times faster on the ~17k plans
    of a full-registry signature), after checking on a sample that it agrees with the HF call."""
    if not texts:
        return []
    backend = getattr(tokenizer, "backend_tokenizer", None)
    via_hf = lambda xs: [list(ids) for ids in tokenizer(xs, add_special_tokens=False)["input_ids"]]  # noqa: E731
    if backend is None or len(texts) < 256:
        return via_hf(texts)
    fast = [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]
    probe = texts[:: max(1, len(texts) // 64)]
    if via_hf(probe) != fast[:: max(1, len(texts) // 64)]:
        return via_hf(texts)
    return fast


def _unknown_culprit(tokenizer, registry: ToolRegistry, text: str) -> str:
    unk = tokenizer.unk_token_id
    for name in registry.names:
        if name in text and (unk in _encode(tokenizer, [name])[0] or unk in _encode(tokenizer, [f"x, {name}"])[0]):
            return f"tool name {name!r}"
    return f"the row text {text!r}"


def build_grammar(tokenizer, registry: ToolRegistry, inputs: Sequence[str], target: str,
                  limits: PlanLimits | None = None) -> PlanGrammar:
    """Enumerate the signature's rows, tokenise them in context and build their DFA (uncached)."""
    inputs, target = as_signature((inputs, target))
    limits = limits or PlanLimits()
    eos, pad = special_ids(tokenizer)
    where = f"signature {'+'.join(inputs)}->{target}"
    # languages[k]: list of (meaning, text, append_eos); language 0 is the root row
    languages: list[list[tuple[object, str, bool]]] = []
    heads: list[tuple[str, tuple[str, ...]]] = []
    if len(inputs) == 1:
        plans = list(enumerate_plans(registry, inputs, target, limits))
        languages.append([(LinearPlan(p.tools), SEP.join(p.tools), True) for p in plans])
    else:
        branch_langs: list[list[list[tuple[object, str, bool]]]] = []
        for join in registry.multi_input():
            if join.arity != len(inputs):
                continue
            for tail in _chains(registry, join.output, target, limits.max_tail, {join.name}):
                banned = {join.name, *tail}
                options = [_chains(registry, m, want, limits.max_branch, banned)
                           for m, want in zip(inputs, join.inputs)]
                if all(options):
                    heads.append((join.name, tail))
                    branch_langs.append([[(b, branch_text(join.name, tail, i, b), False) for b in opts]
                                         for i, opts in enumerate(options)])
        languages.append([(h, head_text(*head), True) for h, head in enumerate(heads)])
        for per_head in branch_langs:
            languages.extend(per_head)
    if not languages[0]:
        raise GrammarError(f"no valid plan exists for {where} with {limits} in registry {list(registry.names)}")

    flat = [(k, meaning, text, add_eos) for k, lang in enumerate(languages) for meaning, text, add_eos in lang]
    encoded = _encode(tokenizer, [text for _, _, text, _ in flat])
    unk = tokenizer.unk_token_id
    meanings: list[dict[tuple[int, ...], object]] = [{} for _ in languages]
    tokens_of: list[dict[object, tuple[int, ...]]] = [{} for _ in languages]
    texts: list[dict[tuple[int, ...], str]] = [{} for _ in languages]
    for (k, meaning, text, add_eos), ids in zip(flat, encoded):
        if unk is not None and unk in ids:
            raise GrammarError(
                f"{type(tokenizer).__name__} cannot represent {_unknown_culprit(tokenizer, registry, text)}: "
                f"it encodes to the unknown token {tokenizer.unk_token!r} (needed for {where})"
            )
        if not ids:
            raise GrammarError(f"{type(tokenizer).__name__} encodes the row {text!r} to no tokens")
        seq = tuple(ids) + ((eos,) if add_eos else ())
        if seq in meanings[k]:
            raise GrammarError(
                f"{type(tokenizer).__name__} gives the same token ids to {texts[k][seq]!r} and {text!r}: "
                "the decoder could not tell these plans apart (a lowercasing tokenizer with tool names "
                "that differ only in case?)"
            )
        meanings[k][seq], texts[k][seq] = meaning, text
        tokens_of[k][meaning] = seq
    dfa, starts = build_dfa([list(m) for m in meanings], pad_id=pad)
    start_lang = {}
    for k, s in enumerate(starts):
        start_lang.setdefault(s, k)
    if len(start_lang) != len(starts):  # two row languages with identical token sets: impossible
        raise GrammarError(f"two row types of {where} tokenise identically")  # pragma: no cover
    branch_start = []
    n = len(inputs)
    for h in range(len(heads)):
        branch_start.append(tuple(starts[1 + h * n + i] for i in range(n)))
    # tokens_of[0] is keyed by tools tuple (linear) or head index (nonlinear)
    root_tokens = {(m.tools if isinstance(m, LinearPlan) else m): s for m, s in tokens_of[0].items()}
    return PlanGrammar(
        inputs=inputs, target=target, limits=limits, registry=registry, eos_id=eos, pad_id=pad, dfa=dfa,
        root=starts[0], heads=tuple(heads), branch_start=tuple(branch_start), _meaning=meanings,
        _tokens=[root_tokens, *tokens_of[1:]], _start_lang=start_lang,
    )


_CACHE: "weakref.WeakKeyDictionary[object, dict[tuple, PlanGrammar]]" = weakref.WeakKeyDictionary()


def plan_grammar(tokenizer, registry: ToolRegistry, inputs: Sequence[str], target: str,
                 limits: PlanLimits | None = None) -> PlanGrammar:
    """The grammar of a signature, cached per (tokenizer, registry contents, signature, limits)."""
    inputs, target = as_signature((inputs, target))
    limits = limits or PlanLimits()
    key = (registry_key(registry), inputs, target, limits)
    per_tok = _CACHE.setdefault(tokenizer, {})
    if key not in per_tok:
        per_tok[key] = build_grammar(tokenizer, registry, inputs, target, limits)
    return per_tok[key]


@dataclass(eq=False)
class StateTables:
    """The DFAs of several grammars stacked into one numbering, as tensors on one device.

    ``offset[g]`` is added to grammar ``g``'s state ids. ``final[s]`` marks the accepting sinks.
    ``vocab`` is the sorted set of every token id any state allows and ``allowed_local`` the
    position of each allowed id in it: a step scores the ``vocab`` rows of the output layer once
    and gathers, with no per-step ``unique``.
    """

    allowed: torch.Tensor  # [S, D] int64 token ids
    valid: torch.Tensor  # [S, D] bool
    next_state: torch.Tensor  # [S, D] int64
    final: torch.Tensor  # [S] bool
    offset: dict[PlanGrammar, int]
    vocab: torch.Tensor  # [U] int64, sorted
    allowed_local: torch.Tensor  # [S, D] int64 positions in ``vocab``


@functools.lru_cache(maxsize=64)
def stack_tables(grammars: tuple[PlanGrammar, ...], device: torch.device) -> StateTables:
    """One state numbering for the grammars of a batch (cached: grammars hash by identity).

    Built outside inference mode even when decoding asks first: the cached tensors are reused
    by the scorer, whose autograd graph must be allowed to save them."""
    with torch.inference_mode(False):
        return _stack_tables(grammars, device)


def _stack_tables(grammars: tuple[PlanGrammar, ...], device: torch.device) -> StateTables:
    width = max(g.dfa.width for g in grammars)
    allowed, valid, nxt, final, offset, base = [], [], [], [], {}, 0
    for g in grammars:
        if g in offset:
            continue
        d = g.dfa
        pad_w = width - d.width
        allowed.append(np.pad(d.allowed, ((0, 0), (0, pad_w)), constant_values=g.pad_id))
        valid.append(np.pad(d.valid, ((0, 0), (0, pad_w)), constant_values=False))
        nxt.append(np.pad(d.next_state, ((0, 0), (0, pad_w)), constant_values=d.final) + base)
        f = np.zeros(d.num_states, dtype=bool)
        f[d.final] = True
        final.append(f)
        offset[g] = base
        base += d.num_states
    allowed_np = np.concatenate(allowed)
    vocab, local = np.unique(allowed_np, return_inverse=True)
    as_t = lambda x: torch.from_numpy(np.ascontiguousarray(x)).to(device)  # noqa: E731
    return StateTables(as_t(allowed_np), as_t(np.concatenate(valid)), as_t(np.concatenate(nxt)),
                       as_t(np.concatenate(final)), offset, as_t(vocab.astype(np.int64)),
                       as_t(local.reshape(allowed_np.shape).astype(np.int64)))
