"""Batched constrained sampling and beam search over rows, driven by grammar state tables.

A row starts at a grammar state; its forced prefix (the tokens that are the only choice, such as
the context part of a branch row) is prefilled in one forward pass. Then at every step, for all
rows at once: gather the allowed token ids of each row's state, score them
(:meth:`PlannerRunner.allowed_logits`), log-softmax over the allowed slots only (the constrained,
renormalised distribution, at the sampling temperature), choose slots, look up next states. A
finished row sits in its grammar's sink and emits pad with log-probability 0.

Continuous batching: when rows (sampling) or beam groups finish, a ``spawn`` callback may return
new ones (the branch rows of a finished head row); they are prefilled and join the running batch
(:meth:`PlannerRunner.add_rows`) instead of waiting for the whole batch to finish, so decoder
passes stay full. A branch row's forced prefix re-reads its head row's tokens: it starts from a
copy of the finished head row's cache (:meth:`PlannerRunner.fork`) cut to the tokens both share,
and prefills only the rest (``; branch i: (``). Same positions, same tokens: same features.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence

import torch

from constrained_decoding.grammar import PlanGrammar, StateTables
from constrained_decoding.runner import PlannerRunner, RowFork

RowStart = tuple[PlanGrammar, int]  # a grammar and one of its (local) start states
BeamGroup = tuple[int, RowStart, int]  # a prompt index, a start and a beam width
Hyps = list[tuple[tuple[int, ...], float]]  # finished rows (token ids) and their scores, best first
SampleSpawn = Callable[[list[tuple[int, tuple[int, ...]]]], Sequence[tuple[int, RowStart]]]
BeamSpawn = Callable[[list[tuple[int, Hyps]]], Sequence[BeamGroup]]
Fork = tuple[RowFork, int] | None  # a finished row's cache and how many prefix tokens of a new row it holds

REUSE_CACHE = True
"""New rows start from the cache of a finished row they continue (False: prefill every prefix whole)."""


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _forks(runner: PlannerRunner, finished: Sequence[tuple[int | RowFork, int, Sequence[int]]],
           new: Sequence[tuple[int, RowStart]]) -> list[Fork]:
    """Per new row ``(prompt, start)``: a fork of the finished row that shares most tokens with its forced prefix.

    ``finished``: ``(source, prompt, tokens)`` of finished rows whose cache holds ``tokens`` after
    the prompt's context (their positions right after it, whatever the row read later); the source
    is a runner row (forked now: the finished rows may leave the batch before the new rows join
    it) or a fork taken earlier that holds at least ``tokens``. A fork is cut before the prefix's
    last token (the row needs a fed token to have features)."""
    if not REUSE_CACHE:
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


def _slot_logprobs(runner: PlannerRunner, tables: StateTables, feats: torch.Tensor, state: torch.Tensor,
                   temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    idx = tables.allowed[state]
    z = runner.allowed_logits(feats, tables, state)
    if temperature != 1.0:
        z = z / temperature
    z = z.masked_fill(~tables.valid[state], float("-inf"))
    return z.log_softmax(-1), idx


def _open(runner: PlannerRunner, tables: StateTables, prompt_idx: Sequence[int], starts: Sequence[RowStart],
          join: bool = False, forks: Sequence[Fork] | None = None):
    """Prefill the rows (identical rows once, then copied) and return prefixes, states, features.

    ``join``: the rows join the running batch (after its rows) instead of starting a new one.
    ``forks``: per row, a finished row's cache to start from (see :func:`_forks`)."""
    keys = [(p, tables.offset[g] + s) for p, (g, s) in zip(prompt_idx, starts)]
    first: dict[tuple[int, int], int] = {}
    uniq_prompt, uniq_pre, uniq_state, uniq_fork = [], [], [], []
    for k, (g, s), f in zip(keys, starts, forks or [None] * len(keys)):
        if k in first:
            continue
        first[k] = len(first)
        pre, end = g.dfa.forced_prefix(s)
        uniq_prompt.append(k[0])
        uniq_pre.append(pre)
        uniq_state.append(end + tables.offset[g])
        uniq_fork.append(f)
    dev = tables.allowed.device
    state = torch.as_tensor(uniq_state, dtype=torch.long, device=dev)
    expand = None
    if len(first) < len(keys):
        expand = torch.as_tensor([first[k] for k in keys], dtype=torch.long, device=dev)
        state = state.index_select(0, expand)
    prompts = torch.as_tensor(uniq_prompt, dtype=torch.long)
    if join:
        feats = runner.add_rows(prompts, uniq_pre, copies=expand, forks=uniq_fork)
    else:
        feats = runner.start(prompts, uniq_pre)
        if expand is not None:
            runner.select(expand)
            feats = feats.index_select(0, expand.to(feats.device))
    prefixes = [uniq_pre[first[k]] for k in keys]
    return prefixes, state, feats


