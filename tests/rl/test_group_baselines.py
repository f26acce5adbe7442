"""Group baselines (issue 26 item 2): GRPO's group mean with std normalisation and Dr. GRPO's
unscaled group mean, beside moving_average / per_task / rloo, and which of them put a sample's own
reward in its baseline."""

import numpy as np
import pytest
from accelerate import Accelerator

from rltf.algorithms.baselines import BASELINES, GRPO_STD_EPS, Baseline
from rltf.config.loading import ConfigError, load_config
from rltf.rl.trainer import RLTFTrainer
from tests.rl.test_clipped_updates import make_cfg, make_planner
from tests.toy_env import toy_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REWARDS = np.array([1.0, 0.0, 0.5, 0.5, 0.2, 0.9, 0.9, 0.4])
IDS = np.array([3, 3, 3, 3, 7, 7, 7, 7])  # two groups of K = 4 (a task's samples)


def test_grpo_normalises_by_the_groups_mean_and_std():
    adv, base = Baseline("grpo").advantages(REWARDS, IDS)
    for t in (3, 7):
        g = REWARDS[IDS == t]
        expected = (g - g.mean()) / (g.std(ddof=1) + GRPO_STD_EPS)  # TRL: Bessel-corrected std, eps 1e-4
        np.testing.assert_allclose(adv[IDS == t], expected, rtol=1e-12)
        np.testing.assert_allclose(base[IDS == t], g.mean(), rtol=1e-12)
        assert abs(adv[IDS == t].sum()) < 1e-12  # centred in every group


def test_dr_grpo_is_the_unscaled_group_mean_and_rloo_times_k_minus_1_over_k():
    adv, base = Baseline("dr_grpo").advantages(REWARDS, IDS)
    means = np.array([REWARDS[IDS == t].mean() for t in IDS])
    np.testing.assert_allclose(adv, REWARDS - means, rtol=1e-12)
    np.testing.assert_allclose(base, means, rtol=1e-12)
    rloo, _ = Baseline("rloo").advantages(REWARDS, IDS)
    np.testing.assert_allclose(adv, (4 - 1) / 4 * rloo, rtol=1e-12)  # own reward in b: a rescaled RLOO


def test_which_baselines_contain_a_samples_own_reward():
    """Raise one sample's reward: the baselines that never contain it keep that sample's b; the
    group means (by definition) move it."""
    bumped = REWARDS.copy()
    bumped[0] += 0.3
    for kind in (k for k, spec in BASELINES.items() if not spec.without_replacement):  # (tests/rl/test_unordered_set)
        warm_a, warm_b = Baseline(kind), Baseline(kind)
        warm_a.advantages(REWARDS, IDS)  # a moving average with history: b from earlier batches
        warm_b.advantages(REWARDS, IDS)
        _, b0 = warm_a.advantages(REWARDS, IDS)
        _, b1 = warm_b.advantages(bumped, IDS)
        own_in_baseline = not np.isclose(b0[0], b1[0], rtol=1e-12, atol=0)  # (rloo: (sum - own) rounds)
        assert own_in_baseline == (kind in ("grpo", "dr_grpo")), kind


def test_groups_without_spread_learn_nothing_and_a_group_of_one_is_zero():
    for kind in ("grpo", "dr_grpo"):
        adv, _ = Baseline(kind).advantages([0.5, 0.5, 0.5, 1.0], [1, 1, 1, 2])
        assert adv.tolist() == [0.0, 0.0, 0.0, 0.0], kind


def test_group_baselines_keep_no_state_and_checkpoint():
    b = Baseline("grpo")
    b.advantages(REWARDS, IDS)
    assert b.value is None and b.per_task == {}
    c = Baseline("grpo")
    c.load_state_dict(b.state_dict())
    with pytest.raises(ValueError, match="checkpoint baseline is 'grpo' but the config asks for 'dr_grpo'"):
        Baseline("dr_grpo").load_state_dict(b.state_dict())


def test_the_config_offers_them_and_a_trainer_step_uses_them(tmp_path):
    for kind in ("grpo", "dr_grpo"):
        cfg = make_cfg(tmp_path / kind, f"rltf.baseline={kind}", "rltf.entropy_coef=0", "rltf.kl_coef=0")
        trainer = RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True))
        row = trainer.train_step()
        b = trainer.last_batch
        adv, _ = Baseline(kind).advantages(b.rewards, b.task_ids)
        np.testing.assert_allclose(b.advantages, adv.astype(np.float32), rtol=1e-6)
        assert np.isfinite(row["train/loss"])
    with pytest.raises(ConfigError, match="rltf.baseline"):
        load_config([f"output_dir={tmp_path}", "rltf.baseline=group"])
