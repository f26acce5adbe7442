"""Both shipped envs implement the rltf env protocol (``envs/protocol.py``), checked by ours
(``envs.checker.check_rltf_env``) and by Gymnasium's ``check_env``; the registry builds them by name."""

from __future__ import annotations

import warnings

import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs import registry
from envs.checker import EnvCheckError, check_rltf_env, protocol_members
from envs.openagi.diagnostics import expert_failures
from envs.protocol import RLTFEnv
from envs.travel.config import TravelEnvConfig
from envs.travel.registration import TravelSection
from rltf.planners.tokenizer import train_plan_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONFIGS = {"openagi": {"n_samples": 3, "samples_per_step": 2},
           "travel": TravelSection(travel=TravelEnvConfig(days=[3], levels=["easy"]))}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def env_pair(request):
    train, held_out = envs.make_train_and_held_out(CONFIGS[request.param])
    return request.param, train, held_out


def test_both_envs_pass_our_checker(env_pair):
    name, train, held_out = env_pair
    tokenizer = train_plan_tokenizer(train.tokenizer_texts(), vocab_size=600)
    assert isinstance(train, RLTFEnv) and isinstance(held_out, RLTFEnv)
    check_rltf_env(train, tokenizer)
    check_rltf_env(held_out, tokenizer)


def test_both_envs_pass_gymnasiums_check_env(env_pair):
    _, train, _ = env_pair
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (its advisory notes on Text spaces)
        check_env(train, skip_render_check=True)


def test_the_checker_fails_an_env_that_lacks_a_member(env_pair):
    _, train, _ = env_pair

    class Partial:  # every member but one
        def __getattr__(self, attr):
            if attr == "oracle_plans":
                raise AttributeError(attr)
            return getattr(train, attr)

    with pytest.raises(EnvCheckError, match="lacks \\['oracle_plans'\\]"):
        check_rltf_env(Partial(), None)
    assert "expert_failures" in protocol_members(RLTFEnv) and "headline" in protocol_members(RLTFEnv)


def test_the_registry_builds_each_env_by_name_and_refuses_other_keys():
    assert {"openagi", "travel"} <= set(registry.names())
    assert type(envs.make({"name": "travel", "travel": {"days": [3]}}, split="test")).__name__ == "TravelPlannerEnv"
    with pytest.raises(envs.config.EnvConfigError, match=r"'env.suite' \('full'\) is a key of the openagi env, "
                                                        r"not of the travel env"):
        envs.make({"name": "travel", "suite": "full"})
    with pytest.raises(envs.config.EnvConfigError, match=r"'env.travel' .* is a key of the travel env"):
        envs.make({"name": "openagi", "travel": {"days": [3]}})
    with pytest.raises(envs.config.EnvConfigError, match=r"'env.name': 'webshop'; expected one of 'openagi', 'travel'"):
        envs.make({"name": "webshop"})
    # another env's keys at their defaults (configs/default.yaml writes OpenAGI's) do not stop a travel run
    assert envs.config.as_section({"name": "travel", "suite": "lite", "n_samples": 20}).name == "travel"


class _Result:
    def __init__(self, plan_text, sample_errors, valid=True):
        self.plan_text, self.sample_errors, self.valid = plan_text, sample_errors, valid


def test_openagi_expert_failures_name_a_tool_that_failed_on_every_call():
    results = [_Result("Image Denoising, Image Classification", ["Image Denoising raised OSError: gone", None]),
               _Result("Image Denoising", ["Image Denoising raised OSError: gone"] * 2),
               _Result("Colorization", ["Colorization raised ValueError: x"] * 2),
               _Result("nonsense", [], valid=False)]
    rate, warnings_ = expert_failures(results)
    assert rate == pytest.approx(5 / 6, rel=1e-9)  # 5 of the 6 samples of valid plans failed
    assert warnings_ == ["expert 'Colorization' failed on every call (2 samples): Colorization raised ValueError: x"]
    assert expert_failures([]) == (0.0, [])
