"""Batched constrained sampling over rows, and the row machinery beam search shares, driven by grammar state tables.

A row starts at a grammar state; its forced prefix (the tokens that are the only choice, such as
the context part of a branch row) is prefilled in one forward pass. Then at every step, for all
rows at once: gather the allowed token ids of each row's state, score them
(:meth:`PlannerRunner.allowed_logits`), log-softmax over the allowed slots only (the constrained,
renormalised distribution, at the sampling temperature; :mod:`constrained_decoding.masking`, the
scorer's mask too), choose slots, look up next states. A finished row sits in its grammar's sink
and emits pad with log-probability 0.

Continuous batching: when rows (sampling) or beam groups finish, a ``spawn`` callback may return
new ones (the branch rows of a finished head row); they are prefilled and join the running batch
(:meth:`PlannerRunner.add_rows`) instead of waiting for the whole batch to finish, so decoder
passes stay full. A branch row's forced prefix re-reads its head row's tokens: it starts from a
copy of the finished head row's cache (:meth:`PlannerRunner.fork`) cut to the tokens both share,
and prefills only the rest (``; branch i: (``). Same positions, same tokens: same features.
``reuse_cache=False`` prefills every prefix whole instead (the reference the tests compare with).

Beam search is :class:`constrained_decoding.beam.BeamSearch`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from common.errors import UserError
from constrained_decoding.finish_bounds import table_bounds
from constrained_decoding.kv_rows import RowFork
from constrained_decoding.masking import decoding_logprobs
from constrained_decoding.protocol import Grammar
from constrained_decoding.row_draws import RowDraws, categorical, multinomial_one
from constrained_decoding.runner import PlannerRunner
from constrained_decoding.tables import StateTables
from constrained_decoding.uploads import upload

RowStart = tuple[Grammar, int]  # a grammar and one of its (local) start states
SampleSpawn = Callable[[list[tuple[int, tuple[int, ...]]]], Sequence[tuple[int, RowStart]]]
Fork = tuple[RowFork, int] | None  # a finished row's cache and how many prefix tokens of a new row it holds


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def forks_for(runner: PlannerRunner, finished: Sequence[tuple[int | RowFork, int, Sequence[int]]],
              new: Sequence[tuple[int, RowStart]], reuse: bool = True) -> list[Fork]:
    """Per new row ``(prompt, start)``: a fork of the finished row that shares most tokens with its forced prefix.

    ``finished``: ``(source, prompt, tokens)`` of finished rows whose cache holds ``tokens`` after
    the prompt's context (their positions right after it, whatever the row read later); the source
    is a runner row (forked now: the finished rows may leave the batch before the new rows join
    it) or a fork taken earlier that holds at least ``tokens``. A fork is cut before the prefix's
    last token (the row needs a fed token to have features). ``reuse=False``: no forks."""
    if not reuse:
        return [None] * len(new)
    taken: dict[tuple[int, int], RowFork] = {}
    out: list[Fork] = []
    for p, (g, s) in new:
        pre, _ = g.dfa.forced_prefix(s)
        best: int | RowFork | None = None
        n = 0
        for source, q, toks in finished:
            m = min(_shared(toks, pre), len(pre) - 1) if q == p else 0
            if m > n:
                best, n = source, m
        if best is None:
            out.append(None)
        elif isinstance(best, RowFork):
            out.append((best, n))
        else:
            if (best, n) not in taken:
                taken[best, n] = runner.fork(best, runner.context_len(p) + n)
            out.append((taken[best, n], n))
    return out


class NonFiniteLogitsError(UserError, FloatingPointError):
    """The planner's logits for the tokens a grammar allows are NaN or +inf (or all -inf): its
    weights or inputs went non-finite. Decoding stops rather than emit or score anything."""


def nonfinite_logits_error(step: int, rows: int) -> NonFiniteLogitsError:
    return NonFiniteLogitsError(
        f"non-finite logits from the planner at decoding step {step} ({rows} row(s) with NaN or inf logits for "
        "the tokens the grammar allows): the model's weights or activations are NaN/inf (a diverged run, a "
        "damaged checkpoint, or a dtype that overflows); nothing was decoded")


def slot_logprobs(runner: PlannerRunner, tables: StateTables, feats: torch.Tensor, state: torch.Tensor,
                  temperature: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row, the constrained log-probabilities of its state's slots, their token ids, and
    whether the row's logits were unusable (``bad``: NaN, +inf, or every allowed token at -inf).

    The mask is :func:`constrained_decoding.masking.decoding_logprobs` (the scorer's
    :func:`~constrained_decoding.masking.constrained_logprobs`, with a bad row replaced by the
    uniform distribution over its allowed slots); callers raise :func:`nonfinite_logits_error`
    when any row is bad, at a step's first host transfer. The rows of ``state`` must be laid out
    (lazy tables: :meth:`~constrained_decoding.lazy_tables.LazyStateTables.ensure` first)."""
    idx = tables.allowed[state]
    lp, bad = decoding_logprobs(runner.allowed_logits(feats, tables, state), tables.valid[state], temperature)
    return lp, idx, bad


