"""K distinct plans per prompt, an exact sample without replacement from π_c: stochastic beam search.

The Gumbel-top-k trick: perturb every valid plan's log-probability with independent Gumbel noise,
G(plan) = log π_c(plan) + Gumbel(0); the ``k`` plans of largest G are a sample of ``k`` plans drawn
one after another without replacement from π_c (each draw from π_c renormalised over the plans
not drawn yet). Stochastic beam search (Kool, van Hoof & Welling, ICML 2019) finds those ``k``
plans without enumerating the plans: the noise is drawn top-down over the decoding tree, every
node's children conditioned so that their largest G is the node's own
(:func:`constrained_decoding.gumbel_keys.perturbed_keys`), and a beam search of width ``k`` on G keeps
every node whose subtree holds one of the ``k`` largest (G of a node is the largest G of the plans
below it, so a node that ``k`` others outrank holds none of them).

The decoding tree of a plan is the sequence of its rows: the root row, then (branching grammars)
its branch rows one after another, in :meth:`Grammar.branch_starts` order. A branch row is
conditionally independent of the other branch rows given the root row, so its own probability does
not depend on the order; only the search visits them in turn. Level by level, per prompt:
the root row is searched with width ``k`` (:class:`~constrained_decoding.beam.BeamSearch`, its first
beam at G ~ Gumbel(0)); every kept node that still has rows to decode starts a group for its next
row, continuing its log-probability and its G, of width ``k − r`` for the node ranked r-th by G
(the r nodes above it each hold a plan of larger G, so at most ``k − r`` of the ``k`` are below
it); when every group of the level has stopped, the nodes of the level (the plans completed earlier
and the new children) are cut to the ``k`` of largest G. The search ends when the ``k`` kept nodes are whole plans.

Besides the plans: their keys G, and the threshold κ, the largest G of a plan not drawn (the
largest G of any node the search discarded): P(plan drawn | κ) = 1 − exp(−exp(log π_c(plan) − κ))
for the plans drawn (the inclusion probability of the importance-weighted estimators). κ = -inf
when nothing was discarded: every valid plan was drawn (fewer than ``k`` exist, or exactly ``k``).

Everything runs on the model's device with one ``torch.Generator`` (seeded like
:func:`~constrained_decoding.decode.sample_plans`: same seed, same prompts -> same plans).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from constrained_decoding.beam import NEG_INF, BeamGroup, BeamSearch, Hyps
from constrained_decoding.decode import DecodedPlan, _decoded, _decoding
from constrained_decoding.device_policy import DEFAULT_POLICY, DevicePolicy
from constrained_decoding.encoder_memo import EncoderMemo
from constrained_decoding.head import HeadMode
from constrained_decoding.protocol import Grammar

__all__ = ["DistinctPlans", "sample_distinct_plans"]


@dataclass(frozen=True)
class DistinctPlans:
    """One prompt's draw: ``plans`` (distinct, largest key first) with their keys G, and κ."""

    plans: list[DecodedPlan]
    keys: list[float]
    threshold: float  # κ: the largest G of a plan not drawn; -inf: every valid plan was drawn

    @property
    def complete(self) -> bool:
        """Every valid plan of the prompt was drawn (so Σ π_c over ``plans`` is 1)."""
        return self.threshold == NEG_INF

    def inclusion_logprobs(self) -> list[float]:
        """log P(plan drawn | κ) = log(1 − exp(−exp(log π_c − κ))) per plan (0 when complete)."""
        if self.complete:
            return [0.0] * len(self.plans)
        return [_log1mexp(-math.exp(d.logprob - self.threshold)) for d in self.plans]


def _log1mexp(x: float) -> float:
    """log(1 − exp(x)) for x <= 0."""
    return math.log(-math.expm1(x)) if x > -0.6931471805599453 else math.log1p(-math.exp(x))


@dataclass
class _Node:
    """A plan's decoded prefix: its root row, the branch rows decoded so far, the branch starts to go."""

    root: tuple[int, ...]
    branches: tuple[tuple[int, tuple[int, ...]], ...]
    todo: tuple[int, ...]
    logprob: float
    key: float


@dataclass
class _Prompt:
    """One prompt's search: the nodes kept at the last level, what the level in progress found."""

    kept: list[_Node] = field(default_factory=list)
    found: list[_Node] = field(default_factory=list)
    pending: int = 1  # groups of the level still searching
    threshold: float = NEG_INF


