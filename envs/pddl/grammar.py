"""The action grammars of a task: kinds in a registry (:data:`GRAMMAR_KINDS`), ``syntax`` today.

**syntax**: any sequence of the problem's ground actions (every typed grounding, :mod:`envs.pddl.grounding`)
of at most ``max_length`` actions, then the end: what a planner that read the domain knows. A plan is one
decoder row: ``(unstack b a) (put-down b) </s>``. The automaton is composed, not enumerated (a cap of 32
over 50 actions is 50^32 plans): the token pieces of the actions form a minimal trie
(:func:`constrained_decoding.dfa.build_dfa`), copied once per plan position, each copy's leaves leading
to the next position's start and every position's start offering the end token. Pieces are tokenised in
context: the first action alone, a later one as it reads after another action and the separator (its
token ids are those of ``previous + " " + action`` past the previous action's own); a tokenizer that
merges tokens across the separator is refused (:class:`~constrained_decoding.rows.GrammarError`).

The ``legal`` kind (only actions applicable in the state the prefix reached) needs an automaton expanded
lazily as rows reach its states; it registers here beside ``syntax`` once the decoder takes such grammars.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from constrained_decoding.dfa import TokenDFA, build_dfa
from constrained_decoding.protocol import Row
from constrained_decoding.rows import GrammarError, encode_texts, special_ids
from envs.pddl.grounding import GroundTask
from envs.pddl.simulator import plan_indices

SEP = " "
"""Between two actions of a plan's text."""

Plan = tuple[str, ...]
"""A plan as the grammar means it: its ground actions' texts, in order."""


class PlanOutsideGrammar(ValueError):
    """A plan the grammar cannot produce (probability 0): an unknown action, or longer than the cap."""


def format_plan(plan: Sequence[str]) -> str:
    return SEP.join(plan)


@dataclass(eq=False)
class SyntaxGrammar:
    """The ``syntax`` grammar of one action set: a :class:`constrained_decoding.protocol.Grammar`."""

    task: GroundTask = field(repr=False)
    max_length: int
    dfa: TokenDFA = field(repr=False)
    eos_id: int
    pad_id: int
    root: int
    first: list[tuple[int, ...]] = field(repr=False)  # action index -> its tokens as the first action
    later: list[tuple[int, ...]] = field(repr=False)  # ... as a later one
    _first_of: dict[tuple[int, ...], int] = field(repr=False)
    _later_of: dict[tuple[int, ...], int] = field(repr=False)
    branching = False

    def branch_starts(self, root_tokens: Sequence[int]) -> tuple[int, ...]:
        return ()

    def assemble(self, root_tokens: Sequence[int], branch_tokens: Sequence[Sequence[int]] = ()) -> Plan:
        """The plan of a decoded row (its tokens up to the end token)."""
        out, piece = [], ()
        for tok in root_tokens:
            tok = int(tok)
            if tok == self.eos_id and not piece:
                break
            piece += (tok,)
            i = (self._later_of if out else self._first_of).get(piece)
            if i is not None:
                out.append(self.task.actions[i].text)
                piece = ()
        if piece:
            raise ValueError(f"token ids {list(root_tokens)} are not a complete row of {self}")
        return tuple(out)

    def rows_for(self, plan) -> list[Row]:
        """The row of a plan (text or action texts); :class:`PlanOutsideGrammar` for one it cannot produce."""
        indices, error = plan_indices(self.task, plan)
        if error is not None:
            raise PlanOutsideGrammar(error)
        if len(indices) > self.max_length:
            raise PlanOutsideGrammar(f"the plan has {len(indices)} actions; the grammar's cap is {self.max_length} "
                                     "(env.pddl.max_plan_length)")
        tokens = [t for k, i in enumerate(indices) for t in (self.later[i] if k else self.first[i])]
        return [(self.root, (*tokens, self.eos_id))]

    def format(self, plan: Sequence[str]) -> str:
        return format_plan(plan)

    def enumerate(self) -> Iterator[Plan]:
        """Every plan of at most ``max_length`` actions (tiny problems only: tests)."""
        texts = [a.text for a in self.task.actions]
        for n in range(self.max_length + 1):
            yield from itertools.product(texts, repeat=n)

    def __repr__(self) -> str:
        return (f"SyntaxGrammar({self.task.problem.name}, {len(self.task.actions)} actions, up to "
                f"{self.max_length}, {self.dfa.num_states} states)")


def _pieces(tokenizer, task: GroundTask) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    texts = [a.text for a in task.actions]
    context = texts[0]
    encoded = encode_texts(tokenizer, [context, *texts, *(context + SEP + t for t in texts)])
    ctx, first, joined = encoded[0], encoded[1:len(texts) + 1], encoded[len(texts) + 1:]
    later = []
    for text, ids in zip(texts, joined):
        if tuple(ids[:len(ctx)]) != tuple(ctx):
            raise GrammarError(f"{type(tokenizer).__name__} merges tokens across the separator of "
                               f"{context + SEP + text!r}: the syntax grammar needs actions that tokenise apart")
        later.append(tuple(ids[len(ctx):]))
    unk = tokenizer.unk_token_id
    for text, a, b in zip(texts, first, later):
        if not a or not b or unk is not None and (unk in a or unk in b):
            raise GrammarError(f"{type(tokenizer).__name__} cannot represent the action {text!r} "
                               f"(it encodes to {list(a)} / {list(b)})")
    return [tuple(x) for x in first], later


def build_syntax_grammar(tokenizer, task: GroundTask, max_length: int) -> SyntaxGrammar:
    """The ``syntax`` grammar of ``task``'s ground actions with at most ``max_length`` of them (uncached)."""
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    eos, pad = special_ids(tokenizer)
    first, later = _pieces(tokenizer, task)
    where = f"the syntax grammar of {task.problem.name}"
    for pieces in (first, later):
        if len(set(pieces)) != len(pieces):
            raise GrammarError(f"two actions of {where} tokenise identically")
        if any(eos in p for p in pieces):
            raise GrammarError(f"an action of {where} contains the end token {eos}")
    tries = []
    for pieces in (first, later):
        try:
            tries.append(build_dfa([pieces], pad_id=pad))
        except ValueError as e:  # one action's tokens a prefix of another's
            raise GrammarError(f"{where}: {e}") from None
    transitions: list[dict[int, int]] = [{}]  # state 0: the accepting sink
    starts = [0] * (max_length + 1)
    starts[max_length] = len(transitions)
    transitions.append({eos: 0})
    for position in range(max_length - 1, -1, -1):  # built back to front: a copy's leaves lead to the next start
        trie, (start,) = tries[0 if position == 0 else 1]
        ids = {s: len(transitions) + k for k, s in enumerate(s for s in range(trie.num_states) if s != trie.final)}
        transitions.extend({} for _ in ids)
        for s, new in ids.items():
            transitions[new] = {tok: (starts[position + 1] if nxt == trie.final else ids[nxt])
                                for tok, nxt in trie.transitions[s].items()}
        starts[position] = ids[start]
        transitions[ids[start]][eos] = 0
    dfa = TokenDFA(transitions, final=0, pad_id=pad)
    return SyntaxGrammar(task, max_length, dfa, eos, pad, starts[0], first, later,
                         {p: i for i, p in enumerate(first)}, {p: i for i, p in enumerate(later)})


GrammarBuilder = Callable[..., object]
GRAMMAR_KINDS: dict[str, GrammarBuilder] = {"syntax": build_syntax_grammar}
"""Grammar kind (``env.pddl.grammar``) -> ``builder(tokenizer, task, max_length) -> Grammar``."""
