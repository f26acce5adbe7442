"""OpenAGI's plan grammar: one implementation of :class:`constrained_decoding.protocol.Grammar`.

A *row* is one decoder sequence. A linear task has one row per plan; a nonlinear task has a
*head* row (its join tool and tail) and one *branch* row per input (see
:mod:`constrained_decoding` for the factorisation). The texts of the rows are

====================  ==============================================================
linear row            ``Image Denoising, Image Captioning`` + EOS (the canonical plan)
head row              ``Visual Question Answering, Machine Translation`` + EOS
branch row ``i``      ``Visual Question Answering, Machine Translation; branch 1: (Image Denoising)``
====================  ==============================================================

so the decoded rows assemble into exactly :func:`envs.openagi.plans.format_plan`'s text.

We enumerate every allowed row text of the signature and let the decoder's generic builder
(:func:`constrained_decoding.rows.build_row_languages`) tokenise them in context and build their
minimal DFA. Size: the full OpenAGI registry has at most ~17k linear plans per signature
(PlanLimits() default); nonlinear signatures are factorised, so their rows number in the
hundreds. A grammar is built once per (tokenizer, registry, signature, limits) and cached:
:func:`plan_grammar`, or :meth:`envs.openagi.env.OpenAGIEnv.grammar` for an env's task.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from constrained_decoding.protocol import Row
from constrained_decoding.rows import (
    GrammarError,
    RowLanguageGrammar,
    RowLanguages,
    RowText,
    build_row_languages,
    encode_texts,
)
from envs.openagi.plans import (
    SEP,
    LinearPlan,
    NonlinearPlan,
    Plan,
    PlanLimits,
    check_plan,
    enumerate_plans,
    format_plan,
    parse_plan,
)
from envs.openagi.registry import ToolRegistry

__all__ = ["GrammarError", "PlanGrammar", "as_signature", "build_grammar", "plan_grammar", "plan_grammars"]

BRANCH_MARK = "; branch {index}: ("
"""Between the head text and the branch content in a branch row (``index`` counts from 1)."""


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
class PlanGrammar(RowLanguageGrammar):
    """The plans of one task signature as decoder rows: a :class:`constrained_decoding.protocol.Grammar`.

    ``root`` is the start state of the first row (the linear plan, or the head of a nonlinear
    plan); ``branch_start[h][i]`` the start of branch row ``i`` under head ``heads[h]``.
    """

    inputs: tuple[str, ...]
    target: str
    limits: PlanLimits
    registry: ToolRegistry = field(repr=False)
    rows: RowLanguages = field(repr=False)
    heads: tuple[tuple[str, tuple[str, ...]], ...] = ()
    branch_start: tuple[tuple[int, ...], ...] = ()

    # ------------------------------------------------------------------ the Grammar protocol
    @property
    def branching(self) -> bool:
        return not self.is_linear

    def branch_starts(self, root_tokens: Sequence[int]) -> tuple[int, ...]:
        """The branch rows' start states under the head a finished root row names (none: linear)."""
        if self.is_linear:
            return ()
        return self.branch_start[self.meaning(self.root, root_tokens)]  # type: ignore[index]

    def assemble(self, root_tokens: Sequence[int], branch_tokens: Sequence[Sequence[int]] = ()) -> Plan:
        """The plan of decoded rows (the branch rows follow the head's ``branch_start``)."""
        first = self.meaning(self.root, root_tokens)
        if self.is_linear:
            return LinearPlan(first)  # type: ignore[arg-type]
        join, tail = self.heads[first]  # type: ignore[index]
        if len(branch_tokens) != self.num_branches:
            raise ValueError(f"expected {self.num_branches} branch rows, got {len(branch_tokens)}")
        branches = [self.meaning(self.branch_start[first][i], t) for i, t in enumerate(branch_tokens)]
        return NonlinearPlan(tuple(branches), join, tail)

    def rows_for(self, plan: Plan | str) -> list[Row]:
        """The rows ``(start state, token ids)`` of a plan: what teacher forcing scores.

        Raises :class:`envs.openagi.plans.PlanError` (with the checker's reason) for a plan that is not valid here."""
        if isinstance(plan, str):
            plan = parse_plan(plan, self.registry)
        check_plan(plan, self.registry, self.inputs, self.target, self.limits)
        try:
            if isinstance(plan, LinearPlan):
                return [(self.root, self.rows.tokens(0, plan.tools))]
            h = self.heads.index((plan.join, tuple(plan.tail)))
            rows = [(self.root, self.rows.tokens(0, h))]
            for i, branch in enumerate(plan.branches):
                start = self.branch_start[h][i]
                rows.append((start, self.rows.tokens(self.rows.language_of(start), tuple(branch))))
            return rows
        except (KeyError, ValueError) as e:  # pragma: no cover - would be a grammar bug
            raise RuntimeError(f"plan {plan} passes check_plan but is missing from the grammar ({e!r})") from e

    def format(self, plan: Plan) -> str:
        return format_plan(plan)

    def enumerate(self) -> Iterator[Plan]:
        return enumerate_plans(self.registry, self.inputs, self.target, self.limits)

    # ---------------------------------------------------------------------------- OpenAGI's
    @property
    def is_linear(self) -> bool:
        return len(self.inputs) == 1

    @property
    def num_branches(self) -> int:
        return 0 if self.is_linear else len(self.inputs)

    def meaning(self, start: int, tokens: Sequence[int]):
        """What a finished row means: a linear plan's tools, a head index, or a branch tuple."""
        try:
            return self.rows.meaning(start, tokens)
        except (KeyError, ValueError):
            raise ValueError(f"token ids {list(tokens)} are not a complete row of {self}") from None

    def __repr__(self) -> str:
        return (f"PlanGrammar({'+'.join(self.inputs)}->{self.target}, {self.dfa.num_states} states, "
                f"{self.rows.size(0)} {'plans' if self.is_linear else 'heads'})")


