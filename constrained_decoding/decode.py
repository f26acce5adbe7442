"""Constrained sampling (for RL), beam search and greedy decoding (for evaluation) of actions.

Every function takes task descriptions (``prompts``, formatted by
:func:`constrained_decoding.prompts.format_prompt`) and one grammar per prompt
(:class:`constrained_decoding.protocol.Grammar`, from the env: ``env.grammar(tokenizer, task)``);
there is no default grammar. Decoding runs in ``inference_mode`` with the model temporarily in
eval mode (no dropout), so the reported log-probabilities are exactly what
:func:`constrained_decoding.logprobs.plan_logprobs` recomputes on the same model in eval mode.

Switches (keyword arguments, no globals): ``head`` picks the output-layer path
(:mod:`constrained_decoding.head`); ``reuse_cache=False`` prefills every branch row whole instead
of starting it from its finished root row's cache; ``share_prompt=False`` (sampling) reads the
prompt in every row; ``policy`` (:class:`~constrained_decoding.device_policy.DevicePolicy`) says
where the running rows live and how they move (re-stacked or in slots, a beam search select mapped
on the host or gathered on the device), by default as suits the model's device.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from constrained_decoding.beam import BeamGroup, BeamSearch, Hyps
from constrained_decoding.device_policy import DEFAULT_POLICY, DevicePolicy
from constrained_decoding.encoder_memo import EncoderMemo
from constrained_decoding.head import HeadMode
from constrained_decoding.protocol import Grammar, Row
from constrained_decoding.row_draws import RowDraws
from constrained_decoding.runner import PlannerRunner
from constrained_decoding.search import RowStart, sample_rows
from constrained_decoding.tables import stack_tables


@dataclass(frozen=True)
class DecodedPlan:
    """A decoded action (a plan): the action, its rows and its constrained log-probability.

    ``rows`` holds one token-id tuple per decoder row and ``starts`` the grammar state each row
    started from: the root row, then the branch rows it forked (OpenAGI: the plan of a linear
    task; the head then one row per branch of a nonlinear one). ``logprob`` is log π_c(action)
    at the decoding temperature (1 for beam search and greedy). The rows are what
    :func:`plan_logprobs` teacher-forces: pass the DecodedPlan itself and they are not rebuilt."""

    plan: Any
    rows: tuple[tuple[int, ...], ...]
    logprob: float
    starts: tuple[int, ...]
    grammar: Grammar

    @functools.cached_property
    def text(self) -> str:
        """The action's canonical text (formatted on first use)."""
        return self.grammar.format(self.plan)

    def row_pairs(self) -> list[Row]:
        """``(start state, token ids)`` per row, as :meth:`Grammar.rows_for` gives them."""
        return list(zip(self.starts, self.rows))


def forced_plan(grammar: Grammar) -> DecodedPlan | None:
    """The one action ``grammar`` allows when its root row is forced token by token to the end
    and forks no branch rows (a choice among one option), decoded without the model: its rows,
    log π_c = 0 exactly (each token is its state's only slot: what sampling, beam search and the
    scorer give it at any temperature); None when the grammar leaves any choice."""
    tokens, end = grammar.dfa.forced_prefix(grammar.root)
    if end != grammar.dfa.final or (grammar.branching and grammar.branch_starts(tokens)):
        return None
    return _decoded(grammar, tuple(tokens), (), 0.0)


def check_grammars(grammars: Sequence[object], n_prompts: int) -> list[Grammar]:
    """The caller's grammars, one per prompt (no default: the env supplies them)."""
    grammars = list(grammars)
    for g in grammars:
        if not isinstance(g, Grammar):
            raise TypeError(f"expected one Grammar per prompt (the env's, e.g. env.grammar(tokenizer, task)), "
                            f"got {type(g).__name__}: {g!r}")
    if len(grammars) != n_prompts:
        raise ValueError(f"got {n_prompts} prompts but {len(grammars)} grammars; expected one per prompt")
    return grammars