def open_rows(runner: PlannerRunner, tables: StateTables, prompt_idx: Sequence[int], starts: Sequence[RowStart],
          join: bool = False, forks: Sequence[Fork] | None = None):
    """Prefill the rows (identical rows once, then copied) and return prefixes, states, features.

    Rows are identical when they start at the same state of the same prompt text
    (``runner.canonical``; with ``share_prompt=False`` each prompt index is its own text).

    ``join``: the rows join the running batch (after its rows) instead of starting a new one.
    ``forks``: per row, a finished row's cache to start from (see :func:`forks_for`)."""
    keys = [(runner.canonical[p], tables.index(g, s)) for p, (g, s) in zip(prompt_idx, starts)]
    first: dict[tuple[int, int], int] = {}
    uniq_prompt, uniq_pre, uniq_state, uniq_fork = [], [], [], []
    for k, (g, s), f in zip(keys, starts, forks or [None] * len(keys)):
        if k in first:
            continue
        first[k] = len(first)
        pre, end = g.dfa.forced_prefix(s)
        uniq_prompt.append(k[0])
        uniq_pre.append(pre)
        uniq_state.append(tables.index(g, end))
        uniq_fork.append(f)
    dev = tables.allowed.device
    state = upload(uniq_state, dev)
    expand = None
    if len(first) < len(keys):
        expand_host = [first[k] for k in keys]
        expand = upload(expand_host, dev)
        state = state.index_select(0, expand)
    if join:
        copies = expand_host if expand is not None else None
        feats = runner.add_rows(uniq_prompt, uniq_pre, copies=copies, forks=uniq_fork)
    else:
        feats = runner.start(uniq_prompt, uniq_pre)
        if expand is not None:
            runner.select(expand, host_rows=expand_host)
            feats = feats.index_select(0, expand.to(feats.device))
    prefixes = [uniq_pre[first[k]] for k in keys]
    return prefixes, state, feats


JOIN_PATIENCE = 2
"""Steps new rows may wait to join the batch together with later ones (each join costs a pass)."""


class Waiting:
    """New rows waiting to join the running batch. Joining costs a prefill pass and a copy of the
    batch's cache, so rows that arrive a step or two apart join together: they join once they are
    a quarter of the running rows, once the first has waited ``JOIN_PATIENCE`` steps, or when no
    other row runs."""

    def __init__(self, size: Callable[[object], int]):
        self.size, self.items, self.waited = size, [], 0

    def add(self, items: Sequence) -> None:
        if items and not self.items:
            self.waited = 0
        self.items += list(items)

    def take(self, running: int) -> list:
        """The rows to join now (and forget), given how many rows are running; else [] (one call per step)."""
        if not self.items:
            return []
        if 4 * sum(self.size(x) for x in self.items) < running and self.waited < JOIN_PATIENCE:
            self.waited += 1
            return []
        items, self.items = self.items, []
        return items


def _start_states(tables: StateTables, starts: Sequence[RowStart]) -> list[int]:
    """The stacked state each row decodes from (after its forced prefix), on the host."""
    memo: dict[tuple[int, int], int] = {}
    out = []
    for g, s in starts:
        key = (id(g), s)
        if key not in memo:
            memo[key] = tables.index(g, g.dfa.forced_prefix(s)[1])
        out.append(memo[key])
    return out


def _first_read(states: Sequence[int], dist) -> int:
    """Steps until rows starting in ``states`` may first finish (a row that starts finished: 1)."""
    return min((max(int(dist[s]), 1) for s in states), default=1)


