"""Teacher-forced log-probabilities of given plans under the constrained policy π_c.

This is the quantity the RL loss needs: log π_c(plan) = Σ over the plan's rows and tokens of
z_a/τ − logsumexp_{a' ∈ A(s)} z_{a'}/τ, with the same grammar states A(s) the decoder used
(they are a deterministic function of the prefix). Batched (all rows of all plans in one forward
pass) and differentiable; the model's train/eval mode is left to the caller (eval mode, or no
dropout, reproduces the decoder's numbers).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from constrained_decoding.decode import grammars_for
from constrained_decoding.grammar import stack_tables
from constrained_decoding.runner import PlannerRunner
from envs.openagi.plans import Plan, PlanLimits
from envs.openagi.registry import ToolRegistry


def score_plans(model: nn.Module, tokenizer, prompts: Sequence[str], signatures: Sequence[object],
                plans: Sequence[Plan | str], temperature: float = 1.0, *, registry: ToolRegistry | None = None,
                limits: PlanLimits | None = None, through_forward: bool = False) -> torch.Tensor:
    """``[len(plans)]`` tensor of log π_c(plans[j] | prompts[j]) at ``temperature`` (with gradients).

    ``plans`` are Plan objects or canonical texts; a plan that is not valid for its signature
    raises :class:`envs.openagi.plans.PlanError` (it has probability 0 under π_c).
    ``through_forward``: compute the logits with one call of ``model``'s own ``forward`` (full
    vocabulary) instead of its sub-modules — what an FSDP-sharded model needs for its hooks."""
    prompts, plans = list(prompts), list(plans)
    if not (len(prompts) == len(plans) == len(signatures)):
        raise ValueError(f"got {len(prompts)} prompts, {len(signatures)} signatures and {len(plans)} plans; "
                         "expected one of each per plan")
    if not temperature > 0:
        raise ValueError(f"temperature={temperature}: expected a positive number")
    if not plans:
        return torch.zeros(0)
    grammars = grammars_for(tokenizer, signatures, registry, limits)
    uniq = list(dict.fromkeys(prompts))
    where = {p: i for i, p in enumerate(uniq)}
    runner = PlannerRunner(model, tokenizer, uniq, pad_id=grammars[0].pad_id, through_forward=through_forward)
    tables = stack_tables(tuple(dict.fromkeys(grammars)), runner.device)
    rows, row_prompt, row_plan, row_states, row_slots = [], [], [], [], []
    for j, (g, plan) in enumerate(zip(grammars, plans)):
        for start, tokens in g.rows_for(plan):
            states, slots = g.dfa.walk(start, tokens)
            off = tables.offset[g]
            rows.append(tokens)
            row_prompt.append(where[prompts[j]])
            row_plan.append(j)
            row_states.append([s + off for s in states])
            row_slots.append(slots)
    width = max(len(r) for r in rows)
    sink = int(torch.nonzero(tables.final)[0])  # a sink has one valid slot: padding scores exactly 0
    state = torch.full((len(rows), width), sink, dtype=torch.long)
    slot = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for r, (st, sl) in enumerate(zip(row_states, row_slots)):
        state[r, : len(st)] = torch.as_tensor(st)
        slot[r, : len(sl)] = torch.as_tensor(sl)
        mask[r, : len(st)] = True
    dev = runner.device
    state, slot, mask = state.to(dev), slot.to(dev), mask.to(dev)
    feats = runner.teacher_force(torch.as_tensor(row_prompt), rows)
    z = runner.allowed_logits(feats, tables, state) / temperature
    z = z.masked_fill(~tables.valid[state], float("-inf"))
    lp = z.log_softmax(-1).gather(-1, slot.unsqueeze(-1)).squeeze(-1)
    row_lp = torch.where(mask, lp, torch.zeros_like(lp)).sum(-1)
    out = torch.zeros(len(plans), dtype=row_lp.dtype, device=dev)
    return out.index_add(0, torch.as_tensor(row_plan, device=dev), row_lp)
