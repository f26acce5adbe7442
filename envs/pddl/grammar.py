"""The action grammars of a task: kinds in a registry (:data:`GRAMMAR_KINDS`), ``syntax`` and ``legal``.

**syntax**: any sequence of the problem's ground actions (every typed grounding, :mod:`envs.pddl.grounding`)
of at most ``max_length`` actions, then the end: what a planner that read the domain knows. A plan is one
decoder row: ``(unstack b a) (put-down b) </s>``. The automaton is composed, not enumerated (a cap of 32
over 50 actions is 50^32 plans): the token pieces of the actions form a minimal trie
(:func:`constrained_decoding.dfa.build_dfa`), copied once per plan position, each copy's leaves leading
to the next position's start and every position's start offering the end token. Pieces are tokenised in
context: the first action alone, a later one as it reads after another action and the separator (its
token ids are those of ``previous + " " + action`` past the previous action's own); a tokenizer that
merges tokens across the separator is refused (:class:`~constrained_decoding.rows.GrammarError`).

**legal**: only actions applicable in the state the plan has reached (the simulator as the constraint),
at most ``max_length`` of them; the end token is allowed at every action boundary (the grammar makes
every plan executable, not every plan reach the goal: that stays the reward's question). The same
rows as ``syntax`` (the same pieces, a subset of its plans), so every plan it allows is a ``syntax``
plan with the same tokens. Its automaton cannot be enumerated (one state per reachable simulator state
and position: Blocksworld with 10 blocks has ~58 million simulator states), so it is a
:class:`~constrained_decoding.lazy_dfa.LazyTokenDFA`: a state ``(simulator state, node of the actions'
prefix trie, plan length)`` is expanded when a decoder row first reaches it (the applicable actions'
bitmask computed once per simulator state) and cached in the grammar, up to ``max_expanded`` states (and
as many simulator states' bitmasks; the least recently read are dropped and recomputed if reached again:
:data:`constrained_decoding.lazy_dfa.MAX_EXPANDED` by default), so a long run's memory stays bounded. A
boundary state with no applicable action (or at the cap) offers the end alone, so no row dead-ends.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from constrained_decoding.dfa import TokenDFA, build_dfa
from constrained_decoding.lazy_dfa import MAX_EXPANDED, LazyTokenDFA
from constrained_decoding.protocol import Row
from constrained_decoding.rows import GrammarError, encode_texts, special_ids
from envs.pddl.grounding import GroundTask
from envs.pddl.simulator import plan_indices, simulate

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
        return _read_row(self, root_tokens)

    def rows_for(self, plan) -> list[Row]:
        """The row of a plan (text or action texts); :class:`PlanOutsideGrammar` for one it cannot produce."""
        indices, error = plan_indices(self.task, plan)
        return _plan_row(self, indices, error)

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


def _checked_pieces(tokenizer, task: GroundTask, kind: str):
    """``(eos, pad, first, later)``: the actions' token pieces (:func:`_pieces`), refused when two tokenise
    alike or one holds the end token."""
    eos, pad = special_ids(tokenizer)
    first, later = _pieces(tokenizer, task)
    where = f"the {kind} grammar of {task.problem.name}"
    for pieces in (first, later):
        if len(set(pieces)) != len(pieces):
            raise GrammarError(f"two actions of {where} tokenise identically")
        if any(eos in p for p in pieces):
            raise GrammarError(f"an action of {where} contains the end token {eos}")
    return eos, pad, first, later


def _plan_row(grammar, indices: Sequence[int], error: str | None) -> list[Row]:
    """The one row of a plan of action ``indices`` (its first action's tokens, then the later ones', then
    the end token), or :class:`PlanOutsideGrammar` with ``error`` or the cap it exceeds."""
    if error is not None:
        raise PlanOutsideGrammar(error)
    if len(indices) > grammar.max_length:
        raise PlanOutsideGrammar(f"the plan has {len(indices)} actions; the grammar's cap is {grammar.max_length} "
                                 "(env.pddl.max_plan_length)")
    tokens = [t for k, i in enumerate(indices) for t in (grammar.later[i] if k else grammar.first[i])]
    return [(grammar.root, (*tokens, grammar.eos_id))]


def _read_row(g, root_tokens: Sequence[int]) -> Plan:
    """The plan of a decoded row of grammar ``g`` (``eos_id``, ``task``, ``_first_of``, ``_later_of``)."""
    out, piece = [], ()
    for tok in root_tokens:
        tok = int(tok)
        if tok == g.eos_id and not piece:
            break
        piece += (tok,)
        i = (g._later_of if out else g._first_of).get(piece)
        if i is not None:
            out.append(g.task.actions[i].text)
            piece = ()
    if piece:
        raise ValueError(f"token ids {list(root_tokens)} are not a complete row of {g}")
    return tuple(out)


def build_syntax_grammar(tokenizer, task: GroundTask, max_length: int) -> SyntaxGrammar:
    """The ``syntax`` grammar of ``task``'s ground actions with at most ``max_length`` of them (uncached)."""
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    eos, pad, first, later = _checked_pieces(tokenizer, task, "syntax")
    where = f"the syntax grammar of {task.problem.name}"
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


