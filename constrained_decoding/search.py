"""Batched constrained sampling and beam search over rows, driven by grammar state tables.

A row starts at a grammar state; its forced prefix (the tokens that are the only choice, such as
the context part of a branch row) is prefilled in one forward pass. Then at every step, for all
rows at once: gather the allowed token ids of each row's state, score them
(:meth:`PlannerRunner.allowed_logits`), log-softmax over the allowed slots only (the constrained,
renormalised distribution, at the sampling temperature), choose slots, look up next states. A
finished row sits in its grammar's sink and emits pad with log-probability 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from constrained_decoding.grammar import PlanGrammar, StateTables
from constrained_decoding.runner import PlannerRunner

RowStart = tuple[PlanGrammar, int]  # a grammar and one of its (local) start states


def _slot_logprobs(runner: PlannerRunner, tables: StateTables, feats: torch.Tensor, state: torch.Tensor,
                   temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    idx = tables.allowed[state]
    z = runner.allowed_logits(feats, tables, state)
    if temperature != 1.0:
        z = z / temperature
    z = z.masked_fill(~tables.valid[state], float("-inf"))
    return z.log_softmax(-1), idx


def _open(runner: PlannerRunner, tables: StateTables, prompt_idx: Sequence[int], starts: Sequence[RowStart]):
    """Prefill the rows (identical rows once, then copied) and return prefixes, states, features."""
    keys = [(p, tables.offset[g] + s) for p, (g, s) in zip(prompt_idx, starts)]
    first: dict[tuple[int, int], int] = {}
    uniq_prompt, uniq_pre, uniq_state = [], [], []
    for k, (g, s) in zip(keys, starts):
        if k in first:
            continue
        first[k] = len(first)
        pre, end = g.dfa.forced_prefix(s)
        uniq_prompt.append(k[0])
        uniq_pre.append(pre)
        uniq_state.append(end + tables.offset[g])
    feats = runner.start(torch.as_tensor(uniq_prompt, dtype=torch.long), uniq_pre)
    dev = tables.allowed.device
    state = torch.as_tensor(uniq_state, dtype=torch.long, device=dev)
    if len(first) < len(keys):
        expand = torch.as_tensor([first[k] for k in keys], dtype=torch.long, device=dev)
        runner.select(expand)
        feats, state = feats.index_select(0, expand.to(feats.device)), state.index_select(0, expand)
    prefixes = [uniq_pre[first[k]] for k in keys]
    return prefixes, state, feats


def sample_rows(runner: PlannerRunner, tables: StateTables, prompt_idx: Sequence[int], starts: Sequence[RowStart],
                temperature: float, generator: torch.Generator) -> tuple[list[tuple[int, ...]], list[float]]:
    """One sample per row from the constrained distribution: token ids and log-probabilities.

    Finished rows leave the batch once they are a quarter of it (rows differ in length)."""
    prefixes, state, feats = _open(runner, tables, prompt_idx, starts)
    dev = state.device
    logp = torch.zeros(len(starts), device=dev)
    alive = torch.arange(len(starts), device=dev)  # the row each batch position holds
    steps: list[tuple[torch.Tensor, torch.Tensor]] = []
    while True:
        lp, idx = _slot_logprobs(runner, tables, feats, state, temperature)
        slot = torch.multinomial(lp.exp(), 1, generator=generator)
        tok = idx.gather(1, slot).squeeze(1)
        logp.index_add_(0, alive, lp.gather(1, slot).squeeze(1))
        active = ~tables.final[state]
        steps.append((alive[active], tok[active]))
        state = tables.next_state[state, slot.squeeze(1)]
        done = tables.final[state]
        n_done = int(done.sum())
        if n_done == len(done):
            break
        if 4 * n_done >= len(done):
            keep = torch.nonzero(~done).squeeze(1)
            runner.select(keep)
            state, tok, alive = state[keep], tok[keep], alive[keep]
        feats = runner.step(tok)
    rows = [list(p) for p in prefixes]
    for who, toks in steps:
        for r, t in zip(who.tolist(), toks.tolist()):
            rows[r].append(t)
    return [tuple(r) for r in rows], logp.tolist()


def beam_rows(runner: PlannerRunner, tables: StateTables, prompt_idx: Sequence[int], starts: Sequence[RowStart],
              width: int) -> list[list[tuple[tuple[int, ...], float]]]:
    """Beam search of ``width`` per group (one group per start): finished rows, best first.

    Scores are constrained log-probabilities (temperature 1). Finished hypotheses keep their
    score and their slot; fewer than ``width`` are returned when the grammar has fewer rows. A
    group leaves the batch when all its beams have finished."""
    groups = len(starts)
    rep = [i for i in range(groups) for _ in range(width)]
    prefixes, state, feats = _open(runner, tables, [prompt_idx[i] for i in rep], [starts[i] for i in rep])
    dev = state.device
    score = torch.full((groups, width), float("-inf"), device=dev)
    score[:, 0] = 0.0
    score = score.view(-1)
    seq = torch.zeros((groups * width, 0), dtype=torch.long, device=dev)
    length = torch.zeros(groups * width, dtype=torch.long, device=dev)
    gid = torch.arange(groups, device=dev)  # the group each block of ``width`` rows belongs to
    out: list[list[tuple[tuple[int, ...], float]]] = [[] for _ in range(groups)]
    while True:
        n = len(gid)
        lp, idx = _slot_logprobs(runner, tables, feats, state, 1.0)
        d = lp.shape[1]
        val, pos = (score.unsqueeze(1) + lp).view(n, width * d).topk(width, dim=1)
        src = ((torch.arange(n, device=dev) * width).unsqueeze(1) + torch.div(pos, d, rounding_mode="floor")).view(-1)
        slot = (pos % d).view(-1)
        tok = idx[src, slot]
        length = length[src] + (~tables.final[state[src]]).long()
        state = tables.next_state[state[src], slot]
        score = val.view(-1)
        seq = torch.cat([seq[src], tok.unsqueeze(1)], 1)
        done = tables.final[state].view(n, width).all(1)
        if bool(done.any()):
            for g in torch.nonzero(done).squeeze(1).tolist():
                rows = slice(g * width, (g + 1) * width)
                pre = tuple(prefixes[int(gid[g]) * width])
                hyps = zip(seq[rows].tolist(), length[rows].tolist(), score[rows].tolist())
                out[int(gid[g])] = [(pre + tuple(q[:k]), sc) for q, k, sc in hyps if sc != float("-inf")]
            if bool(done.all()):
                return out
            keep = (torch.nonzero(~done) * width + torch.arange(width, device=dev)).view(-1)
            gid = gid[~done]
            src, tok, state, score, seq, length = src[keep], tok[keep], state[keep], score[keep], seq[keep], length[keep]
            runner.select(src)
        else:
            runner.select(src, same_prompt=True)
        feats = runner.step(tok)
