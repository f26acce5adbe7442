"""What a grammar gives the decoder: the protocol every env's action language implements.

The decoder (:mod:`constrained_decoding`) knows no env. An env describes the actions a planner may
emit for one query as a :class:`Grammar`: a token-level automaton over the rows the decoder
writes, and the meaning of those rows. OpenAGI's plan grammar (``PlanGrammar``, in the OpenAGI
env's ``grammar`` module) is one implementation; an env supplies its grammars
(``OpenAGIEnv.grammar(tokenizer, task)``) and the caller hands them to :func:`sample_plans`,
:func:`beam_search_plans`, :func:`greedy_plans` and :func:`plan_logprobs`, one per prompt.

Rows. An action is decoded as one *root* row, then, if the root row says so, parallel *branch*
rows (the semi-autoregressive factorisation of the package docstring): a finished root row's
tokens determine the start states of its branch rows (:meth:`Grammar.branch_starts`), each
branch row is decoded independently, and :meth:`Grammar.assemble` turns the rows into the
action. π_c(action) is the product of the rows' constrained probabilities, so the decoder is
exact as long as every decision sequence the automaton allows ends in a valid action (no dead
ends) and :meth:`Grammar.rows_for` inverts :meth:`Grammar.assemble`.

The automaton. ``dfa`` is a :class:`constrained_decoding.dfa.TokenDFA`: allowed token ids, their
validity and next states per state (``allowed``/``valid``/``next_state`` arrays, the
``transitions`` dicts they are laid out from), and one accepting sink ``final`` that loops on
``pad_id``. Every row language must be prefix-free (a row ends in ``eos_id`` or a closing mark).
How a grammar gets its DFA is its own business: :func:`constrained_decoding.rows.build_row_languages`
builds the minimal DFA of enumerated row texts tokenised in context (small languages such as
OpenAGI's plans); a grammar over thousands of entity names per query can compose its automaton
from sub-automata (one per slot of an itinerary, choices depending on earlier choices) and hand
over a ``TokenDFA(transitions, final, pad_id)`` it built itself — nothing here enumerates actions.
A grammar whose states cannot be enumerated at all (the pddl env's ``legal`` grammar: one state per
reachable simulator state) hands over a :class:`constrained_decoding.lazy_dfa.LazyTokenDFA` instead,
whose states are expanded when a row first reaches them; every decoder path takes it alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from constrained_decoding.dfa import TokenDFA

Tokens = tuple[int, ...]
Row = tuple[int, Tokens]
"""A decoder row: its start state (in the grammar's own numbering) and its token ids (end token included)."""


@runtime_checkable
class Grammar(Protocol):
    """The actions of one query as rows of token ids (see the module docstring).

    Grammars are compared and hashed by identity (the decoder caches their stacked tables), so an
    env should hand out the same object for the same query (cache them)."""

    dfa: TokenDFA
    """The token-level automaton of every row language of this grammar (states shared); or a
    :class:`~constrained_decoding.lazy_dfa.LazyTokenDFA`, expanded on demand."""
    eos_id: int
    """The end-of-row token (rows that end the action end with it)."""
    pad_id: int
    """What a finished row emits (the sink's only token, log-probability 0)."""
    root: int
    """Start state of the first row of every action."""
    branching: bool
    """Whether a finished root row can fork branch rows (they continue its text: the decoder keeps
    a copy of the root row's cache for them)."""

    def branch_starts(self, root_tokens: Sequence[int]) -> Sequence[int]:
        """Start states of the parallel rows a finished root row forks (empty: the action is complete)."""
        ...

    def assemble(self, root_tokens: Sequence[int], branch_tokens: Sequence[Sequence[int]] = ()) -> Any:
        """The action of decoded rows (branch rows in :meth:`branch_starts` order)."""
        ...

    def rows_for(self, action: Any) -> list[Row]:
        """The rows of an action, what teacher forcing scores; raises the env's own error (with its
        reason) for an action that is not valid here (it has probability 0)."""
        ...

    def format(self, action: Any) -> str:
        """The action's canonical text (what the env reads and a report prints)."""
        ...

    def enumerate(self) -> Iterable[Any]:
        """Every valid action, for exact checks on small grammars in tests (may be huge otherwise)."""
        ...
