"""Constrained GRPO sampling for plan grammars that cannot be enumerated (travel itineraries).

:func:`rltf.comparison.grpo_trainer.plan_text_language` builds one DFA over the canonical text of
*every* plan: fine for OpenAGI (a few thousand plans per task), impossible for a travel query
(a head row fixing the route, then one branch row per free slot: ~10^40 itineraries on the real
tables). TRL's sampler writes one left-to-right sequence, so here a grammar's rows are followed
*lazily* as one sequence, one row after the other, never enumerating plans::

    <root row>  SEP  <branch row 1>  SEP  ...  SEP  <branch row n>  EOS

Each row's tokens are exactly the grammar's own (the row languages of the Grammar protocol,
:class:`constrained_decoding.dfa.TokenDFA`, each row tokenised in context); only the end-of-row
token of every row but the last is replaced by a separator token ``SEP`` (a token no row of the
grammar uses: :func:`separator_id`), so ``generate`` does not stop there. The branch rows are the
ones :meth:`Grammar.branch_starts` gives the finished root row (its tokens with EOS), in that order;
a root row without branches ends the sequence with EOS. :class:`PlanCursor` is that automaton for
one sequence (what each step allows, advancing by the written token), :class:`LazyGrammarLogitsProcessor`
runs one cursor per ``generate`` row, and :func:`parse_completion` walks a completion's ids with a
cursor and assembles the plan (:meth:`Grammar.assemble` of the rows, EOS restored), whose
canonical text (:meth:`Grammar.format`: the JSON the env's parser reads) is what the env judges.

The sequence is not the context rltf's own decoder gives a branch row (there every branch row
continues the finished root row alone, in parallel: :mod:`constrained_decoding.search`); the plans
are the same set, each written once, with probability 0 for nothing valid and no dead end (every
row the grammar starts can be finished, as in the Grammar protocol).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import LogitsProcessor

from constrained_decoding.lazy_dfa import is_lazy
from constrained_decoding.protocol import Grammar

SEPARATOR_TEXTS = ("\n", " |", "|", *(f"{p}{c}" for c in "~^`@#$%*=+<>{}[]\\" for p in (" ", "")))
"""Texts tried, in order, for the separator: the first that is one token used by no grammar row
(else the lowest such token id of the vocabulary)."""
MAX_ROOT_ROWS = 200_000  # root rows walked to bound a sequence's length (travel: ~1,000 heads)


class LazyGrammarError(ValueError):
    """A completion or written token that the lazy plan sequence does not allow."""


def separator_id(tokenizer, grammars: Sequence[Grammar]) -> int:
    """The separator token: the first of :data:`SEPARATOR_TEXTS` that encodes to one token that is
    not special (``<unk>``, EOS, pad) and is no edge of any grammar's automaton (so a row never
    continues with it, and the sequence can be split back into rows); else the lowest such id."""
    used: set[int] = set()
    for g in {id(g): g for g in grammars}.values():
        if is_lazy(g.dfa):  # its states are not all known: every token it declares a state may allow
            used.update(int(t) for t in g.dfa.alphabet)
        else:
            for edges in g.dfa.transitions:
                used.update(int(t) for t in edges)
        used.update((int(g.eos_id), int(g.pad_id)))
    bad = used | {int(i) for i in tokenizer.all_special_ids}
    for text in SEPARATOR_TEXTS:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) == 1 and int(ids[0]) not in bad:
            return int(ids[0])
    free = next((i for i in range(len(tokenizer)) if i not in bad), None)
    if free is None:
        raise LazyGrammarError(f"{type(tokenizer).__name__} has no separator token for the lazy plan sequence: "
                               "every token of its vocabulary is special or used by a plan row")
    return free


class PlanCursor:
    """Where one sequence stands in its grammar: the current row's state and tokens, the branch
    rows still to write. :meth:`allowed` lists the token ids that may come next, :meth:`advance`
    takes the one written (:class:`LazyGrammarError` for any other)."""

    def __init__(self, grammar: Grammar, sep: int):
        self.grammar, self.sep = grammar, int(sep)
        self.eos = int(grammar.eos_id)
        self.state = grammar.root
        self.row: list[int] = []  # the current row's tokens
        self.root: tuple[int, ...] | None = None  # the finished root row (EOS included)
        self.pending: list[int] = []  # start states of the branch rows after the current one
        self.branches: list[tuple[int, ...]] = []  # finished branch rows (EOS included)
        self.done = False

    def _more_rows(self) -> bool:
        """Whether a row follows the current one if it ends now."""
        if self.root is None:
            return bool(self.grammar.branch_starts((*self.row, self.eos)))
        return bool(self.pending)

    def allowed(self) -> list[int]:
        """The token ids the sequence may continue with (the pad id once it is done)."""
        if self.done:
            return [int(self.grammar.pad_id)]
        edges = self.grammar.dfa.transitions[self.state]
        if self.eos not in edges:
            return list(edges)
        end = self.sep if self._more_rows() else self.eos
        return [end if t == self.eos else t for t in edges]

    def advance(self, token: int) -> None:
        token = int(token)
        if self.done:
            raise LazyGrammarError(f"token {token} follows the end of the plan")
        edges = self.grammar.dfa.transitions[self.state]
        if token in (self.sep, self.eos) and self.eos in edges:
            if (token == self.sep) != self._more_rows():
                raise LazyGrammarError(f"token {token} ends a row where "
                                       + ("another row follows (separator expected)" if token == self.eos
                                          else "the plan ends (EOS expected)"))
            self._finish_row()
            return
        nxt = edges.get(token)
        if nxt is None or token == self.eos:
            raise LazyGrammarError(f"token {token} is not allowed here; allowed: {sorted(self.allowed())}")
        self.row.append(token)
        self.state = nxt

    def _finish_row(self) -> None:
        row = (*self.row, self.eos)
        if self.root is None:
            self.root = row
            self.pending = list(self.grammar.branch_starts(row))
        else:
            self.branches.append(row)
        self.row = []
        if self.pending:
            self.state = self.pending.pop(0)
        else:
            self.done = True

    def plan(self) -> Any:
        """The finished sequence's plan (:meth:`Grammar.assemble`)."""
        if not self.done:
            raise LazyGrammarError("the plan is unfinished (the sequence stops inside a row)")
        return self.grammar.assemble(self.root, self.branches)


