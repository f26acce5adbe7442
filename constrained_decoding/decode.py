"""Constrained sampling (for RL), beam search and greedy decoding (for evaluation) of plans.

Every function takes task descriptions (``prompts``, formatted by
:func:`constrained_decoding.prompts.format_prompt`) and one task signature per prompt
(``(inputs, target)``, a Task, or a prebuilt :class:`PlanGrammar`). Decoding runs in
``inference_mode`` with the model temporarily in eval mode (no dropout), so the reported
log-probabilities are exactly what :func:`constrained_decoding.score.score_plans` recomputes
on the same model in eval mode.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from constrained_decoding.grammar import PlanGrammar, as_signature, plan_grammar, stack_tables
from constrained_decoding.runner import PlannerRunner
from constrained_decoding.search import BeamGroup, Hyps, RowStart, beam_rows, sample_rows
from envs.openagi.plans import Plan, PlanLimits, format_plan
from envs.openagi.registry import ToolRegistry


@dataclass(frozen=True)
class DecodedPlan:
    """A decoded plan: its canonical text, its rows' token ids and its constrained log-probability.

    ``rows`` holds one token-id tuple per decoder row: the plan for a linear task; the head
    (join and tail) then one row per branch for a nonlinear task. ``logprob`` is log π_c(plan)
    at the decoding temperature (1 for beam search and greedy)."""

    plan: Plan
    text: str
    rows: tuple[tuple[int, ...], ...]
    logprob: float


def grammars_for(tokenizer, signatures: Sequence[object], registry: ToolRegistry | None = None,
                 limits: PlanLimits | None = None) -> list[PlanGrammar]:
    """One cached grammar per signature (default registry: OpenAGI's 15 tool signatures)."""
    if registry is None:
        registry = _default_registry()
    out = []
    for s in signatures:
        out.append(s if isinstance(s, PlanGrammar) else plan_grammar(tokenizer, registry, *as_signature(s), limits))
    return out


@functools.lru_cache(maxsize=1)
def _default_registry() -> ToolRegistry:
    from envs.openagi.tools import signature_registry

    return signature_registry()


@contextlib.contextmanager
def decoding_mode(model: nn.Module) -> Iterator[None]:
    """No autograd and no dropout while decoding; the model's train/eval mode is restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def _setup(model, tokenizer, prompts, signatures, registry, limits):
    prompts = list(prompts)
    grammars = grammars_for(tokenizer, signatures, registry, limits)
    if len(grammars) != len(prompts):
        raise ValueError(f"got {len(prompts)} prompts but {len(grammars)} signatures; expected one per prompt")
    if not prompts:
        return None
    pad = grammars[0].pad_id
    runner = PlannerRunner(model, tokenizer, prompts, pad_id=pad)
    tables = stack_tables(tuple(dict.fromkeys(grammars)), runner.device)
    return grammars, runner, tables


def sample_plans(model: nn.Module, tokenizer, prompts: Sequence[str], signatures: Sequence[object], k: int = 1,
                 temperature: float = 1.0, *, registry: ToolRegistry | None = None,
                 limits: PlanLimits | None = None, seed: int | None = 0,
                 generator: torch.Generator | None = None) -> list[list[DecodedPlan]]:
    """``k`` plans per prompt drawn from the constrained policy π_c at ``temperature``.

    Nonlinear tasks: a sample's branch rows (decoded in parallel) join the batch of running rows
    as soon as its head row has finished. Same ``seed`` -> same plans."""
    if k < 1:
        raise ValueError(f"k={k}: expected at least one sample per prompt")
    if not temperature > 0:
        raise ValueError(f"temperature={temperature}: expected a positive number (use greedy_plans for argmax)")
    with decoding_mode(model):
        setup = _setup(model, tokenizer, prompts, signatures, registry, limits)
        if setup is None:
            return []
        grammars, runner, tables = setup
        if generator is None:
            generator = torch.Generator(device=runner.device)
            generator.manual_seed(0 if seed is None else seed)
        owner = [p for p in range(len(grammars)) for _ in range(k)]
        where: list[int] = []  # the sample each branch row (numbered after the head rows) belongs to

        def spawn(finished: list[tuple[int, tuple[int, ...]]]) -> list[tuple[int, RowStart]]:
            """The branch rows of the nonlinear samples whose head row has just finished."""
            new = []
            for j, tokens in finished:
                g = grammars[owner[j]] if j < len(owner) else None
                if g is None or g.is_linear:
                    continue
                h = g.meaning(g.root, tokens)
                for i in range(g.num_branches):
                    new.append((owner[j], (g, g.branch_start[h][i])))
                    where.append(j)
            return new

        rows, lps = sample_rows(runner, tables, owner, [(grammars[p], grammars[p].root) for p in owner],
                                temperature, generator, spawn)
        roots, logp = rows[: len(owner)], lps[: len(owner)]
        branches: list[list[tuple[int, ...]]] = [[] for _ in owner]
        for j, row, lp in zip(where, rows[len(owner) :], lps[len(owner) :]):
            branches[j].append(row)
            logp[j] += lp
    out: list[list[DecodedPlan]] = [[] for _ in grammars]
    for j, p in enumerate(owner):
        plan = grammars[p].assemble(roots[j], branches[j])
        out[p].append(DecodedPlan(plan, format_plan(plan), (roots[j], *branches[j]), logp[j]))
    return out


def beam_search_plans(model: nn.Module, tokenizer, prompts: Sequence[str], signatures: Sequence[object],
                      num_beams: int = 16, num_return: int | None = None, *, branch_beams: int = 2,
                      registry: ToolRegistry | None = None,
                      limits: PlanLimits | None = None) -> list[list[DecodedPlan]]:
    """Up to ``num_return`` distinct plans per prompt, best constrained log-probability first.

    Linear tasks: beam search of width ``num_beams``. Nonlinear tasks (semi-autoregressive): beam
    search of the head rows (width ``num_beams``); the best ``max(1, num_beams // (branches *
    branch_beams))`` heads each get a beam of ``branch_beams`` per branch, which joins the batch of
    running beams as soon as the prompt's head search has finished; a plan's score is its head's
    plus its branches' log-probabilities and the best combinations are returned."""
    if num_beams < 1 or branch_beams < 1:
        raise ValueError(f"num_beams={num_beams}, branch_beams={branch_beams}: expected positive widths")
    num_return = num_beams if num_return is None else num_return
    if not 1 <= num_return:
        raise ValueError(f"num_return={num_return}: expected at least 1")
    with decoding_mode(model):
        setup = _setup(model, tokenizer, prompts, signatures, registry, limits)
        if setup is None:
            return []
        grammars, runner, tables = setup
        group_key: list[tuple[int, int]] = []  # the (prompt, head rank) of each branch group

        def spawn(finished: list[tuple[int, Hyps]]) -> list[BeamGroup]:
            """Branch groups of the best heads of the nonlinear prompts whose head search has just finished."""
            new = []
            for p, hyps in finished:
                g = grammars[p] if p < len(grammars) else None
                if g is None or g.is_linear:
                    continue
                keep = max(1, num_beams // (g.num_branches * branch_beams))
                for rank, (tokens, _) in enumerate(hyps[:keep]):
                    h = g.meaning(g.root, tokens)
                    for i in range(g.num_branches):
                        new.append((p, (g, g.branch_start[h][i]), branch_beams))
                        group_key.append((p, rank))
            return new

        found = beam_rows(runner, tables, [(p, (g, g.root), num_beams) for p, g in enumerate(grammars)], spawn)
        roots, found = found[: len(grammars)], found[len(grammars) :]
    per_head: dict[tuple[int, int], list[list[tuple[tuple[int, ...], float]]]] = {}
    for key, hyps in zip(group_key, found):
        per_head.setdefault(key, []).append(hyps)
    out: list[list[DecodedPlan]] = []
    for p, g in enumerate(grammars):
        cands: list[DecodedPlan] = []
        if g.is_linear:
            for tokens, score in roots[p]:
                plan = g.assemble(tokens)
                cands.append(DecodedPlan(plan, format_plan(plan), (tokens,), score))
        else:
            for rank, (head_tokens, head_score) in enumerate(roots[p]):
                lists = per_head.get((p, rank))
                if lists is None:
                    break
                for combo in itertools.product(*lists):
                    rows = tuple(t for t, _ in combo)
                    plan = g.assemble(head_tokens, rows)
                    score = head_score + sum(s for _, s in combo)
                    cands.append(DecodedPlan(plan, format_plan(plan), (head_tokens, *rows), score))
        cands.sort(key=lambda d: -d.logprob)
        out.append(cands[:num_return])
    return out


def greedy_plans(model: nn.Module, tokenizer, prompts: Sequence[str], signatures: Sequence[object], *,
                 registry: ToolRegistry | None = None, limits: PlanLimits | None = None) -> list[DecodedPlan]:
    """One plan per prompt, by width-1 beam search of every row: it follows the most likely token that
    does not end the row and returns the likeliest row that ended on the way (the greedy row, or a
    likelier one ending earlier)."""
    res = beam_search_plans(model, tokenizer, prompts, signatures, num_beams=1, num_return=1, branch_beams=1,
                            registry=registry, limits=limits)
    return [r[0] for r in res]