def sample_distinct_plans(model: nn.Module, tokenizer, prompts: Sequence[str], grammars: Sequence[Grammar],
                          k: int, temperature: float = 1.0, *, seed: int | None = 0,
                          generator: torch.Generator | None = None, head: HeadMode = "auto",
                          reuse_cache: bool = True, encoder_memo: EncoderMemo | None = None,
                          policy: DevicePolicy = DEFAULT_POLICY) -> list[DistinctPlans]:
    """``k`` distinct actions per prompt drawn without replacement from π_c at ``temperature`` (all of
    them when fewer than ``k`` are valid), with their keys and the threshold κ (module docstring).
    Same ``seed`` -> same plans; ``generator`` (on the model's device) replaces ``seed``.
    ``encoder_memo`` and ``policy``: as :func:`~constrained_decoding.decode.sample_plans`."""
    if k < 1:
        raise ValueError(f"k={k}: expected at least one plan per prompt")
    if not temperature > 0:
        raise ValueError(f"temperature={temperature}: expected a positive number")
    prompts = list(prompts)
    with _decoding(model, tokenizer, prompts, grammars, head, encoder_memo=encoder_memo,
                   policy=policy) as (grammars, runner, tables):
        if runner is None:
            return []
        if generator is None:
            generator = torch.Generator(device=runner.device)
            generator.manual_seed(0 if seed is None else seed)
        u = torch.rand(len(prompts), generator=generator, device=runner.device, dtype=torch.float64)
        root_keys = (-torch.log(-torch.log(u.clamp_min(torch.finfo(torch.float64).tiny)))).tolist()  # Gumbel(0)
        levels = _Levels(grammars, k)
        search = levels.search = BeamSearch(runner, tables, levels.spawn, reuse_cache=reuse_cache, gumbel=generator,
                                            temperature=temperature, keep_forks=True)
        search.run([(p, (g, g.root), k, 0.0, key) for p, (g, key) in enumerate(zip(grammars, root_keys))])
    out = []
    for g, st in zip(grammars, levels.state):
        plans = [_decoded(g, n.root, n.branches, n.logprob) for n in st.kept]
        out.append(DistinctPlans(plans, [n.key for n in st.kept], st.threshold))
    return out


class _Levels:
    """The level-by-level search of every prompt (module docstring): per prompt its nodes
    (:class:`_Prompt`), per beam group the prompt and node it continues (``parent``)."""

    def __init__(self, grammars: Sequence[Grammar], k: int):
        self.grammars, self.k = grammars, k
        self.state = [_Prompt() for _ in grammars]
        self.parent: list[tuple[int, _Node | None]] = [(p, None) for p in range(len(grammars))]  # per group
        self.search: BeamSearch | None = None  # (set once made: its groups' thresholds and forks are read)

    def spawn(self, finished: list[tuple[int, Hyps]]) -> list[BeamGroup]:
        """The next rows of the kept nodes of every prompt whose level has just ended."""
        search = self.search
        new: list[BeamGroup] = []
        for gi, hyps in finished:
            p, node = self.parent[gi]
            st = self.state[p]
            st.threshold = max(st.threshold, search.groups[gi].dropped)  # type: ignore[union-attr]
            for tokens, lp, key in hyps:
                st.found.append(self._child(p, node, tokens, lp, key))
            st.pending -= 1
            if not st.pending:
                new += self._next_level(p, st)
        alive = {(p, n.root[:-1]) for p, st in enumerate(self.state) for n in st.kept if n.todo}
        search.forks = [f for f in search.forks if (f[1], tuple(f[2])) in alive]  # type: ignore[union-attr]
        return new  # (above: the forks of roots no kept node continues are dropped)

    def _child(self, p: int, node: _Node | None, tokens: tuple[int, ...], lp: float, key: float) -> _Node:
        """The node a finished row makes: a root row (its branch rows to go), or ``node``'s next row."""
        if node is None:
            g = self.grammars[p]
            return _Node(tokens, (), tuple(g.branch_starts(tokens)) if g.branching else (), lp, key)
        return _Node(node.root, (*node.branches, (node.todo[0], tokens)), node.todo[1:], lp, key)

    def _next_level(self, p: int, st: _Prompt) -> list[BeamGroup]:
        """Prompt ``p``'s level has ended: its nodes cut to the ``k`` of largest G; a group per kept node
        with rows to go. A node ranked r-th (r kept nodes of larger G, each with a plan of its own G
        below it) holds at most k - r of the k plans: its next row's search needs no wider beam."""
        k, g = self.k, self.grammars[p]
        ranked = sorted([n for n in st.kept if not n.todo] + st.found, key=lambda n: -n.key)
        st.kept, st.found = ranked[:k], []
        if len(ranked) > k:
            st.threshold = max(st.threshold, ranked[k].key)
        going = [(k - r, n) for r, n in enumerate(st.kept) if n.todo]
        st.pending = len(going)
        new: list[BeamGroup] = []
        for width, n in going:
            new.append((p, (g, n.todo[0]), width, n.logprob, n.key))
            self.parent.append((p, n))
        return new