@contextlib.contextmanager
def decoding_mode(model: nn.Module) -> Iterator[None]:
    """No autograd and no dropout while decoding; the model's train/eval mode is restored after.

    A model already in eval mode (planners are built in it and stay there) is left alone: no
    ``eval()`` / ``train()`` walks over its module tree per call (hundreds of modules with LoRA).
    Only the root's flag is read: put a model in eval mode with ``model.eval()``, not module by module."""
    was_training = model.training
    if was_training:
        model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        if was_training:
            model.train(True)


@contextlib.contextmanager
def _decoding(model: nn.Module, tokenizer, prompts: Sequence[str], grammars: Sequence[object],
              head: HeadMode, share_prompt: bool = True, encoder_memo: EncoderMemo | None = None,
              policy: DevicePolicy = DEFAULT_POLICY) -> Iterator[tuple[list[Grammar], PlannerRunner | None, Any]]:
    """:func:`decoding_mode` with the checked grammars, the prompts' runner and their stacked
    state tables (runner and tables ``None`` when there are no prompts)."""
    prompts = list(prompts)
    with decoding_mode(model):
        grammars = check_grammars(grammars, len(prompts))
        if not prompts:
            yield grammars, None, None
            return
        runner = PlannerRunner(model, tokenizer, prompts, pad_id=grammars[0].pad_id, head=head,
                               share_prompt=share_prompt, encoder_memo=encoder_memo, policy=policy)
        yield grammars, runner, stack_tables(tuple(dict.fromkeys(grammars)), runner.device)


def sample_plans(model: nn.Module, tokenizer, prompts: Sequence[str], grammars: Sequence[Grammar], k: int = 1,
                 temperature: float = 1.0, *, seed: int | None = 0, generator: torch.Generator | None = None,
                 head: HeadMode = "auto", reuse_cache: bool = True,
                 share_prompt: bool = True, sample_seeds: Sequence[int] | None = None,
                 encoder_memo: EncoderMemo | None = None,
                 policy: DevicePolicy = DEFAULT_POLICY) -> list[list[DecodedPlan]]:
    """``k`` actions per prompt drawn from the constrained policy π_c at ``temperature``.

    Branching grammars: a sample's branch rows (decoded in parallel) join the batch of running
    rows as soon as its root row has finished. Same ``seed`` -> same actions.
    ``sample_seeds`` (one integer >= 0 per sample, prompt-major: ``len(prompts) * k``): each sample
    draws from its own streams instead (:class:`~constrained_decoding.row_draws.RowDraws`: row i of
    sample j from ``(sample_seeds[j], i)``; ``seed`` and ``generator`` are unused), so a sample does
    not depend on the other prompts decoded with it: same seed -> same action, alone or in a batch.
    ``share_prompt``: the ``k`` samples of a prompt (and equal prompts) read it once and copy its
    cache; ``False``: every sample reads its prompt itself (the reference the tests compare with).
    ``encoder_memo`` (encoder-decoder models): the prompts' encoder states come from it (read once
    per memo with gradients, for a scorer to reuse: :class:`~constrained_decoding.encoder_memo.EncoderMemo`).
    ``policy``: where the running rows live and how they move
    (:class:`~constrained_decoding.device_policy.DevicePolicy`; the same plans on every path)."""
    if k < 1:
        raise ValueError(f"k={k}: expected at least one sample per prompt")
    if not temperature > 0:
        raise ValueError(f"temperature={temperature}: expected a positive number (use greedy_plans for argmax)")
    prompts = list(prompts)
    grammars = check_grammars(grammars, len(prompts))
    owner = [p for p in range(len(prompts)) for _ in range(k)]  # the prompt of each sample
    branches = _Branches(grammars, owner, share_prompt, _own_streams(sample_seeds, len(prompts), k))
    # the runner's prompt of each sample: its own copy when not sharing
    runner_prompts = prompts if share_prompt else [prompts[p] for p in owner]
    with _decoding(model, tokenizer, runner_prompts, [grammars[p] for p in owner] if not share_prompt else grammars,
                   head, share_prompt, encoder_memo, policy) as (_, runner, tables):
        if runner is None:
            return []
        if generator is None and branches.seeds is None:
            generator = torch.Generator(device=runner.device)
            generator.manual_seed(0 if seed is None else seed)
        rows, lps = sample_rows(runner, tables, branches.reads, [(grammars[p], grammars[p].root) for p in owner],
                                temperature, generator, branches.spawn, reuse_cache=reuse_cache, draws=branches.draws)
    out: list[list[DecodedPlan]] = [[] for _ in grammars]
    for p, (root, rest, lp) in zip(owner, branches.plans(rows, lps)):
        out[p].append(_decoded(grammars[p], root, rest, lp))
    return out


