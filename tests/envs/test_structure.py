"""Structure of issue 11: one factory reached both ways (``envs.make`` and ``gym.make`` with a
config), one stratified split behind both envs' persisted splits."""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs
from envs.openagi.config import EnvConfigError, OpenAGIEnvConfig
from envs.openagi.registry import TEXT, ToolRegistry
from envs.splitting import stratified_split

ECHO_CALLS: list[int] = []


def register_echo(registry: ToolRegistry) -> None:
    def echo(texts):
        ECHO_CALLS.append(len(texts))
        return list(texts)

    registry.register("Echo Text", TEXT, TEXT, echo, "return the text unchanged")


def _same_env(a, b) -> None:
    assert (a.split, a.samples_per_step) == (b.split, b.samples_per_step)
    assert [t.id for t in a.tasks()] == [t.id for t in b.tasks()]
    assert list(a.registry) == list(b.registry)


@pytest.mark.parametrize("config", [OpenAGIEnvConfig(n_samples=3, samples_per_step=2),
                                    {"n_samples": 3, "samples_per_step": 2}])
@pytest.mark.parametrize("split", ["train", "test"])
def test_gym_make_with_a_config_is_envs_make(config, split):
    env = gym.make("OpenAGI-Lite-v0", config=config, split=split)
    _same_env(env.unwrapped, envs.make(config, split=split))
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, str) and obs
    env.close()


def test_gym_make_config_registers_the_configs_tools():
    ECHO_CALLS.clear()
    env = gym.make("OpenAGI-Lite-v0", config={"n_samples": 3, "tools": [f"{__name__}:register_echo"]}, split="all")
    reg = env.unwrapped.registry
    assert "Echo Text" in reg and reg["Echo Text"].description == "return the text unchanged"
    task = env.unwrapped.get_task("Given English text, how to return the sentiment in English step by step?")
    assert env.unwrapped.reward_plans([(task, "Echo Text, Sentiment Analysis")])[0].valid and ECHO_CALLS


def test_gym_make_config_is_validated_and_not_mixed_with_env_keywords():
    with pytest.raises(EnvConfigError, match=r"'env\.n_samples': 0"):
        gym.make("OpenAGI-Lite-v0", config={"n_samples": 0})
    with pytest.raises(TypeError, match="set them in the config"):
        gym.make("OpenAGI-Lite-v0", config={"n_samples": 3}, n_samples=4)


def test_gym_make_without_a_config_passes_keywords_to_the_env():
    env = gym.make("OpenAGI-Lite-v0", split="test", n_samples=4, render_mode="ansi").unwrapped
    assert env.split == "test" and env.render_mode == "ansi" and env.samples_per_step is None
    assert gym.make("OpenAGI-Lite-v0", config={"n_samples": 3}, render_mode="ansi").unwrapped.render_mode == "ansi"


def test_stratified_split_keeps_every_stratum_in_every_part():
    strata = ["a"] * 10 + ["b"] * 3 + ["c"] * 2 + ["d"]
    parts = stratified_split(strata, 0, {"validation": 0.2, "test": 0.3}, ids=[100 + i for i in range(16)])
    assert sorted(sum(parts.values(), [])) == [100 + i for i in range(16)]
    by = {k: {strata[i - 100] for i in v} for k, v in parts.items()}
    assert by["validation"] == {"a", "b"} and by["test"] == {"a", "b", "c"} and by["train"] == {"a", "b", "c", "d"}
    assert parts == stratified_split(strata, 0, {"validation": 0.2, "test": 0.3}, ids=[100 + i for i in range(16)])
    capped = stratified_split(strata, 0, {"train": 0.1, "validation": 0.2, "test": 0.3})
    assert len(capped["train"]) == 4  # one per stratum: at most 10%, at least one
    with pytest.raises(ValueError, match="bad split fraction"):
        stratified_split(strata, 0, {"validation": 0.2, "test": 0.3, "dev": 0.1})
