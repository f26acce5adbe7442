"""The unordered-set estimator with its built-in baseline (issue 37 item 2): set probabilities, no
bias over every possible set, the exact gradient when the set holds every plan, its Rao-Blackwell
property, and the baseline in a training step (distinct plans, executed once each)."""

import itertools

import numpy as np
import pytest
from accelerate import Accelerator

from constrained_decoding.without_replacement import sample_distinct_plans
from rltf.algorithms.baselines import BASELINES, Baseline, SetDraws
from rltf.algorithms.unordered_set import log_set_integrals, set_estimate, unordered_set_weights
from rltf.config.loading import ConfigError, load_config
from rltf.rl.trainer import RLTFTrainer
from rltf.stages.flow_job import check_flow_job
from tests.rl.test_clipped_updates import make_cfg, make_planner
from tests.toy_env import toy_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def set_probability(p: np.ndarray, s: tuple[int, ...]) -> float:
    """P(the set s) drawn without replacement, summed over its orders (the definition)."""
    total = 0.0
    for order in itertools.permutations(s):
        prob, left = 1.0, 1.0
        for i in order:
            prob *= p[i] / left
            left -= p[i]
        total += prob
    return total


def distribution(rng, n: int, scale: float) -> np.ndarray:
    z = rng.normal(size=n) * scale
    p = np.exp(z - z.max())
    return p / p.sum()


@pytest.mark.parametrize("n,k,scale", [(6, 2, 1.0), (7, 3, 3.0), (8, 4, 6.0), (9, 3, 12.0)])
def test_set_probabilities_equal_the_sum_over_orders(n, k, scale):
    rng = np.random.default_rng(n * k)
    p = distribution(rng, n, scale)
    for s in itertools.combinations(range(n), k):
        b = 1.0 - p[list(s)].sum()
        got = np.exp(log_set_integrals(np.log(p[list(s)]) - np.log(b), np.ones((1, k), bool))[0])
        want = set_probability(p, s)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-300), s


def test_set_probabilities_far_out_in_the_tails():
    """A set of nearly all the mass (b tiny) and a set of nearly none (b near 1): still exact."""
    p = np.array([0.999999, 4e-7, 3e-7, 2e-7, 1e-7])
    for s in [(0, 1, 2), (1, 2, 3), (2, 3, 4)]:
        b = 1.0 - p[list(s)].sum()
        got = np.exp(log_set_integrals(np.log(p[list(s)]) - np.log(b), np.ones((1, 3), bool))[0])
        assert got == pytest.approx(set_probability(p, s), rel=1e-7), s


def exact_and_expected(p: np.ndarray, f: np.ndarray, k: int, baseline: bool = True):
    """∇_θ E[f] for p = softmax(θ), and the estimator's expectation over every set of size k (and,
    per set, its value: for the variance)."""
    exact = p * (f - p @ f)
    expected, values = np.zeros(len(p)), []
    for s in itertools.combinations(range(len(p)), k):
        w, b = unordered_set_weights(np.log(p[list(s)]), f[list(s)], complete=k == len(p))
        if not baseline:
            b = np.zeros_like(b)
        g = np.zeros(len(p))
        for j, i in enumerate(s):
            dlogp = -p.copy()
            dlogp[i] += 1.0  # ∇_θ log p_i
            g += w[j] * (f[i] - b[j]) * dlogp
        prob = set_probability(p, s)
        expected += prob * g
        values.append((prob, g))
    return exact, expected, values


@pytest.mark.parametrize("n,k,scale", [(5, 2, 0.5), (6, 3, 2.0), (7, 4, 4.0), (6, 6, 1.0)])
def test_no_bias_over_every_set_and_the_exact_gradient_from_all_plans(n, k, scale):
    rng = np.random.default_rng(7 + n + k)
    p, f = distribution(rng, n, scale), rng.random(n)
    exact, expected, values = exact_and_expected(p, f, k)
    np.testing.assert_allclose(expected, exact, atol=1e-12)
    if k == n:  # one set: every plan; its estimate is the gradient itself
        np.testing.assert_allclose(values[0][1], exact, atol=1e-12)