@dataclass(eq=False)
class LegalGrammar:
    """The ``legal`` grammar of one problem (its actions and initial state), expanded lazily: a
    :class:`constrained_decoding.protocol.Grammar` whose ``dfa`` is a
    :class:`~constrained_decoding.lazy_dfa.LazyTokenDFA` (see the module docstring)."""

    task: GroundTask = field(repr=False)
    max_length: int
    dfa: LazyTokenDFA = field(repr=False)
    eos_id: int
    pad_id: int
    first: list[tuple[int, ...]] = field(repr=False)
    later: list[tuple[int, ...]] = field(repr=False)
    _first_of: dict[tuple[int, ...], int] = field(repr=False)
    _later_of: dict[tuple[int, ...], int] = field(repr=False)
    branching = False

    @property
    def root(self) -> int:
        return self.dfa.root

    @property
    def expansions(self) -> int:
        """Automaton states expanded so far (each once; the simulator runs for the boundary ones)."""
        return self.dfa.expansions

    def branch_starts(self, root_tokens: Sequence[int]) -> tuple[int, ...]:
        return ()

    def assemble(self, root_tokens: Sequence[int], branch_tokens: Sequence[Sequence[int]] = ()) -> Plan:
        """The plan of a decoded row (its tokens up to the end token)."""
        return _read_row(self, root_tokens)

    def rows_for(self, plan) -> list[Row]:
        """The row of a plan; :class:`PlanOutsideGrammar` for one it cannot produce: an unknown action, one
        that does not apply where it stands (the simulator's reason), or more actions than the cap."""
        indices, error = plan_indices(self.task, plan)
        if error is None:
            out = simulate(self.task, indices)
            error = None if out.valid else out.error
        return _plan_row(self, indices, error)

    def format(self, plan: Sequence[str]) -> str:
        return format_plan(plan)

    def enumerate(self) -> Iterator[Plan]:
        """Every executable plan of at most ``max_length`` actions, depth first (tiny problems only: tests)."""
        actions = self.task.actions

        def below(state: int, plan: Plan) -> Iterator[Plan]:
            yield plan
            if len(plan) < self.max_length:
                for i in self.task.applicable(state):
                    a = actions[i]
                    yield from below((state & ~a.delete) | a.add, (*plan, a.text))

        yield from below(self.task.init, ())

    def __repr__(self) -> str:
        return (f"LegalGrammar({self.task.problem.name}, {len(self.task.actions)} actions, up to "
                f"{self.max_length}, {self.dfa.num_states} states found, {self.dfa.expansions} expanded)")