JOIN_PATIENCE = 2
"""Steps new rows may wait to join the batch together with later ones (each join costs a pass)."""


class _Waiting:
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


def sample_rows(runner: PlannerRunner, tables: StateTables, prompt_idx: Sequence[int], starts: Sequence[RowStart],
                temperature: float, generator: torch.Generator,
                spawn: SampleSpawn | None = None) -> tuple[list[tuple[int, ...]], list[float]]:
    """One sample per row from the constrained distribution: token ids and log-probabilities.

    ``spawn(finished)``, called with ``(row, tokens)`` of the rows that have just finished, returns
    new rows ``(prompt index, start)``: they join the running batch (see :class:`_Waiting`) and are
    numbered after the rows so far, in spawn order; the result covers them too. Finished rows
    leave the batch once they are a quarter of it (rows differ in length), or when rows join."""
    rows, state, feats = _open(runner, tables, prompt_idx, starts)
    rows = [list(p) for p in rows]
    prompt_of = list(prompt_idx)  # per row
    dev = state.device
    logp = torch.zeros(len(starts), device=dev)
    alive = torch.arange(len(starts), device=dev)  # the row each batch position holds
    was_done = torch.zeros(len(starts), dtype=torch.bool, device=dev)  # (a row can start finished)
    waiting = _Waiting(lambda item: 1)
    while True:
        lp, idx = _slot_logprobs(runner, tables, feats, state, temperature)
        slot = torch.multinomial(lp.exp(), 1, generator=generator)
        tok = idx.gather(1, slot).squeeze(1)
        logp.index_add_(0, alive, lp.gather(1, slot).squeeze(1))
        active = ~tables.final[state]
        for r, t in zip(alive[active].tolist(), tok[active].tolist()):
            rows[r].append(t)
        state = tables.next_state[state, slot.squeeze(1)]
        done = tables.final[state]
        if spawn is not None:
            at = torch.nonzero(done & ~was_done).squeeze(1).tolist()
            if at:
                ended = alive[at].tolist()
                new_rows = spawn([(r, tuple(rows[r])) for r in ended])
                # a row's cache holds its tokens but the one just chosen
                fin = [(b, prompt_of[r], rows[r][:-1]) for b, r in zip(at, ended)]
                waiting.add(list(zip(new_rows, _forks(runner, fin, new_rows))))
        n_done = int(done.sum())
        new = waiting.take(len(done) - n_done)
        if n_done == len(done) and not new:
            break
        if 4 * n_done >= len(done) or (new and n_done):  # (joining rows copies the batch anyway)
            keep = torch.nonzero(~done).squeeze(1)
            runner.select(keep)
            state, tok, alive, done = state[keep], tok[keep], alive[keep], done[keep]
        was_done = done
        feats = runner.step(tok) if len(alive) else None
        if new:
            pre, new_state, new_feats = _open(runner, tables, [p for (p, _), _ in new], [s for (_, s), _ in new],
                                              join=True, forks=[f for _, f in new])
            rows += [list(q) for q in pre]
            prompt_of += [p for (p, _), _ in new]
            alive = torch.cat([alive, torch.arange(len(logp), len(rows), device=dev)])
            logp = torch.cat([logp, logp.new_zeros(len(new))])
            state = torch.cat([state, new_state])
            was_done = torch.cat([was_done, was_done.new_zeros(len(new))])
            feats = new_feats if feats is None else torch.cat([feats, new_feats])
    return [tuple(r) for r in rows], logp.tolist()