def sample_rows(runner: PlannerRunner, tables: StateTables, prompt_idx: Sequence[int], starts: Sequence[RowStart],
                temperature: float, generator: torch.Generator | None, spawn: SampleSpawn | None = None,
                *, reuse_cache: bool = True,
                draws: RowDraws | None = None) -> tuple[list[tuple[int, ...]], list[float]]:
    """One sample per row from the constrained distribution: token ids and log-probabilities.

    Every step's choices are one draw over the batch with ``generator`` (``torch.multinomial``'s,
    bit for bit: :func:`~constrained_decoding.row_draws.multinomial_one`), or, with ``draws`` (one
    key per row, in row order, spawned rows' keys added by ``spawn``), each row's own uniform
    (:mod:`constrained_decoding.row_draws`): a row's sample then does not depend on the other rows
    of the batch.

    ``spawn(finished)``, called with ``(row, tokens)`` of the rows that have just finished, returns
    new rows ``(prompt index, start)``: they join the running batch (see :class:`Waiting`) and are
    numbered after the rows so far, in spawn order; the result covers them too. Finished rows
    leave the batch once they are a quarter of it (rows differ in length), or when rows join.

    Host reads: tokens, states and finished flags stay on the device; they are read (one transfer)
    only after a step at which some row may have finished: no running row can finish before
    :func:`~constrained_decoding.finish_bounds.steps_to_final` of its state, so between reads the
    host knows every finished flag already and decides joins, leaves and the end at the same
    steps as reading every step (the same draws, bit for bit). Unusable logits are raised at the
    next read, naming the step they occurred at."""
    return RowSampler(runner, tables, prompt_idx, starts, temperature, generator, spawn, reuse_cache, draws).run()