class _Trie:
    """The actions' token pieces as a prefix trie (not minimised: a node's actions below it are its own),
    node 0 its root; per node its children, the actions below it (a bitmask) and the action it completes."""

    def __init__(self, pieces: Sequence[tuple[int, ...]], where: str):
        self.children: list[dict[int, int]] = [{}]
        self.below: list[int] = [0]
        self.action: list[int | None] = [None]
        for i, piece in enumerate(pieces):
            node = 0
            self.below[0] |= 1 << i
            for tok in piece:
                if self.action[node] is not None:
                    break
                nxt = self.children[node].get(tok)
                if nxt is None:
                    nxt = self.children[node][tok] = len(self.children)
                    self.children.append({})
                    self.below.append(0)
                    self.action.append(None)
                node = nxt
                self.below[node] |= 1 << i
            if self.action[node] is not None or self.children[node]:
                raise GrammarError(f"{where}: the tokens of one action are a prefix of another's")
            self.action[node] = i


def build_legal_grammar(tokenizer, task: GroundTask, max_length: int,
                        max_expanded: int = MAX_EXPANDED) -> LegalGrammar:
    """The ``legal`` grammar of ``task`` (its actions and initial state), at most ``max_length`` actions (uncached);
    ``max_expanded``: the most automaton states (and simulator states' applicable-action bitmasks) it keeps.

    A state of the automaton is ``(simulator state, trie node, plan length)``: at an action's start (node 0)
    the first tokens of the actions applicable in the simulator state (if the plan is shorter than the
    cap) and the end token; inside an action, the tokens that continue towards an applicable one; an
    action's last token leads to its successor state's start. Nothing is built before a row reaches it."""
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    eos, pad, first, later = _checked_pieces(tokenizer, task, "legal")
    where = f"the legal grammar of {task.problem.name}"
    tries = (_Trie(first, where), _Trie(later, where))
    actions = task.actions
    applicable: dict[int, int] = {}  # simulator state -> the bitmask of its applicable actions

    def successors(key) -> dict[int, object]:
        state, node, length = key
        trie = tries[length > 0]
        can = applicable.get(state)
        if can is None:
            if len(applicable) >= max_expanded:  # bounded like the automaton's states: the oldest goes
                del applicable[next(iter(applicable))]
            can = applicable[state] = sum(1 << i for i in task.applicable(state))
        out: dict[int, object] = {}
        if node or length < max_length:
            for tok, child in trie.children[node].items():
                if trie.below[child] & can:
                    a = trie.action[child]
                    if a is None:
                        out[tok] = (state, child, length)
                    else:
                        act = actions[a]
                        out[tok] = ((state & ~act.delete) | act.add, 0, length + 1)
        if not node:
            out[eos] = None  # the end: any plan may stop (the goal decides its reward, not the grammar)
        return out

    alphabet = {eos, *(t for p in (*first, *later) for t in p)}
    width = max(len(c) + (n == 0) for trie in tries for n, c in enumerate(trie.children))
    dfa = LazyTokenDFA(successors, (task.init, 0, 0), None, pad, alphabet, width, max_expanded)
    return LegalGrammar(task, max_length, dfa, eos, pad, first, later,
                        {p: i for i, p in enumerate(first)}, {p: i for i, p in enumerate(later)})


@dataclass(frozen=True)
class GrammarKind:
    """A grammar kind: its builder and what the env shares one grammar object across."""

    build: Callable[..., object]
    """``build(tokenizer, task, max_length) -> Grammar``."""
    per_initial_state: bool
    """Whether the grammar depends on the task's initial state (else: tasks with one action set share it)."""

    def share_key(self, task: GroundTask) -> tuple:
        """The key of the tasks that share one grammar object (with one tokenizer): their actions' texts, and
        (``per_initial_state``) the atoms true initially, by name (each task numbers its atoms' bits itself)."""
        texts = tuple(a.text for a in task.actions)
        return (texts, tuple(sorted(task.state_atoms(task.init)))) if self.per_initial_state else texts


GRAMMAR_KINDS: dict[str, GrammarKind] = {"syntax": GrammarKind(build_syntax_grammar, False),
                                         "legal": GrammarKind(build_legal_grammar, True)}
"""Grammar kind (``env.pddl.grammar``) -> how to build it and share it."""