def _own_streams(sample_seeds: Sequence[int] | None, n_prompts: int, k: int) -> list[int] | None:
    """``sample_seeds`` checked: one integer per sample (prompt-major), or None."""
    if sample_seeds is None:
        return None
    seeds = [int(x) for x in sample_seeds]
    if len(seeds) != n_prompts * k:
        raise ValueError(f"got {len(seeds)} sample_seeds for {n_prompts} prompts x k={k}: expected one per sample")
    return seeds


class _Branches:
    """:func:`sample_plans`' samples: which prompt each reads, the branch rows their root rows spawn
    (numbered after the roots, in spawn order) and, with per-sample seeds, every row's stream
    (row ``i`` of sample ``j``: ``(seeds[j], i)``)."""

    def __init__(self, grammars: list[Grammar], owner: list[int], share_prompt: bool, seeds: list[int] | None):
        self.grammars, self.owner, self.seeds = grammars, owner, seeds
        self.reads = owner if share_prompt else list(range(len(owner)))  # the runner's prompt of each sample
        self.draws = None if seeds is None else RowDraws([(x, 0) for x in seeds])
        self.n_branches = [0] * len(owner)
        self.where: list[tuple[int, int]] = []  # (sample, start state) of each branch row

    def spawn(self, finished: list[tuple[int, tuple[int, ...]]]) -> list[tuple[int, RowStart]]:
        """The branch rows of the samples whose root row has just finished."""
        new = []
        for j, tokens in finished:
            if j >= len(self.owner):
                continue
            g = self.grammars[self.owner[j]]
            for s in g.branch_starts(tokens) if g.branching else ():
                new.append((self.reads[j], (g, s)))
                self.where.append((j, s))
                if self.draws is not None:
                    self.n_branches[j] += 1
                    self.draws.add((self.seeds[j], self.n_branches[j]))  # type: ignore[index]
        return new

    def plans(self, rows: list[tuple[int, ...]], lps: list[float]) -> list[tuple[tuple[int, ...], list, float]]:
        """Per sample: its root row, its ``(start, tokens)`` branch rows, its log-probability (their sum)."""
        n = len(self.owner)
        roots, logp = rows[:n], lps[:n]
        branches: list[list[tuple[int, tuple[int, ...]]]] = [[] for _ in self.owner]
        for (j, s), row, lp in zip(self.where, rows[n:], lps[n:]):
            branches[j].append((s, row))
            logp[j] += lp
        return list(zip(roots, branches, logp))


def _decoded(g: Grammar, root: tuple[int, ...], branches: Sequence[tuple[int, tuple[int, ...]]],
             logprob: float) -> DecodedPlan:
    action = g.assemble(root, [t for _, t in branches])
    return DecodedPlan(action, (root, *(t for _, t in branches)), logprob, (g.root, *(s for s, _ in branches)), g)


