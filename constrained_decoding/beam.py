"""Batched constrained beam search over rows, one :class:`Group` record per searched row start.

Scores are constrained log-probabilities (temperature 1). Each group keeps ``width`` running
beams, the best ``width`` continuations that do not end the row, and apart from them its
finished hypotheses (as HF's ``BeamHypotheses``): every continuation that ends the row is
recorded with its score when it is scored, whatever its rank, and kept if it is among the best
``width`` finished so far; it never takes a running beam's place. A group stops when it keeps
``width`` finished hypotheses that all score at least its best running beam (scores only fall:
log-probabilities are <= 0, so no running beam can end better) or when no running beam is left,
and returns its kept hypotheses: the best ``width`` rows of all it saw finish (fewer when the
grammar has fewer rows).

``greedy=True`` (width-1 groups only) is the strict argmax path, as HF's greedy search: a row
ends only when ending it is the best-ranked continuation (at width 1 the beam rule above would
also return a likelier row that ended earlier, off the argmax path).

A group leaves the batch when it stops; ``spawn(finished)``, called with ``(group, hypotheses)``
of the groups that have just stopped, returns new groups: they join the running batch (see
:class:`constrained_decoding.search.Waiting`) and are numbered after the groups so far, in spawn
order. With ``spawn`` (and ``reuse_cache``), each kept hypothesis of a branching grammar's root
row (the rows that branch rows continue) holds a fork of its row's cache, taken when it finished.

A group's beams are contiguous rows; groups of different widths are searched together on a view
padded to the widest group (padding scores -inf, picks beyond a group's width dropped).

Stochastic beam search (``gumbel``: a generator; Kool, van Hoof & Welling, ICML 2019): beams are
ranked by *perturbed* scores instead of log-probabilities. Every node of the search tree (a row
prefix) holds G = its log-probability φ plus Gumbel noise, conditioned top-down so that the largest
G of a node's children equals the node's own (:func:`~constrained_decoding.gumbel_keys.perturbed_keys`);
G of a node is then the largest G of the finished rows below it, the same property a log-probability
has (it only falls), so the search above -- with G for the score -- returns the ``width`` finished rows of largest G:
an exact sample without replacement from π_c (at ``temperature``). A group may start from a node
of a larger tree (``BeamGroup``'s optional ``(φ, G)``: a plan's earlier rows): its rows carry the
plan's φ and G. Every group also reports the largest G it discarded (:attr:`Group.dropped`: the
threshold κ of the estimators that weight by inclusion probabilities). Hypotheses are
``(tokens, log-probability, rank score)``: the rank score is G, or the log-probability itself.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from constrained_decoding.finish_bounds import table_bounds
from constrained_decoding.gumbel_keys import NEG_INF, perturbed_keys
from constrained_decoding.host_reads import HostRead
from constrained_decoding.kv_rows import RowFork
from constrained_decoding.runner import PlannerRunner
from constrained_decoding.search import (
    Fork,
    RowStart,
    Waiting,
    forks_for,
    nonfinite_logits_error,
    open_rows,
    slot_logprobs,
)
from constrained_decoding.tables import StateTables
from constrained_decoding.uploads import upload

BeamGroup = tuple  # (prompt index, start, beam width) or (..., φ, G): the plan's log-prob and key it continues
Hyps = list[tuple[tuple[int, ...], float, float]]  # finished rows: token ids, log-prob and rank score; best first
BeamSpawn = Callable[[list[tuple[int, Hyps]]], Sequence[BeamGroup]]


@dataclass
class Finished:
    """A finished hypothesis: its rank score, its tokens, its log-probability and (root rows that
    branch) a fork of its cache."""

    score: float
    tokens: tuple[int, ...]
    fork: RowFork | None = None
    logprob: float = 0.0


@dataclass
class Candidate:
    """A finishing candidate as read (a row of :meth:`BeamSearch._finishing`): the row it continues, the
    token that ends it, whether its row had ended already (the token is the sink's pad), its length,
    the tokens of its row since the search's first column, and (stochastic) its log-probability."""

    row: int
    token: int
    ended: bool
    length: int
    tokens: list[int]
    logprob: float | None

    @classmethod
    def unpack(cls, values: Sequence[float], stochastic: bool) -> Candidate:
        row, token, ended, length, *tokens = values
        logprob = tokens.pop() if stochastic else None
        return cls(int(row), int(token), bool(ended), int(length), [int(x) for x in tokens], logprob)


@dataclass
class Group:
    """One beam search: a prompt, a row start and a width, with what it found so far."""

    prompt: int
    start: RowStart
    width: int
    prefix: tuple[int, ...]  # its forced prefix (prefilled, not in ``seq``)
    born: int  # the column of the search's ``seq`` holding its first token
    forkable: bool  # its finished rows keep a fork of their cache (branch rows will continue them)
    kept: list[Finished] = field(default_factory=list)  # the best ``width`` finished so far, best first
    result: Hyps | None = None  # set when it stops
    dropped: float = NEG_INF  # the largest rank score of a node it discarded (stochastic beam search's κ)


@dataclass
class Step:
    """One step's choices over the running rows (``[groups, width]`` views for the grid)."""

    val: torch.Tensor  # [groups, width] best running rank scores (-inf: none)
    src: torch.Tensor  # [rows] the row each new running beam continues
    slot: torch.Tensor  # [rows] its slot
    score: torch.Tensor  # [rows] its rank score
    fin_val: torch.Tensor  # [groups, width] best finishing rank scores
    fin_src: torch.Tensor  # [groups, width] their rows
    fin_slot: torch.Tensor  # [groups, width] their slots
    logprob: torch.Tensor | None = None  # (stochastic) [rows] the running beams' log-probabilities
    fin_logprob: torch.Tensor | None = None  # (stochastic) [groups, width] the finishing ones'
    next_val: torch.Tensor | None = None  # (stochastic) [groups, 2] the best running and finishing left out
    left_running: torch.Tensor | None = None  # (stochastic) [groups] the best running node a group left out


class BeamSearch:
    """Beam search of many groups in one running batch (see the module docstring)."""

    def __init__(self, runner: PlannerRunner, tables: StateTables, spawn: BeamSpawn | None = None, *,
                 reuse_cache: bool = True, greedy: bool = False, gumbel: torch.Generator | None = None,
                 temperature: float = 1.0, keep_forks: bool = False):
        self.runner, self.tables, self.spawn = runner, tables, spawn
        self.reuse = spawn is not None and reuse_cache
        self.reuse_cache, self.greedy = reuse_cache, greedy
        self.gumbel, self.temperature = gumbel, temperature
        if gumbel is not None and greedy:
            raise ValueError("greedy=True with a gumbel generator: stochastic beam search has no argmax path")
        # keep_forks: the forks of every finished root row stay available to later spawned groups (not
        # only to those spawned when it stops): stochastic beam search spawns a plan's branch rows one by one
        self.keep_forks = keep_forks
        self.forks: list[tuple[RowFork, int, tuple[int, ...]]] = []
        self.groups: list[Group] = []
        self.running: list[int] = []  # the groups in the batch, in row order (each holds ``width`` rows)
        dev = self.dev = tables.allowed.device
        self.state = torch.zeros(0, dtype=torch.long, device=dev)  # per row: grammar state
        self.length = torch.zeros(0, dtype=torch.long, device=dev)  # per row: tokens chosen (not counting pad)
        self.score = torch.zeros(0, device=dev)  # per row: log-probability so far
        self.key = torch.zeros(0, dtype=torch.float64, device=dev)  # per row (stochastic): its perturbed key
        self.seq = torch.zeros((0, 0), dtype=torch.long, device=dev)  # per row: every token chosen since born
        self.feats: torch.Tensor | None = None
        self.waiting = Waiting(lambda item: item[0][2])
        self.steps = 0  # decoding steps so far (named by a non-finite logits error)
        self.bad = torch.zeros(0, dtype=torch.bool, device=dev)  # per row: unusable logits this step
        # reads skipped while no row can finish: the next step that must read, each
        # grammar state's fewest steps to the end (on the device), and the unread steps' unusable-logit counts
        self.due = 0
        self.to_end = None if tables.lazy else torch.as_tensor(table_bounds(tables)[0], device=dev)
        self.unread_bad: list[tuple[int, torch.Tensor]] = []
        self.left_max: torch.Tensor | None = None  # (stochastic) see _left_max
        self._layout: tuple | None = None  # (widths, then _grid's tensors) of the running groups' grid

    def run(self, groups: Sequence[BeamGroup]) -> list[Hyps]:
        """Each group's (and each spawned group's) finished rows, best first."""
        self._join(groups)
        while True:
            step = self._choose()
            done = self._record_finished(step)
            tok = self._advance(step)
            if not any(done) and not self.waiting.items:
                self.runner.select(step.src, same_prompt=True)
                self.feats = self.runner.step(tok)
                continue
            if self._retire(done, step.src, tok):
                return [g.result or [] for g in self.groups]

    # ------------------------------------------------------------------------------ one step
    def _choose(self) -> Step:
        """Score every continuation of every row; per group the best ``width`` running and finishing ones."""
        tables, dev = self.tables, self.dev
        widths = [self.groups[g].width for g in self.running]
        n, w = len(widths), max(widths)
        self.steps += 1
        tables.ensure(self.state)  # (lazy tables lay out the rows of states reached at the last step)
        lp, self.idx, self.bad = slot_logprobs(self.runner, tables, self.feats, self.state, self.temperature)
        d = lp.shape[1]
        cand = self.score.unsqueeze(1) + lp
        rank = cand if self.gumbel is None else perturbed_keys(cand, self.key, self.gumbel)
        ends = tables.final[tables.next_state[self.state]]  # [rows, d]: the slot ends the row
        run, fin = rank.masked_fill(ends, NEG_INF), rank.masked_fill(~ends, NEG_INF)
        # (stochastic) one more of each: the best left out, whose key is a candidate for κ
        top = w if self.gumbel is None else min(w + 1, w * d)
        if min(widths) == w:  # one width: the rows are an [n, w] grid
            base = (torch.arange(n, device=dev) * w).unsqueeze(1)
            val, pos = run.view(n, w * d).topk(top, dim=1)
            fin_val, fin_pos = fin.view(n, w * d).topk(top, dim=1)
            src = (base + torch.div(pos[:, :w], d, rounding_mode="floor")).view(-1)
            slot, fin_src = (pos[:, :w] % d).view(-1), base + torch.div(fin_pos[:, :w], d, rounding_mode="floor")
        else:  # row j of group i at grid[i, j]; missing rows repeat the group's first row, scored -inf
            width_t, in_group, keep, grid = self._grid(widths)
            missing = ~in_group.unsqueeze(2)
            val, pos = run[grid].masked_fill(missing, NEG_INF).view(n, w * d).topk(top, dim=1)
            fin_val, fin_pos = fin[grid].masked_fill(missing, NEG_INF).view(n, w * d).topk(top, dim=1)
            src = grid.gather(1, torch.div(pos[:, :w], d, rounding_mode="floor")).view(-1).index_select(0, keep)
            slot = (pos[:, :w] % d).reshape(-1).index_select(0, keep)
            fin_src = grid.gather(1, torch.div(fin_pos[:, :w], d, rounding_mode="floor"))
        fin_slot = fin_pos[:, :w] % d
        score = val[:, :w].reshape(-1) if min(widths) == w else val[:, :w].reshape(-1).index_select(0, keep)
        if self.gumbel is None:
            return Step(val, src, slot, score, fin_val, fin_src, fin_slot)
        left_out = torch.full((n, 2), NEG_INF, dtype=val.dtype, device=dev)
        if top > w:
            left_out = torch.stack([val[:, w], fin_val[:, w]], 1)
        val, fin_val = val[:, :w], fin_val[:, :w]
        left_running = left_out[:, 0] if min(widths) == w else \
            torch.cat([val, left_out[:, :1]], 1).gather(1, width_t.unsqueeze(1)).squeeze(1)  # rank-gw left out
        return Step(val, src, slot, score, fin_val, fin_src, fin_slot, cand[src, slot], cand[fin_src, fin_slot],
                    left_out, left_running)

    def _grid(self, widths: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Groups of several widths on an ``[groups, widest]`` grid: the widths, which cells hold a row,
        the flat cells that do (row order) and each cell's row (a missing one: its group's first). Made
        when the running groups change, not at every step; indexed, not masked (a mask reads the device)."""
        key = tuple(widths)
        if self._layout is None or self._layout[0] != key:
            dev, w = self.dev, max(widths)
            width_t = upload(widths, dev)
            in_group = torch.arange(w, device=dev) < width_t.unsqueeze(1)
            keep = upload([i * w + j for i, gw in enumerate(widths) for j in range(gw)], dev)
            first = upload([0, *itertools.accumulate(widths)][:-1], dev)
            self._layout = (key, width_t, in_group, keep, first.unsqueeze(1) + torch.arange(w, device=dev) * in_group)
        return self._layout[1:]

    def _record_finished(self, step: Step) -> list[bool]:
        """Keep the finishing continuations that enter their group's best; which groups stop."""
        stochastic = step.next_val is not None
        self.unread_bad.append((self.steps, self.bad.sum()))
        if self.steps < self.due and not any(len(self.groups[g].kept) >= self.groups[g].width for g in self.running):
            # no row can finish at this step and no group can stop (see _skips): nothing to decide but,
            # stochastic, κ's candidate: the best running node each group leaves out, kept on the device
            if stochastic:
                self.left_max = self._left_max(step.left_running)
            return [False] * len(self.running)
        got = self._read(step, stochastic)
        steps, self.unread_bad = [s for s, _ in self.unread_bad], []
        for at, n_bad in zip(steps, got["bad"]):  # (checked before anything is kept)
            if n_bad:
                raise nonfinite_logits_error(at, int(n_bad))
        self.due = self.steps + int(got["skips"])
        entering: list[tuple[int, int, float]] = []  # (group position, rank, score)
        done: list[bool] = []
        for i, (g, cols) in enumerate(zip(self.running, got["groups"])):
            grp = self.groups[g]
            if stochastic:  # the best running and finishing ones, then the best of each left out
                running, finishing = cols["running"] + cols["left_out"][:1], cols["finishing"] + cols["left_out"][1:]
            else:
                running, finishing = cols["best_running"], cols["finishing"]
            gw, best_running = grp.width, running[0]
            worse = [-h.score for h in grp.kept]  # (negated: ascending)
            added = 0
            for j, f in enumerate(finishing[:gw]):  # best first: the one of rank j is kept if fewer
                if f == NEG_INF or j + bisect.bisect_right(worse, -f) >= gw:  # than ``width`` score >= f
                    break
                if self.greedy and f < best_running:  # strict argmax: ending is not the best choice
                    break
                entering.append((i, j, f))
                added += 1
            if added:
                worse = sorted(worse + [-f for _, _, f in entering[-added:]])[:gw]
            stops = best_running == NEG_INF or (len(worse) == gw and -worse[-1] >= best_running)
            if stochastic:  # the best nodes this step left out: a running one not taken, a finishing one not kept,
                #             and at the stop the running beams themselves; and the running ones unread steps left out
                grp.dropped = max(grp.dropped, running[gw], finishing[added], best_running if stops else NEG_INF,
                                  cols["left_before"][0])
            done.append(stops)
        if entering:
            self._keep(entering, got["candidates"], step.val.shape[1], stochastic)
        return done

    def _read(self, step: Step, stochastic: bool) -> dict:
        """One transfer of what the step decides on (:class:`~constrained_decoding.host_reads.HostRead`):
        per group (``groups``) its best running and finishing scores (stochastic: all ``width`` of each,
        the best of each left out, ``left_out``, and the best running node left out at the unread steps
        since the last read, ``left_before``); what keeping each finishing candidate needs
        (``candidates``: :meth:`_finishing`), so those that enter cost no second read; how many rows had
        unusable logits at each step since the last read (``bad``); the fewest steps before a running
        row can end (``skips``)."""
        read = HostRead()
        if stochastic:
            read.columns("groups", running=step.val, finishing=step.fin_val, left_out=step.next_val,
                         left_before=self._left_max(step.left_running))
        else:
            read.columns("groups", best_running=step.val[:, :1], finishing=step.fin_val)
        self.left_max = None
        read.add("candidates", self._finishing(step))
        read.add("bad", torch.stack([b for _, b in self.unread_bad]))
        return read.add("skips", self._skips(step)).read()

    def _left_max(self, left_running: torch.Tensor) -> torch.Tensor:
        """Per running group, the largest key of a running node it left out at this step or at an
        unread step since the last read (on the device). Groups only join between reads (at the end
        of the running ones): those the running maximum does not cover yet have left nothing out."""
        if self.left_max is None:
            return left_running
        held = self.left_max
        if held.shape[0] < left_running.shape[0]:
            held = torch.cat([held, held.new_full((left_running.shape[0] - held.shape[0],), NEG_INF)])
        return torch.maximum(held, left_running)

    def _skips(self, step: Step) -> torch.Tensor:
        """How many steps from now the device must be read again (a 0-dim tensor): the fewest steps
        to the end of a row (:func:`~constrained_decoding.finish_bounds.steps_to_final`) over the
        states the running beams take at this step. Until then no row can end, so nothing enters a
        group's kept hypotheses and a group can stop only when its kept list is full (then every
        step reads); joining rows read at the next step (:meth:`_join`)."""
        if self.to_end is None:  # lazy tables: a state's bound is 1 (lazy_tables), so read at every step
            return torch.ones((), dtype=torch.long, device=self.dev)
        live = step.score > NEG_INF  # (-inf rows are padding picks: their states say nothing)
        nxt = self.tables.next_state[self.state[step.src], step.slot]
        big = torch.iinfo(torch.long).max // 4
        return torch.where(live, self.to_end[nxt], big).min().clamp(min=1, max=1 << 20)

    def _finishing(self, step: Step) -> torch.Tensor:
        """``[groups * width, 4 + tokens (+ 1)]`` per finishing candidate (group-major), packed as
        :class:`Candidate` unpacks it: its row, token, whether its state ends the row, its length and
        its tokens since born (stochastic: then its log-probability); read with the step's scores."""
        rows, slots = step.fin_src.reshape(-1), step.fin_slot.reshape(-1)
        parts = [torch.stack([rows, self.idx[rows, slots].long(), self.tables.final[self.state[rows]].long(),
                              self.length[rows]], 1), self.seq[rows]]
        if step.fin_logprob is not None:
            parts = [p.double() for p in parts] + [step.fin_logprob.reshape(-1, 1).double()]
        return torch.cat(parts, 1)

    def _keep(self, entering: Sequence[tuple[int, int, float]], moved: Sequence[Sequence[float]], w: int,
              stochastic: bool) -> None:
        """Keep the entering finishing candidates ``(group position, rank, score)``; ``moved``: every
        candidate's :meth:`_finishing` row, as read (``w`` per group)."""
        new: dict[int, list[Finished]] = {}
        for i, j, sc in entering:
            c = Candidate.unpack(moved[i * w + j], stochastic)
            lp = sc if c.logprob is None else c.logprob  # (not stochastic: the score is the log-probability)
            grp = self.groups[self.running[i]]
            held = grp.prefix + tuple(c.tokens[grp.born : grp.born + c.length])  # the row's tokens, all in its cache
            fork = self.runner.fork(c.row, self.runner.context_len(grp.prompt) + len(held)) if grp.forkable else None
            new.setdefault(self.running[i], []).append(Finished(sc, held if c.ended else held + (c.token,), fork, lp))
        for g, hyps in new.items():  # (stable: on equal scores the earlier hypothesis stays first)
            grp = self.groups[g]
            ranked = sorted(grp.kept + hyps, key=lambda h: -h.score)
            grp.kept = ranked[: grp.width]
            if len(ranked) > grp.width:
                grp.dropped = max(grp.dropped, ranked[grp.width].score)

    def _advance(self, step: Step) -> torch.Tensor:
        """The running beams take their chosen slots; the tokens to feed."""
        src, tables = step.src, self.tables
        tok = self.idx[src, step.slot]
        self.length = self.length[src] + (~tables.final[self.state[src]]).long()
        self.state = tables.next_state[self.state[src], step.slot]
        if step.logprob is None:
            self.score = step.score
        else:
            self.score, self.key = step.logprob, step.score
        self.seq = torch.cat([self.seq[src], tok.unsqueeze(1)], 1)
        return tok

    def _retire(self, done: Sequence[bool], src: torch.Tensor, tok: torch.Tensor) -> bool:
        """Stopped groups leave (spawning new ones), waiting groups join; True when nothing runs."""
        finished, keep_rows, first_row = [], [], 0
        cached: list[tuple[RowFork, int, tuple[int, ...]]] = []  # (fork of a finished row, prompt, tokens it holds)
        for i, g in enumerate(self.running):
            grp = self.groups[g]
            rows = range(first_row, first_row + grp.width)
            first_row += grp.width
            if not done[i]:
                keep_rows += rows
                continue
            grp.result = [(h.tokens, h.logprob, h.score) for h in grp.kept]
            cached += [(h.fork, grp.prompt, h.tokens[:-1]) for h in grp.kept if h.fork is not None]
            grp.kept = []
            finished.append((g, grp.result))
        if self.keep_forks:
            self.forks += cached
            cached = self.forks
        if self.spawn is not None and finished:
            new_groups = self.spawn(finished)
            forks = forks_for(self.runner, cached, [(p, s) for p, s, *_ in new_groups], self.reuse_cache)
            self.waiting.add(list(zip(new_groups, forks)))
        any_done = any(done)
        self.running = [g for i, g in enumerate(self.running) if not done[i]]
        new = self.waiting.take(sum(self.groups[g].width for g in self.running))
        if not self.running and not new:
            return True
        if not any_done:
            self.runner.select(src, same_prompt=True)
        else:
            keep = upload(keep_rows, self.dev)
            if self.runner.gathers_selects:
                self.runner.select(src, same_prompt=True)  # beams take their parents on the device, then
                self.runner.select(keep, host_rows=keep_rows)  # the rows the host knows stay: nothing read back
            else:
                self.runner.select(src[keep], prompts_of=keep_rows)  # (a beam's parent is in its group)
            tok, self.state, self.score, self.seq, self.length = (tok[keep], self.state[keep], self.score[keep],
                                                                  self.seq[keep], self.length[keep])
            if self.gumbel is not None:
                self.key = self.key[keep]
        self.feats = self.runner.step(tok) if self.running else None
        if new:
            self._join([g for g, _ in new], [f for _, f in new])
        return False

    def _join(self, new: Sequence[BeamGroup], forks: Sequence[Fork] | None = None) -> None:
        """Open the rows of new groups: a group's first beam scores its start (0, or the φ it continues;
        stochastic: its key the G it continues), the others -inf until they diverge."""
        self.due = self.steps + 1  # new rows: read at the next step (their states are not in the bound)
        rep = [(p, s) for p, s, w, *_ in new for _ in range(w)]
        row_forks = None if forks is None else [f for f, (_, _, w, *_) in zip(forks, new) for _ in range(w)]
        pre, new_state, new_feats = open_rows(self.runner, self.tables, [p for p, _ in rep], [s for _, s in rep],
                                              join=bool(self.running) or forks is not None, forks=row_forks)
        first = 0
        for p, (g, s), w, *_ in new:
            self.running.append(len(self.groups))
            self.groups.append(Group(p, (g, s), w, tuple(pre[first]), self.seq.shape[1],
                                     self.reuse and g.branching and s == g.root))
            first += w
        dev = self.dev
        firsts = upload([0, *itertools.accumulate(w for _, _, w, *_ in new)][:-1], dev)
        new_score = torch.full((len(rep),), NEG_INF, device=dev)
        new_score[firsts] = upload([x[3] if len(x) > 3 else 0.0 for x in new], dev, new_score.dtype)
        if self.gumbel is not None:
            new_key = torch.full((len(rep),), NEG_INF, dtype=torch.float64, device=dev)
            new_key[firsts] = upload([x[4] if len(x) > 4 else 0.0 for x in new], dev, torch.float64)
            self.key = torch.cat([self.key, new_key])
        self.state = torch.cat([self.state, new_state])
        self.score = torch.cat([self.score, new_score])
        self.length = torch.cat([self.length, torch.zeros(len(rep), dtype=torch.long, device=dev)])
        self.seq = torch.cat([self.seq, self.seq.new_zeros((len(rep), self.seq.shape[1]))])
        self.feats = new_feats if self.feats is None else torch.cat([self.feats, new_feats])
