"""Teacher-forced log-probabilities of given actions under the constrained policy π_c.

This is the quantity the RL loss needs: log π_c(action) = Σ over the action's rows and tokens of
z_a/τ − logsumexp_{a' ∈ A(s)} z_{a'}/τ, with the same grammar states A(s) the decoder used
(they are a deterministic function of the prefix) and the decoder's own mask
(:func:`constrained_decoding.masking.constrained_logprobs`; a non-finite score stays non-finite).
Batched (all rows of all actions in one forward pass) and differentiable; the model's train/eval
mode is left to the caller (eval mode, or no dropout, reproduces the decoder's numbers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from constrained_decoding.decode import DecodedPlan, check_grammars
from constrained_decoding.encoder_memo import EncoderMemo
from constrained_decoding.head import HeadMode
from constrained_decoding.masking import constrained_logprobs
from constrained_decoding.protocol import Grammar
from constrained_decoding.runner import PlannerRunner
from constrained_decoding.tables import stack_tables


def plan_logprobs(model: nn.Module, tokenizer, prompts: Sequence[str], grammars: Sequence[Grammar],
                plans: Sequence[Any], temperature: float = 1.0, *, through_forward: bool = False,
                head: HeadMode = "auto", share_prompt: bool = True,
                encoder_memo: EncoderMemo | None = None) -> torch.Tensor:
    """``[len(plans)]`` tensor of log π_c(plans[j] | prompts[j]) under ``grammars[j]`` at ``temperature``
    (with gradients).

    ``plans`` are actions (for OpenAGI: Plan objects or canonical texts), whose rows the grammar
    builds (:meth:`Grammar.rows_for`: an action that is not valid for its grammar raises the env's
    error, e.g. OpenAGI's ``PlanError``: it has probability 0 under π_c), or
    :class:`DecodedPlan`\\ s, whose decoded rows are scored as they are.
    ``through_forward``: compute the logits with one call of ``model``'s own ``forward`` (full
    vocabulary) instead of its sub-modules — what an FSDP-sharded model needs for its hooks.
    ``share_prompt``: each distinct prompt is read once (the encoder, or a causal model's prefix
    whose cache every row of its plans continues, with gradients) instead of once per row: the
    same numbers; ``False`` reads it in every row (the reference; ``through_forward`` always does).
    ``encoder_memo`` (encoder-decoder models, not ``through_forward``): the encoder states of the
    prompts come from it, with the graph of the pass that read them (the one decoding filled under
    the same weights: :class:`~constrained_decoding.encoder_memo.EncoderMemo`)."""
    prompts, plans = list(prompts), list(plans)
    if not (len(prompts) == len(plans) == len(grammars)):
        raise ValueError(f"got {len(prompts)} prompts, {len(grammars)} grammars and {len(plans)} plans; "
                         "expected one of each per plan")
    if not temperature > 0:
        raise ValueError(f"temperature={temperature}: expected a positive number")
    if not plans:
        return torch.zeros(0)
    grammars = check_grammars(grammars, len(prompts))
    uniq = list(dict.fromkeys(prompts))
    where = {p: i for i, p in enumerate(uniq)}
    runner = PlannerRunner(model, tokenizer, uniq, pad_id=grammars[0].pad_id, through_forward=through_forward,
                           head=head, share_prompt=share_prompt, encoder_memo=encoder_memo)
    tables = stack_tables(tuple(dict.fromkeys(grammars)), runner.device)
    rows = _DistinctRows(tables, grammars, plans, [where[p] for p in prompts])
    runner.expect_rows(rows.prompt)  # a prompt several rows read is read once, for every bucket
    runner.gather_rows(tables.vocab, rows.tokens)  # the token matrix's rows every bucket reads, read once
    row_lp = _score_rows(runner, tables, rows, temperature, through_forward)
    dev = runner.device
    out = torch.zeros(len(plans), dtype=row_lp.dtype, device=dev)
    occurrences = row_lp.index_select(0, torch.as_tensor(rows.of, device=dev))
    return out.index_add(0, torch.as_tensor(rows.plan, device=dev), occurrences)


class _DistinctRows:
    """The rows of the plans, each distinct row once. A row's log-prob depends only on (prompt, grammar
    state it starts in, tokens): rows that several plans share (the K samples of a prompt often agree
    on a slot) are scored once and counted once per plan that holds them (``of``)."""

    def __init__(self, tables, grammars: Sequence[Grammar], plans: Sequence[Any], prompt_of: Sequence[int]):
        self.tokens: list = []  # per distinct row: its tokens, prompt, stacked states and slots
        self.prompt: list[int] = []
        self.states: list[list[int]] = []
        self.slots: list = []
        self.plan: list[int] = []  # per (plan, row) occurrence: the plan and the distinct row
        self.of: list[int] = []
        seen: dict[tuple, int] = {}
        for j, (g, plan) in enumerate(zip(grammars, plans)):
            pairs = plan.row_pairs() if isinstance(plan, DecodedPlan) else g.rows_for(plan)
            for start, tokens in pairs:
                key = (prompt_of[j], tables.index(g, start), tuple(int(t) for t in tokens))
                if key not in seen:
                    seen[key] = len(self.tokens)
                    states, slots = g.dfa.walk(start, tokens)
                    self.tokens.append(tokens)
                    self.prompt.append(key[0])
                    self.states.append([tables.index(g, s) for s in states])
                    self.slots.append(slots)
                self.plan.append(j)
                self.of.append(seen[key])


def _score_rows(runner: PlannerRunner, tables, rows: _DistinctRows, temperature: float,
                through_forward: bool) -> torch.Tensor:
    """``[distinct rows]`` log-probabilities, teacher-forced in length buckets (one bucket
    ``through_forward``: a sharded model's forward is a collective, every process must make the
    same number of calls)."""
    dev = runner.device
    sink = int(torch.nonzero(tables.final)[0])  # a sink has one valid slot: padding scores exactly 0
    row_lp = torch.zeros(len(rows.tokens), device=dev)
    n = len(rows.tokens)
    buckets = [list(range(n))] if through_forward else _length_buckets([len(r) for r in rows.tokens])
    for bucket in buckets:
        idx = torch.as_tensor(bucket, device=dev)
        scored = _row_logprobs(runner, tables, sink, temperature, [rows.tokens[r] for r in bucket],
                               [rows.prompt[r] for r in bucket], [rows.states[r] for r in bucket],
                               [rows.slots[r] for r in bucket])
        row_lp = row_lp.to(scored.dtype).index_put((idx,), scored)
    return row_lp


def _length_buckets(lengths: Sequence[int], spread: float = 1.5) -> list[list[int]]:
    """Row indices grouped by length (each group's longest row at most ``spread`` times its
    shortest), so a batch is padded to its own longest row: travel itineraries mix 20-token meal
    rows with 70-token route rows, and one padded batch did ~3x the work."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    buckets: list[list[int]] = []
    for i in order:
        if not buckets or lengths[i] > spread * lengths[buckets[-1][0]]:
            buckets.append([])
        buckets[-1].append(i)
    return buckets


def _row_logprobs(runner: PlannerRunner, tables, sink: int, temperature: float, rows: list, row_prompt: list[int],
                  row_states: list[list[int]], row_slots: list[list[int]]) -> torch.Tensor:
    """``[len(rows)]`` log π_c of each row from its start state (one teacher-forced forward)."""
    width = max(len(r) for r in rows)
    state = torch.full((len(rows), width), sink, dtype=torch.long)
    slot = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for r, (st, sl) in enumerate(zip(row_states, row_slots)):
        state[r, : len(st)] = torch.as_tensor(st)
        slot[r, : len(sl)] = torch.as_tensor(sl)
        mask[r, : len(st)] = True
    tables.ensure(state)  # (lazy tables: the rows of the states teacher forcing reads)
    dev = runner.device
    state, slot, mask = state.to(dev), slot.to(dev), mask.to(dev)
    feats = runner.teacher_force(torch.as_tensor(row_prompt), rows)
    lp = constrained_logprobs(runner.allowed_logits(feats, tables, state), tables.valid[state], temperature)
    lp = lp.gather(-1, slot.unsqueeze(-1)).squeeze(-1)
    return torch.where(mask, lp, torch.zeros_like(lp)).sum(-1)