def _unknown_culprit(tokenizer, registry: ToolRegistry, text: str) -> str:
    unk = tokenizer.unk_token_id
    for name in registry.names:
        if name in text and (unk in encode_texts(tokenizer, [name])[0]
                             or unk in encode_texts(tokenizer, [f"x, {name}"])[0]):
            return f"tool name {name!r}"
    return f"the row text {text!r}"


def build_grammar(tokenizer, registry: ToolRegistry, inputs: Sequence[str], target: str,
                  limits: PlanLimits | None = None) -> PlanGrammar:
    """Enumerate the signature's rows, tokenise them in context and build their DFA (uncached)."""
    inputs, target = as_signature((inputs, target))
    limits = limits or PlanLimits()
    where = f"signature {'+'.join(inputs)}->{target}"
    # languages[k]: language 0 is the root row (linear plans by tools, or heads by index), then per
    # head one language per branch
    languages: list[list[RowText]] = []
    heads: list[tuple[str, tuple[str, ...]]] = []
    if len(inputs) == 1:
        plans = list(enumerate_plans(registry, inputs, target, limits))
        languages.append([RowText(p.tools, SEP.join(p.tools)) for p in plans])
    else:
        branch_langs: list[list[list[RowText]]] = []
        for join in registry.multi_input():
            if join.arity != len(inputs):
                continue
            for tail in _chains(registry, join.output, target, limits.max_tail, {join.name}):
                banned = {join.name, *tail}
                options = [_chains(registry, m, want, limits.max_branch, banned)
                           for m, want in zip(inputs, join.inputs)]
                if all(options):
                    heads.append((join.name, tail))
                    branch_langs.append([[RowText(b, branch_text(join.name, tail, i, b), eos=False) for b in opts]
                                         for i, opts in enumerate(options)])
        languages.append([RowText(h, head_text(*head)) for h, head in enumerate(heads)])
        for per_head in branch_langs:
            languages.extend(per_head)
    if not languages[0]:
        raise GrammarError(f"no valid plan exists for {where} with {limits} in registry {list(registry.names)}")
    rows = build_row_languages(tokenizer, languages, where=where,
                               culprit=lambda text: _unknown_culprit(tokenizer, registry, text))
    n = len(inputs)
    branch_start = tuple(tuple(rows.starts[1 + h * n + i] for i in range(n)) for h in range(len(heads)))
    return PlanGrammar(inputs=inputs, target=target, limits=limits, registry=registry, rows=rows,
                       heads=tuple(heads), branch_start=branch_start)


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


def plan_grammars(tokenizer, signatures: Iterable[object], registry: ToolRegistry,
                  limits: PlanLimits | None = None) -> list[PlanGrammar]:
    """One cached grammar per signature (``(inputs, target)`` or a Task): what the decoder takes."""
    return [plan_grammar(tokenizer, registry, *as_signature(s), limits) for s in signatures]
