"""The env builds itself from its config (``envs.make``): validation, tools named in the config,
per-env metrics, seeding through an explicit RNG, a description that loads nothing, layering."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import envs
from envs.openagi import metrics
from envs.openagi.config import EnvConfigError, OpenAGIEnvConfig
from envs.openagi.factory import apply_tools
from envs.openagi.registry import TEXT, ToolRegistry
from rltf.config.loading import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]
CALLS: list[int] = []
NOT_CALLABLE = 3


def register_echo(registry: ToolRegistry) -> None:
    """A tool no part of rltf has seen: text in, the same text out."""

    def echo(texts):
        CALLS.append(len(texts))
        return list(texts)

    registry.register("Echo Text", TEXT, TEXT, echo, "return the text unchanged")


def register_broken(registry: ToolRegistry) -> None:
    registry.register("Bad, Name", TEXT, TEXT, lambda xs: xs)


def test_make_builds_the_train_and_held_out_envs_of_a_config():
    train, held_out = envs.make_train_and_held_out(OpenAGIEnvConfig(n_samples=3, samples_per_step=2))
    assert train.registry is held_out.registry and "Image Denoising" in train.registry
    assert train.split == "train" and train.samples_per_step == 2
    assert held_out.split == "all" and held_out.samples_per_step is None and len(held_out.tasks()) == 38
    assert {t.id for t in train.tasks()} < {t.id for t in held_out.tasks()}
    # one env, a config given as a mapping
    test = envs.make({"n_samples": 3}, split="test")
    assert test.split == "test" and test.samples_per_step is None and 0 < len(test.tasks()) < 38


@pytest.mark.parametrize("config, match", [
    ({"n_samples": 0}, r"'env\.n_samples': 0; expected an integer > 0"),
    ({"suite": "full"}, r"'env\.suite' is 'full' but 'env\.backend' is 'lite'"),
    ({"backend": "hf"}, r"env\.suite='lite' runs on the lite backend only"),
    ({"suite": "huge"}, r"'env\.suite': 'huge'; expected one of 'lite', 'full'"),
    ({"tools": ["no_colon_here"]}, r"bad entry 'no_colon_here' in 'env\.tools'"),
    ({"nonsense": 1}, r"bad env config"),
])
def test_make_validates_and_names_the_key(config, match):
    with pytest.raises(EnvConfigError, match=match):
        envs.make(config)


def test_tools_named_in_the_config_are_registered_executed_and_scored():
    CALLS.clear()
    train, held_out = envs.make_train_and_held_out({"n_samples": 3, "tools": [f"{__name__}:register_echo"]})
    assert held_out.registry["Echo Text"].description == "return the text unchanged"
    task = held_out.get_task("Given English text, how to return the sentiment in English step by step?")
    plain, echoed = held_out.reward_plans([(task, "Sentiment Analysis"), (task, "Echo Text, Sentiment Analysis")])
    assert echoed.valid and CALLS, echoed.error
    assert echoed.scores == plain.scores and echoed.reward == plain.reward  # the identity changes nothing
    assert not held_out.reward_plans([(task, "Echo Text, Echo Text")])[0].valid  # typed and checked like any tool


def test_bad_tools_entries_fail_naming_the_entry():
    reg = ToolRegistry()
    cases = [
        ("no_such_module_xyz:register", r"'no_such_module_xyz:register'.*cannot import module 'no_such_module_xyz'"),
        (f"{__name__}:no_such_function", rf"'{__name__}:no_such_function'.*has no attribute 'no_such_function'"),
        (f"{__name__}:NOT_CALLABLE", rf"'{__name__}:NOT_CALLABLE'.*is a int, not a callable"),
        (f"{__name__}:register_broken", rf"'{__name__}:register_broken' failed on the env's registry.*bad tool name"),
    ]
    for entry, match in cases:
        with pytest.raises(EnvConfigError, match=match):
            apply_tools(reg, [entry])
    # the run config checks the form before anything loads
    with pytest.raises(ConfigError, match=r"bad entry 'mypackage' in 'env\.tools'"):
        load_config(["env.tools=[mypackage]"])
    assert load_config([f"env.tools=[{__name__}:register_echo]"]).env.tools == [f"{__name__}:register_echo"]


def test_metrics_are_the_envs_own_and_the_shared_table_is_never_rewritten():
    before = dict(metrics.METRICS)
    env = envs.make({"n_samples": 2}, split="all")
    task = env.tasks()[-1]
    env.metrics["token_f1"] = lambda preds, targets: [0.25] * len(preds)  # this env's own table wins
    result = env.reward_plans([(task, task.reference_plan)])[0]
    assert result.scores == [0.25, 0.25]
    assert metrics.METRICS == before
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        metrics.compute_metric("nope", ["a"], ["a"], {"other": lambda p, t: [1.0]})


def test_score_draws_sample_subsets_from_the_rng_it_is_given():
    """``reward_plans(pairs, rng=...)`` is the stream the trainer used to assign to ``env.np_random``."""
    train = envs.make({"n_samples": 6, "samples_per_step": 2})
    task = train.tasks()[0]
    pairs = [(task, task.reference_plan)] * 2
    given = train.reward_plans(pairs, rng=np.random.default_rng([0, 3, 0, 1]))
    train.np_random = np.random.default_rng([0, 3, 0, 1])  # the old way, for comparison only
    assigned = train.reward_plans(pairs)
    assert [r.scores for r in given] == [r.scores for r in assigned]
    assert given[0].reward == given[1].reward  # one subset per task per call
    train.reset(seed=5)
    first = train.reward_plans(pairs)
    train.reset(seed=5)
    assert [r.scores for r in train.reward_plans(pairs)] == [r.scores for r in first]  # reset(seed=...) seeds it


def test_describe_loads_nothing_and_lists_the_tools():
    lines = "\n".join(envs.describe({"tools": [f"{__name__}:register_echo"]}))
    assert "38 tasks" in lines and f"{__name__}:register_echo" in lines
    with pytest.raises(EnvConfigError, match="cannot import module 'somewhere.not.importable'"):  # (#52: as env.name)
        envs.describe({"tools": ["somewhere.not.importable:register"]})
    with pytest.raises(EnvConfigError, match="'env.suite' is 'full'"):
        envs.describe({"suite": "full"})


def test_the_env_interface_and_the_decoder_never_import_rltf():
    """Layering: the env interface (the modules directly in ``envs/``) and ``constrained_decoding`` are
    usable without rltf; a concrete env is a plug-in above rltf and may use its interfaces (the travel
    env's agent flows: ``envs/travel/flows``; tests/project/test_layout.py checks every layer)."""
    offenders = []
    for paths in ((ROOT / "envs").glob("*.py"), (ROOT / "constrained_decoding").rglob("*.py")):
        for path in sorted(paths):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n == "rltf" or n.startswith("rltf.")]
    assert not offenders, offenders