def parse_completion(grammar: Grammar, sep: int, ids: Sequence[int]) -> Any:
    """The plan a completion's token ids write (ids after its EOS, such as padding, ignored);
    :class:`LazyGrammarError` naming the first token that leaves the grammar, or an unfinished plan."""
    cursor = PlanCursor(grammar, sep)
    for i, tok in enumerate(ids):
        if cursor.done:
            break
        try:
            cursor.advance(tok)
        except LazyGrammarError as e:
            raise LazyGrammarError(f"completion token {i}: {e}") from None
    return cursor.plan()


def completion_plan_text(grammar: Grammar, sep: int, ids: Sequence[int]) -> str | None:
    """The canonical text (:meth:`Grammar.format`, what the env parses and judges) of the plan a
    completion writes; None when the ids are not a complete plan of the sequence."""
    try:
        return grammar.format(parse_completion(grammar, sep, ids))
    except (LazyGrammarError, ValueError):
        return None


def _longest_row(grammar: Grammar):
    """``longest(state)``: the most tokens a row may have from ``state`` (its end token included), memoised."""
    dfa = grammar.dfa
    memo = {dfa.final: 0}

    def longest(s: int) -> int:
        stack = [s]
        while stack:  # iterative post-order: rows are up to hundreds of tokens long
            top = stack[-1]
            if top in memo:
                stack.pop()
                continue
            todo = [n for n in dfa.transitions[top].values() if n not in memo]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            memo[top] = 1 + max(memo[n] for n in dfa.transitions[top].values())
        return memo[s]

    return longest


def longest_sequence(grammar: Grammar, lazy_limit: int | None = None) -> int:
    """The most tokens a plan's sequence may have (root row + its branch rows, separators and EOS
    included): the completion length under which no plan is cut. A grammar without branch rows: its
    longest row (one pass over its states, never over its plans: a pddl ``syntax`` grammar has 50^32). A
    grammar built lazily (:class:`~constrained_decoding.lazy_dfa.LazyTokenDFA`: pddl's ``legal`` grammar) is
    not walked at all (that would expand every state): ``lazy_limit`` is the length (the config's completion
    length, ``planner.max_plan_tokens``); a plan longer than it is cut there (its text is then judged as written)."""
    if is_lazy(grammar.dfa):
        if lazy_limit is None:
            raise LazyGrammarError(f"{grammar!r} is expanded on demand: its longest plan is unknown without "
                                   "walking every state; give lazy_limit (planner.max_plan_tokens)")
        return int(lazy_limit)
    dfa, longest = grammar.dfa, _longest_row(grammar)
    if not getattr(grammar, "branching", True):  # one row: no root rows to walk
        return longest(grammar.root)
    best, count = 0, 0
    stack: list[tuple[int, tuple[int, ...]]] = [(grammar.root, ())]
    while stack:  # every root row (depth first)
        s, row = stack.pop()
        for tok, nxt in dfa.transitions[s].items():
            if nxt == dfa.final:
                count += 1
                if count > MAX_ROOT_ROWS:
                    raise LazyGrammarError(f"{grammar!r} has over {MAX_ROOT_ROWS:,} root rows: too many to bound")
                full = (*row, tok)
                best = max(best, len(full) + sum(longest(b) for b in grammar.branch_starts(full)))
            else:
                stack.append((nxt, (*row, tok)))
    return best


class LazyGrammarLogitsProcessor(LogitsProcessor):
    """Masks, for every row of a ``generate`` batch, the tokens its :class:`PlanCursor` does not
    allow (a finished row: only pad, which ``generate`` writes there anyway). The first call sets
    every row's cursor at its grammar's root; each later call first advances each cursor by the
    token its row just wrote (one processor per ``generate`` call)."""

    def __init__(self, grammars: Sequence[Grammar], sep: int):
        self.grammars, self.sep = list(grammars), int(sep)
        self.cursors: list[PlanCursor] | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.cursors is None:
            if input_ids.shape[0] != len(self.grammars):
                raise ValueError(f"generate runs {input_ids.shape[0]} rows; the processor has grammars for "
                                 f"{len(self.grammars)}")
            self.cursors = [PlanCursor(g, self.sep) for g in self.grammars]
        else:
            for b, tok in enumerate(input_ids[:, -1].tolist()):
                c = self.cursors[b]
                if not c.done:
                    try:
                        c.advance(tok)
                    except LazyGrammarError as e:
                        raise RuntimeError(f"row {b} wrote a token the plan grammar does not allow ({e}; another "
                                           "processor after this one changed the scores?)") from None
        rows, cols = [], []
        for b, c in enumerate(self.cursors):
            ids = c.allowed()
            rows += [b] * len(ids)
            cols += ids
        keep = torch.zeros(scores.shape, dtype=torch.bool, device=scores.device)
        keep[torch.tensor(rows, device=scores.device), torch.tensor(cols, device=scores.device)] = True
        return scores.masked_fill(~keep, float("-inf"))
