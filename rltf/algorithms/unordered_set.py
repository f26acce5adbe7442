"""The unordered-set estimator with its built-in baseline (Kool, van Hoof & Welling, ICLR 2020).

``S`` is a set of ``k`` distinct plans drawn without replacement from π (stochastic beam search:
:func:`constrained_decoding.without_replacement.sample_distinct_plans`), p(s) = π(s) exactly (for a
grammar-constrained planner, π_c: the probabilities the plans were drawn with). The estimator of
∇E_π[f] from ``S``::

    Σ_{s∈S} ∇p(s) · R(S, s) · (f(s) − B_s),      ∇p(s) = p(s) ∇log p(s)
    R(S, s)  = P^{D∖s}(S∖s) / P^D(S)                              (leave-one-out set probabilities)
    B_s      = p(s) f(s) + Σ_{s'∈S, s'≠s} p(s') R^{D∖s}(S∖s, s') f(s')
    R^{D∖s}(S∖s, s') = P^{D∖{s,s'}}(S∖{s,s'}) / P^{D∖s}(S∖s)

P^D(S) is the probability of drawing the set S (in any order) from D; P^{D∖s} from D with s taken
out and renormalised. Without a baseline, Σ_s p(s) R(S, s) ∇log p(s) f(s) is the single-sample
REINFORCE estimator ∇log p(B₁) f(B₁) averaged over which element of S was drawn first
(P(B₁ = s | S) = p(s) R(S, s)): unbiased, and by Rao–Blackwell never of higher variance. B_s is the
unordered-set estimate of E[f] from S∖s — a without-replacement sample from D∖s once s was drawn
first — plus s's own exact share p(s) f(s): its expectation given B₁ = s is E_π[f] whatever s is, so
Σ_s ∇p(s)·E[B_s | B₁ = s] = ∇(Σ p)·E[f] = 0: the baseline adds no bias. Every weight needs only
the probabilities of the plans in S.

Set probabilities (Gumbel-top-k: S is drawn iff every G_s, s ∈ S, exceeds the largest G outside S,
which is Gumbel with location log b, b = 1 − Σ_{s∈S} p(s))::

    P^D(S) = ∫_0^1 Π_{s∈S} (1 − u^{p(s)/b}) du = ∫_0^∞ e^{−x} Π_{s∈S} (1 − e^{−a_s x}) dx,  a_s = p(s)/b

Taking plans out of D renormalises p and b alike, so every set probability above is this integral
over a subset T of S with the same a_s: I(T) (I(∅) = 1). It is computed in log space on x = e^y
(trapezoid rule on a grid wide enough for every a_s; float64), for the 1 + k + k(k−1)/2 subsets the
weights need. When S holds every valid plan (b = 0: the sampler drew all of them), every I is 1 and
the estimator is the exact gradient Σ_s ∇p(s) (f(s) − E_π[f]).
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.special import logsumexp

__all__ = ["log_set_integrals", "unordered_set_weights"]

GRID_POINTS = 4096
"""Trapezoid points of each set-probability integral (on x = e^y; the error is far below float32)."""


def _log_one_minus_exp_neg(z_log: np.ndarray) -> np.ndarray:
    """log(1 − exp(−e^{z_log})), elementwise, stable for any z_log."""
    z = np.exp(np.minimum(z_log, 700.0))
    small = z_log < -30.0
    with np.errstate(divide="ignore"):
        big = np.log(-np.expm1(-z))
    return np.where(small, z_log - z / 2, big)  # log(z − z²/2 + …) ≈ log z − z/2 for small z


def log_set_integrals(log_a: np.ndarray, subsets: np.ndarray) -> np.ndarray:
    """log I(T) for every row of ``subsets`` (``[m, k]`` bools over the ``k`` plans): I(T) =
    ∫_0^∞ e^{−x} Π_{s∈T} (1 − e^{−a_s x}) dx, ``log_a`` = log a_s (module docstring)."""
    log_a = np.asarray(log_a, dtype=np.float64)
    top = float(np.max(log_a)) if len(log_a) else 0.0
    lo, hi = -max(top, 0.0) - 40.0, 6.0  # e^{-x} ends the integrand by x = e^6; below, it falls as e^{(|T|+1) y}
    y = np.linspace(lo, hi, GRID_POINTS)
    factors = _log_one_minus_exp_neg(log_a[None, :] + y[:, None])  # [points, k]
    log_f = y - np.exp(y) + np.asarray(subsets, dtype=np.float64) @ factors.T  # [m, points]: dx = e^y dy
    weights = np.full(GRID_POINTS, np.log(y[1] - y[0]))
    weights[[0, -1]] -= np.log(2.0)
    return logsumexp(log_f + weights, axis=1)


def unordered_set_weights(logp: np.ndarray, rewards: np.ndarray, complete: bool) -> tuple[np.ndarray, np.ndarray]:
    """For one set S (``logp`` = log p(s) of its distinct plans, ``rewards`` = f(s)): per plan the
    estimator's weight p(s)·R(S, s) and its baseline B_s (module docstring), so that
    Σ_s weight_s·(f(s) − B_s)·∇log p(s) estimates ∇E[f]. ``complete``: S holds every valid plan
    (the sampler drew all of them): R = 1 and B_s = Σ_{s'} p(s') f(s') exactly."""
    logp = np.asarray(logp, dtype=np.float64)
    f = np.asarray(rewards, dtype=np.float64)
    k = len(logp)
    p = np.exp(logp)
    if k == 0:
        return np.zeros(0), np.zeros(0)
    if complete:
        return p.copy(), np.full(k, float(np.dot(p, f)))
    total = logsumexp(logp)
    log_b = np.log(-np.expm1(min(total, -1e-300)))  # log(1 − Σ p), kept finite when Σ p rounds to 1
    log_a = logp - max(log_b, -700.0)
    pairs = list(itertools.combinations(range(k), 2))
    subsets = np.ones((1 + k + len(pairs), k), dtype=bool)  # S, S∖s, S∖{s, s'}
    for i in range(k):
        subsets[1 + i, i] = False
    for j, (a, b) in enumerate(pairs):
        subsets[1 + k + j, [a, b]] = False
    log_i = log_set_integrals(log_a, subsets)
    log_s, log_without = log_i[0], log_i[1 : 1 + k]
    log_without2 = np.zeros((k, k))
    for j, (a, b) in enumerate(pairs):
        log_without2[a, b] = log_without2[b, a] = log_i[1 + k + j]
    weights = np.exp(logp + log_without - log_s)  # p(s) R(S, s)
    baselines = np.empty(k)
    for s in range(k):
        others = [t for t in range(k) if t != s]
        r2 = np.exp(log_without2[s, others] - log_without[s])  # R^{D∖s}(S∖s, s')
        baselines[s] = p[s] * f[s] + float(np.sum(p[others] * r2 * f[others]))
    return weights, baselines


def set_estimate(logp: np.ndarray, rewards: np.ndarray, complete: bool) -> float:
    """The unordered-set estimate of E_π[f] from one set S: Σ_{s∈S} p(s)·R(S, s)·f(s), unbiased
    (P(B₁ = s | S) = p(s)R(S, s): the first plan drawn, averaged over which one it was); exact when S
    holds every valid plan. What ``train/reward_estimate`` logs: the mean reward of K *distinct* plans
    is not an estimate of E[R] (a rare plan counts as much as the mode)."""
    weights, _ = unordered_set_weights(logp, rewards, complete)
    return float(np.dot(weights, np.asarray(rewards, dtype=np.float64)))