def beam_rows(runner: PlannerRunner, tables: StateTables, groups: Sequence[BeamGroup],
              spawn: BeamSpawn | None = None) -> list[Hyps]:
    """Beam search, one group per ``(prompt index, start, width)``: each group's finished rows, best first.

    Scores are constrained log-probabilities (temperature 1). Each group keeps ``width`` running
    beams, the best ``width`` continuations that do not end the row, and apart from them its
    finished hypotheses (as HF's ``BeamHypotheses``): every continuation that ends the row is
    recorded with its score when it is scored, whatever its rank, and kept if it is among the
    best ``width`` finished so far; it never takes a running beam's place. A group stops when it
    keeps ``width`` finished hypotheses that all score at least its best running beam (scores only
    fall: log-probabilities are <= 0, so no running beam can end better) or when no running beam
    is left, and returns its kept hypotheses: the best ``width`` rows of all it saw finish (fewer
    when the grammar has fewer rows).

    A group leaves the batch when it stops; ``spawn(finished)``, called with ``(group,
    hypotheses)`` of the groups that have just stopped, returns new groups: they join the running
    batch (see :class:`_Waiting`) and are numbered after the groups so far, in spawn order. With
    ``spawn`` (and :data:`REUSE_CACHE`), each kept hypothesis of a nonlinear grammar's head row
    (the rows that branch rows continue) holds a fork of its row's cache, taken when it finished.

    A group's beams are contiguous rows; groups of different widths are searched together on a
    view padded to the widest group (padding scores -inf, picks beyond a group's width dropped)."""
    out: list[Hyps] = []
    prefix: list[tuple[int, ...]] = []  # per group: its forced prefix
    born: list[int] = []  # per group: the column of ``seq`` holding its first token
    width: list[int] = []  # per group
    gid: list[int] = []  # the groups in the batch, in row order
    prompt_of: list[int] = []  # per group
    kept: list[list[tuple[float, tuple[int, ...], RowFork | None]]] = []  # per group: finished so far, best first
    forkable: list[bool] = []  # per group: its finished rows keep a fork of their cache (rows will continue them)
    reuse = spawn is not None and REUSE_CACHE
    dev = tables.allowed.device
    neg_inf = float("-inf")
    state, length = torch.zeros(0, dtype=torch.long, device=dev), torch.zeros(0, dtype=torch.long, device=dev)
    score, seq = torch.zeros(0, device=dev), torch.zeros((0, 0), dtype=torch.long, device=dev)
    feats: torch.Tensor | None = None

    def join(new: Sequence[BeamGroup], forks: Sequence[Fork] | None = None) -> None:
        nonlocal state, score, length, seq, feats
        rep = [(p, s) for p, s, w in new for _ in range(w)]
        row_forks = None if forks is None else [f for f, (_, _, w) in zip(forks, new) for _ in range(w)]
        pre, new_state, new_feats = _open(runner, tables, [p for p, _ in rep], [s for _, s in rep],
                                          join=bool(gid) or forks is not None, forks=row_forks)
        first = 0
        for p, (g, s), w in new:
            prompt_of.append(p)
            gid.append(len(out))
            out.append([])
            kept.append([])
            forkable.append(reuse and not g.is_linear and s == g.root)
            prefix.append(tuple(pre[first]))
            born.append(seq.shape[1])
            width.append(w)
            first += w
        new_score = torch.full((len(rep),), neg_inf, device=dev)
        new_score[torch.as_tensor([0, *itertools.accumulate(w for _, _, w in new)][:-1], device=dev)] = 0.0
        state = torch.cat([state, new_state])
        score = torch.cat([score, new_score])
        length = torch.cat([length, torch.zeros(len(rep), dtype=torch.long, device=dev)])
        seq = torch.cat([seq, seq.new_zeros((len(rep), seq.shape[1]))])
        feats = new_feats if feats is None else torch.cat([feats, new_feats])

    def record(fin_src: torch.Tensor, fin_slot: torch.Tensor, idx: torch.Tensor,
               entering: Sequence[tuple[int, int, float]]) -> None:
        """Keep the finishing candidates ``(group position, rank, score)`` that enter their group's best
        (``fin_src``, ``fin_slot``: the row and slot of each group's finishing candidates, by rank)."""
        at = torch.as_tensor([(i, j) for i, j, _ in entering], dtype=torch.long, device=dev)
        rows, slots = fin_src[at[:, 0], at[:, 1]], fin_slot[at[:, 0], at[:, 1]]
        toks, ended = idx[rows, slots].tolist(), tables.final[state[rows]].tolist()
        lens, seqs = length[rows].tolist(), seq[rows].tolist()
        new: dict[int, list[tuple[float, tuple[int, ...], RowFork | None]]] = {}
        for (i, _, sc), row, q, k, t, e in zip(entering, rows.tolist(), seqs, lens, toks, ended):
            g = gid[i]
            held = prefix[g] + tuple(q[born[g] : born[g] + k])  # the row's tokens, all in its cache
            fork = runner.fork(row, runner.context_len(prompt_of[g]) + len(held)) if forkable[g] else None
            new.setdefault(g, []).append((sc, held if e else held + (t,), fork))
        for g, hyps in new.items():  # (stable: on equal scores the earlier hypothesis stays first)
            kept[g] = sorted(kept[g] + hyps, key=lambda h: -h[0])[: width[g]]

    join(groups)
    waiting = _Waiting(lambda item: item[0][2])
    while True:
        widths = [width[g] for g in gid]
        n, w = len(gid), max(widths)
        lp, idx = _slot_logprobs(runner, tables, feats, state, 1.0)
        d = lp.shape[1]
        cand = score.unsqueeze(1) + lp
        ends = tables.final[tables.next_state[state]]  # [rows, d]: the slot ends the row
        run, fin = cand.masked_fill(ends, neg_inf), cand.masked_fill(~ends, neg_inf)
        if min(widths) == w:  # one width: the rows are an [n, w] grid
            base = (torch.arange(n, device=dev) * w).unsqueeze(1)
            val, pos = run.view(n, w * d).topk(w, dim=1)
            fin_val, fin_pos = fin.view(n, w * d).topk(w, dim=1)
            src = (base + torch.div(pos, d, rounding_mode="floor")).view(-1)
            slot = (pos % d).view(-1)
            fin_src = base + torch.div(fin_pos, d, rounding_mode="floor")
            in_group = None
        else:  # row j of group i at grid[i, j]; missing rows repeat the group's first row, scored -inf
            first = torch.as_tensor([0, *itertools.accumulate(widths)][:-1], device=dev)
            in_group = torch.arange(w, device=dev) < torch.as_tensor(widths, device=dev).unsqueeze(1)
            grid = first.unsqueeze(1) + torch.arange(w, device=dev) * in_group
            missing = ~in_group.unsqueeze(2)
            val, pos = run[grid].masked_fill(missing, neg_inf).view(n, w * d).topk(w, dim=1)
            fin_val, fin_pos = fin[grid].masked_fill(missing, neg_inf).view(n, w * d).topk(w, dim=1)
            src = grid.gather(1, torch.div(pos, d, rounding_mode="floor"))[in_group]
            slot = (pos % d)[in_group]
            fin_src = grid.gather(1, torch.div(fin_pos, d, rounding_mode="floor"))
        # per group: its best running score, then its best finishing ones (one transfer per step)
        top = torch.cat([val[:, :1], fin_val], 1).tolist()
        entering: list[tuple[int, int, float]] = []  # (group position, rank, score) of the kept finishing ones
        done: list[bool] = []
        for i, g in enumerate(gid):
            gw, best_running = width[g], top[i][0]
            worse = [-h[0] for h in kept[g]]  # (negated: ascending)
            added = 0
            for j, f in enumerate(top[i][1 : 1 + gw]):  # best first: the one of rank j is kept if fewer
                if f == neg_inf or j + bisect.bisect_right(worse, -f) >= gw:  # than ``width`` score >= f
                    break
                entering.append((i, j, f))
                added += 1
            if added:
                worse = sorted(worse + [-f for _, _, f in entering[-added:]])[:gw]
            done.append(best_running == neg_inf or (len(worse) == gw and -worse[-1] >= best_running))
        if entering:
            record(fin_src, fin_pos % d, idx, entering)
        tok = idx[src, slot]
        length = length[src] + (~tables.final[state[src]]).long()
        state = tables.next_state[state[src], slot]
        score = val.view(-1) if in_group is None else val[in_group]
        seq = torch.cat([seq[src], tok.unsqueeze(1)], 1)
        any_done = any(done)
        if not any_done and not waiting.items:
            runner.select(src, same_prompt=True)
            feats = runner.step(tok)
            continue
        finished, first_row = [], 0
        keep_rows: list[int] = []
        cached: list[tuple[RowFork, int, tuple[int, ...]]] = []  # (fork of a finished row, prompt, tokens it holds)
        for i, (g, gw) in enumerate(zip(gid, widths)):
            rows = range(first_row, first_row + gw)
            first_row += gw
            if not done[i]:
                keep_rows += rows
                continue
            out[g] = [(t, sc) for sc, t, _ in kept[g]]
            cached += [(f, prompt_of[g], t[:-1]) for _, t, f in kept[g] if f is not None]
            kept[g] = []
            finished.append((g, out[g]))
        if spawn is not None and finished:
            new_groups = spawn(finished)
            forks = _forks(runner, cached, [(p, s) for p, s, _ in new_groups])
            waiting.add(list(zip(new_groups, forks)))
        gid = [g for i, g in enumerate(gid) if not done[i]]
        new = waiting.take(sum(width[g] for g in gid))
        if not gid and not new:
            return out
        if any_done:
            keep = torch.as_tensor(keep_rows, dtype=torch.long, device=dev)
            src, tok, state, score, seq, length = src[keep], tok[keep], state[keep], score[keep], seq[keep], length[keep]
        runner.select(src, same_prompt=not any_done)
        feats = runner.step(tok) if gid else None
        if new:
            join([g for g, _ in new], [f for _, f in new])