class RowSampler:
    """One :func:`sample_rows` call: its rows, the running ones' state on the device, and what the host
    knows of them as of the last read (see :func:`sample_rows`)."""

    def __init__(self, runner: PlannerRunner, tables: StateTables, prompt_idx: Sequence[int],
                 starts: Sequence[RowStart], temperature: float, generator: torch.Generator | None,
                 spawn: SampleSpawn | None, reuse_cache: bool, draws: RowDraws | None):
        self.runner, self.tables, self.temperature = runner, tables, temperature
        self.generator, self.spawn, self.reuse_cache, self.draws = generator, spawn, reuse_cache, draws
        rows, self.state, self.feats = open_rows(runner, tables, prompt_idx, starts)
        self.rows = [list(p) for p in rows]
        self.prompt_of = list(prompt_idx)  # per row
        dev = self.dev = self.state.device
        self.dist, self.final = table_bounds(tables)
        self.logp = torch.zeros(len(starts), device=dev)
        self.alive = torch.arange(len(starts), device=dev)  # the row each batch position holds
        self.alive_rows = list(range(len(starts)))  # the same on the host
        first = _start_states(tables, starts)
        self.active = [not self.final[s] for s in first]  # per position: still decoding (no change between reads)
        self.done = [False] * len(starts)  # per position, as of the last read (a row can start finished: read at 1)
        self.was_done = list(self.done)
        self.due = _first_read(first, self.dist)  # the step after which the device is read next
        self.pending: list[tuple[torch.Tensor, torch.Tensor, list[tuple[int, int]]]] = []  # per unread step
        self.waiting = Waiting(lambda item: 1)
        self.step = 0

    def run(self) -> tuple[list[tuple[int, ...]], list[float]]:
        """Decode until every row (spawned ones too) has finished; per row its tokens and log-probability."""
        while True:
            self.step += 1
            tok = self.draw()
            if self.step >= self.due:  # some row may have finished: one transfer of the unread steps and the states
                self.read_finished()
            n_done = sum(self.done)
            new = self.waiting.take(len(self.done) - n_done)
            if n_done == len(self.done) and not new:
                return [tuple(r) for r in self.rows], self.logp.tolist()
            if 4 * n_done >= len(self.done) or (new and n_done):  # (joining rows copies the batch anyway)
                tok = self.drop_finished(tok)
            self.was_done = list(self.done)
            self.feats = self.runner.step(tok) if self.alive_rows else None
            if new:
                self.join(new)

    def draw(self) -> torch.Tensor:
        """One step on the device: every running position draws a slot (from the batch's generator or
        its row's stream), adds its log-probability and takes the next state; the tokens drawn."""
        tables = self.tables
        tables.ensure(self.state)  # (lazy tables lay out the rows of states reached at the last step)
        lp, idx, bad = slot_logprobs(self.runner, tables, self.feats, self.state, self.temperature)
        if self.draws is None:
            slot = multinomial_one(lp.exp(), self.generator)
        else:
            slot = categorical(lp, self.draws.uniforms(self.alive_rows, device=self.dev))
        tok = idx.gather(1, slot).squeeze(1)
        self.logp.index_add_(0, self.alive, lp.gather(1, slot).squeeze(1))
        self.state = tables.next_state[self.state, slot.squeeze(1)]
        self.pending.append((tok, bad.sum().view(1),
                             [(i, self.alive_rows[i]) for i, a in enumerate(self.active) if a]))
        return tok

    def read_finished(self) -> None:
        """Read the unread steps (:func:`_read`): the rows' tokens, which positions have finished, when to
        read next; the rows that have just finished spawn theirs (waiting to join)."""
        self.done, self.due = _read(self.pending, self.state, self.step, self.rows, self.final, self.dist)
        self.pending = []
        self.active = [not d for d in self.done]
        at = [i for i, (d, w) in enumerate(zip(self.done, self.was_done)) if d and not w]
        if self.spawn is not None and at:
            ended = [self.alive_rows[i] for i in at]
            new_rows = self.spawn([(r, tuple(self.rows[r])) for r in ended])
            # a row's cache holds its tokens but the one just chosen
            fin = [(b, self.prompt_of[r], self.rows[r][:-1]) for b, r in zip(at, ended)]
            self.waiting.add(list(zip(new_rows, forks_for(self.runner, fin, new_rows, self.reuse_cache))))

    def drop_finished(self, tok: torch.Tensor) -> torch.Tensor:
        """The finished positions leave the batch (the runner's rows too); the running ones' tokens."""
        kept = [i for i, d in enumerate(self.done) if not d]
        # the running positions in order, found on the device (the host knows how many)
        keep = torch.argsort(self.tables.final[self.state].to(torch.uint8), stable=True)[: len(kept)]
        self.alive_rows = [self.alive_rows[i] for i in kept]
        self.active = [self.active[i] for i in kept]
        self.done = [False] * len(kept)
        self.runner.select(keep, host_rows=kept)  # (the same rows, as the host knows them)
        self.state, self.alive = self.state[keep], self.alive[keep]
        return tok[keep]

    def join(self, new: list) -> None:
        """Open the waiting rows ``((prompt, start), fork)`` after the running ones: numbered after the
        rows so far, read at the step their first may finish."""
        pre, new_state, new_feats = open_rows(self.runner, self.tables, [p for (p, _), _ in new],
                                              [s for (_, s), _ in new], join=True, forks=[f for _, f in new])
        n = len(self.rows)
        self.rows += [list(q) for q in pre]
        self.prompt_of += [p for (p, _), _ in new]
        self.alive = torch.cat([self.alive, torch.arange(n, len(self.rows), device=self.dev)])
        self.alive_rows += range(n, len(self.rows))
        self.logp = torch.cat([self.logp, self.logp.new_zeros(len(new))])
        self.state = torch.cat([self.state, new_state])
        joined = _start_states(self.tables, [s for (_, s), _ in new])
        self.active += [not self.final[s] for s in joined]
        self.done += [False] * len(new)
        self.was_done += [False] * len(new)
        self.due = min(self.due, self.step + _first_read(joined, self.dist))
        self.feats = new_feats if self.feats is None else torch.cat([self.feats, new_feats])


def _read(pending: list[tuple[torch.Tensor, torch.Tensor, list[tuple[int, int]]]], state: torch.Tensor, step: int,
          rows: list[list[int]], final, dist) -> tuple[list[bool], int]:
    """Read the unread steps (``(tokens, bad count, (position, row) of the positions that were
    running)`` each) and the states after ``step`` in one transfer: append the tokens to their
    rows, raise at the first step with unusable logits; each position's finished flag and the
    step after which to read next."""
    k = len(pending)
    got = torch.cat([*(b for _, b, _ in pending), *(t for t, _, _ in pending), state]).tolist()
    for j, n in enumerate(got[:k]):
        if n:
            raise nonfinite_logits_error(step - k + 1 + j, n)
    off = k
    for tok, _, targets in pending:
        for i, r in targets:
            rows[r].append(got[off + i])
        off += tok.shape[0]
    now = got[off:]
    done = [bool(final[s]) for s in now]
    return done, step + min((int(dist[s]) for s, d in zip(now, done) if not d), default=1)