def beam_search_plans(model: nn.Module, tokenizer, prompts: Sequence[str], grammars: Sequence[Grammar],
                      num_beams: int = 16, num_return: int | None = None, *, branch_beams: int = 2,
                      head: HeadMode = "auto", reuse_cache: bool = True, greedy: bool = False,
                      policy: DevicePolicy = DEFAULT_POLICY) -> list[list[DecodedPlan]]:
    """Up to ``num_return`` distinct actions per prompt, best constrained log-probability first.

    Root rows: beam search of width ``num_beams`` (:class:`constrained_decoding.beam.BeamSearch`).
    Branching grammars (semi-autoregressive): the best ``max(1, num_beams // (branches *
    branch_beams))`` root rows each get a beam of ``branch_beams`` per branch row, which joins the
    batch of running beams as soon as the prompt's root search has finished; an action's score is
    its root row's plus its branch rows' log-probabilities and the best combinations are returned.
    ``greedy`` (all widths 1): the strict argmax path (:func:`greedy_plans`)."""
    if num_beams < 1 or branch_beams < 1:
        raise ValueError(f"num_beams={num_beams}, branch_beams={branch_beams}: expected positive widths")
    if greedy and (num_beams, branch_beams) != (1, 1):
        raise ValueError(f"greedy=True needs num_beams=1 and branch_beams=1, got {num_beams}, {branch_beams}")
    num_return = num_beams if num_return is None else num_return
    if not 1 <= num_return:
        raise ValueError(f"num_return={num_return}: expected at least 1")
    with _decoding(model, tokenizer, prompts, grammars, head, policy=policy) as (grammars, runner, tables):
        if runner is None:
            return []
        group_of: list[tuple[int, int, int]] = []  # the (prompt, root rank, start state) of each branch group

        def spawn(finished: list[tuple[int, Hyps]]) -> list[BeamGroup]:
            """Branch groups of the best root rows of the prompts whose root search has just finished."""
            new = []
            for p, hyps in finished:
                g = grammars[p] if p < len(grammars) else None
                if g is None or not g.branching or not hyps:
                    continue
                starts = [g.branch_starts(tokens) for tokens, *_ in hyps]
                keep = max(1, num_beams // (max(1, len(starts[0])) * branch_beams))
                for rank, ss in enumerate(starts[:keep]):
                    for s in ss:
                        new.append((p, (g, s), branch_beams))
                        group_of.append((p, rank, s))
            return new

        search = BeamSearch(runner, tables, spawn, reuse_cache=reuse_cache, greedy=greedy)
        found = search.run([(p, (g, g.root), num_beams) for p, g in enumerate(grammars)])
        roots, found = found[: len(grammars)], found[len(grammars) :]
    per_root: dict[tuple[int, int], list[tuple[int, Hyps]]] = {}
    for (p, rank, s), hyps in zip(group_of, found):
        per_root.setdefault((p, rank), []).append((s, hyps))
    out: list[list[DecodedPlan]] = []
    for p, g in enumerate(grammars):
        cands: list[DecodedPlan] = []
        for rank, (root_tokens, root_score, _) in enumerate(roots[p]):
            lists = per_root.get((p, rank), [])
            if g.branching and not lists and g.branch_starts(root_tokens):
                break  # root rows beyond the best ``keep`` got no branch search
            for score, combo in _best_combinations(lists, num_return):
                cands.append(_decoded(g, root_tokens, list(combo), root_score + score))
        cands.sort(key=lambda d: -d.logprob)
        out.append(cands[:num_return])
    return out


def _best_combinations(lists: Sequence[tuple[int, Hyps]], n: int) -> list[tuple[float, tuple]]:
    """The ``n`` best choices of one hypothesis per branch row (rows are independent given the
    root, so a combination scores the sum of its rows'), best first. Merged list by list keeping
    the ``n`` best partial sums -- exact, since a top-``n`` combination's every partial choice is a
    top-``n`` partial combination -- instead of the product over every list, which grows as
    ``branch_beams ** rows`` (a 7-day itinerary has ~40 branch rows)."""
    best: list[tuple[float, tuple]] = [(0.0, ())]
    for s, hyps in lists:
        merged = [(score + sc, combo + ((s, t),)) for score, combo in best for t, sc, _ in hyps]
        merged.sort(key=lambda x: -x[0])  # stable: ties keep the product's order
        best = merged[:n]
    return best


def greedy_plans(model: nn.Module, tokenizer, prompts: Sequence[str], grammars: Sequence[Grammar], *,
                 head: HeadMode = "auto", reuse_cache: bool = True,
                 policy: DevicePolicy = DEFAULT_POLICY) -> list[DecodedPlan]:
    """One action per prompt, the strict argmax path of every row (as HF's greedy search): each row
    takes the most likely allowed token, and ends when ending it is the most likely choice."""
    res = beam_search_plans(model, tokenizer, prompts, grammars, num_beams=1, num_return=1, branch_beams=1,
                            head=head, reuse_cache=reuse_cache, greedy=True, policy=policy)
    return [r[0] for r in res]