@pytest.mark.parametrize("n,k,scale", [(5, 2, 0.5), (6, 3, 2.0), (7, 4, 4.0)])
def test_the_logged_estimate_of_the_expected_reward_has_no_bias_where_the_mean_of_distinct_plans_has(n, k, scale):
    rng = np.random.default_rng(11 + n + k)
    p, f = distribution(rng, n, scale), rng.random(n)
    sets = list(itertools.combinations(range(n), k))
    probs = np.array([set_probability(p, s) for s in sets])
    np.testing.assert_allclose(probs.sum(), 1.0, atol=1e-9)
    estimates = np.array([set_estimate(np.log(p[list(s)]), f[list(s)], complete=False) for s in sets])
    means = np.array([f[list(s)].mean() for s in sets])
    np.testing.assert_allclose(probs @ estimates, p @ f, rtol=1e-7, atol=1e-9)
    assert abs(probs @ means - p @ f) > 1e-3  # the plain mean of K distinct plans is biased
    assert set_estimate(np.log(p), f, complete=True) == pytest.approx(p @ f, abs=1e-12)


def test_without_its_baseline_it_rao_blackwellises_one_sample():
    """No baseline: E[estimate] is still the gradient and its variance is at most that of
    ∇log p(x) f(x) for one x ~ p (the estimator averages it over which element came first)."""
    rng = np.random.default_rng(3)
    p, f = distribution(rng, 7, 2.0), rng.random(7)
    exact, expected, values = exact_and_expected(p, f, 3, baseline=False)
    np.testing.assert_allclose(expected, exact, atol=1e-12)
    var_set = sum(prob * np.sum((g - exact) ** 2) for prob, g in values)
    var_one = 0.0
    for i in range(7):
        dlogp = -p.copy()
        dlogp[i] += 1.0
        var_one += p[i] * np.sum((dlogp * f[i] - exact) ** 2)
    assert var_set < var_one


def test_the_baseline_entry_reads_the_sets_and_scales_to_reinforce():
    """Per task's set: weight p·R(S, s)·(f − B) times the plans per task of the batch; a complete
    set's baselines are E[f] exactly; without the sets it says what it needs."""
    logp = np.log(np.array([0.5, 0.3, 0.2, 0.6, 0.1, 0.05]))
    f = np.array([1.0, 0.0, 0.5, 0.2, 0.9, 0.4])
    ids = np.array([1, 1, 1, 2, 2, 2])
    complete = np.array([True] * 3 + [False] * 3)
    adv, base = Baseline("unordered_set").advantages(f, ids, SetDraws(logp, complete))
    np.testing.assert_allclose(base[:3], 0.5 * 1.0 + 0.3 * 0.0 + 0.2 * 0.5)
    np.testing.assert_allclose(adv[:3], 3 * np.exp(logp[:3]) * (f[:3] - base[:3]))
    w, b = unordered_set_weights(logp[3:], f[3:], complete=False)
    np.testing.assert_allclose(adv[3:], 3 * w * (f[3:] - b))
    with pytest.raises(ValueError, match="log-probabilities as drawn without replacement"):
        Baseline("unordered_set").advantages(f, ids)
    assert BASELINES["unordered_set"].without_replacement


def test_a_training_step_draws_distinct_plans_and_weights_them(tmp_path):
    cfg = make_cfg(tmp_path, "rltf.baseline=unordered_set", "rltf.entropy_coef=0", "rltf.kl_coef=0")
    trainer = RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True))
    row = trainer.train_step()
    b = trainer.last_batch
    env, tok = trainer.env, trainer.planner.tokenizer
    for t in set(b.task_ids):
        plans = [p for i, p in zip(b.task_ids, b.plans) if i == t]
        task = env.get_task(t)
        every = sample_distinct_plans(trainer.model, tok, [task.description], [env.grammar(tok, task)], 100)[0]
        assert every.complete
        # distinct (each executed once); all of them when the task has fewer than k_samples
        assert len(plans) == len(set(plans)) == min(cfg.rltf.k_samples, len(every.plans))
    assert row["train/distinct_plans"] == 1.0 and row["train/logprob_mismatch"] < 1e-4
    assert 0.0 <= row["train/reward_estimate"] <= 1.0
    assert np.isfinite(row["train/loss"]) and np.abs(b.advantages).sum() > 0


def test_flows_refuse_it(tmp_path):
    cfg = load_config([f"output_dir={tmp_path}", "config=configs/travel-mtp.yaml", "rltf.baseline=unordered_set"])
    with pytest.raises(ConfigError, match="draws distinct plans without replacement"):
        check_flow_job(cfg)
