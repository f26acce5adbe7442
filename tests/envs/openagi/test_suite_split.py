"""Task suite grammar, lite task data, persisted split, and the lite environment end to end."""

import json

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401
from envs.openagi.lite import build_lite_registry
from envs.openagi.plans import check_plan
from envs.openagi.split import SPLITS, load_split, make_split, split_for_suite, split_path
from envs.openagi.suite import SUITE_LIMITS, build_suite, task_specs
from envs.openagi.tools import signature_registry


def test_full_suite_is_openagis_185_tasks():
    specs = task_specs("full")
    assert len(specs) == 185
    assert sum(len(s.inputs) == 1 for s in specs) == 117
    assert len({s.description for s in specs}) == 185
    assert specs[0].description == "Given low-resolutioned image, how to return the regular image step by step?"
    assert ("Given noisy blurry grayscale image and clozed English query, how to answer the question in "
            "English step by step?") in {s.description for s in specs}
    reg = signature_registry()
    for s in specs:  # every reference plan is valid for its task within the suite's limits
        check_plan(s.reference_plan, reg, s.inputs, s.target, SUITE_LIMITS["full"])


def test_lite_suite_is_solvable_by_the_lite_zoo():
    specs = task_specs("lite")
    reg = build_lite_registry()
    assert len(specs) == 38 and sum(len(s.inputs) > 1 for s in specs) == 4
    for s in specs:
        check_plan(s.reference_plan, reg, s.inputs, s.target, SUITE_LIMITS["lite"])
    assert {s.family for s in specs} == {"restoration", "class_label", "sentiment", "summary", "qa"}


def test_suite_data_is_deterministic_from_the_seed():
    a = build_suite("lite", seed=0, n_samples=3)
    build_suite.cache_clear()
    b = build_suite("lite", seed=0, n_samples=3)
    c = build_suite("lite", seed=1, n_samples=3)
    for ta, tb, tc in zip(a, b, c):
        for sa, sb in zip(ta.samples, tb.samples):
            assert sa.uid == sb.uid
            for xa, xb in zip((*sa.inputs, sa.target), (*sb.inputs, sb.target)):
                assert np.array_equal(xa, xb) if isinstance(xa, np.ndarray) else xa == xb
    first = lambda t: t.samples[0].inputs[0]  # noqa: E731
    assert any(not np.array_equal(first(ta), first(tc)) if isinstance(first(ta), np.ndarray)
               else first(ta) != first(tc) for ta, tc in zip(a, c))
    with pytest.raises(ValueError, match="n_samples=0"):
        build_suite("lite", 0, 0)


def test_degradations_are_in_the_data():
    tasks = {t.description: t for t in build_suite("lite", 0, 3)}
    lowres = tasks["Given low-resolutioned image, how to return the regular image step by step?"]
    x, y = lowres.samples[0].inputs[0], lowres.samples[0].target
    assert x.shape[0] * 2 == y.shape[0] and x.shape[1] * 2 == y.shape[1]  # a real x2 downsampling
    gray = tasks["Given grayscale image, how to return the regular image step by step?"].samples[0].inputs[0]
    assert np.allclose(gray[..., 0], gray[..., 1]) and np.allclose(gray[..., 1], gray[..., 2])
    clozed = tasks["Given clozed English text, how to return the sentiment in English step by step?"]
    assert all(s.inputs[0].count("[MASK]") == 1 for s in clozed.samples)


def test_split_is_by_task_stratified_and_persisted():
    for suite in ("lite", "full"):
        persisted = json.loads(split_path(suite).read_text())
        assert persisted == json.loads(json.dumps(split_for_suite(suite))), f"regenerate {suite} split"
        parts = load_split(suite)
        ids = [i for p in SPLITS for i in parts[p]]
        assert len(ids) == len(set(ids))  # disjoint
        specs = task_specs(suite)
        key = lambda s: f"{'+'.join(s.inputs)}->{s.target}"  # noqa: E731
        sizes = {k: sum(key(s) == k for s in specs) for k in {key(s) for s in specs}}
        for p in SPLITS:  # every stratum of 3+ tasks is in every part; of 2, in train and test
            want = {k for k, n in sizes.items() if n >= 3 or (n == 2 and p != "validation")}
            assert {key(specs[i]) for i in parts[p]} == want, (suite, p)
    assert (len(load_split("lite")["train"]) + len(load_split("lite")["validation"])
            + len(load_split("lite")["test"])) == 38
    full = load_split("full")
    assert 15 <= len(full["train"]) <= 25 and 15 <= len(full["test"]) <= 25  # the paper's ~10% / 10%


def test_split_fractions_are_validated():
    with pytest.raises(ValueError, match="bad split fraction"):
        make_split(["a"] * 5, fractions={"tst": 0.2})
    with pytest.raises(ValueError, match="leave no training tasks"):
        make_split(["a"] * 5, fractions={"validation": 0.5, "test": 0.5})


def test_stale_split_file_is_detected(tmp_path):
    data = json.loads(split_path("lite").read_text())
    data["train"][0]["description"] = "Given something else"
    bad = tmp_path / "lite.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="stale"):
        load_split("lite", bad)


def test_lite_env_end_to_end():
    env = gym.make("OpenAGI-Lite-v0", split="test", n_samples=4)
    desc, info = env.reset(seed=0)
    assert desc in {t.description for t in env.unwrapped.tasks()}
    task = env.unwrapped.get_task(info["task_id"])
    _, r, term, trunc, info = env.step(task.reference_plan)
    assert term and not trunc and info["valid"] and 0.0 <= r <= 1.0 and len(info["scores"]) == 4
    _, r, _, _, info = env.step("Colorization, Colorization")
    assert r == 0.0 and not info["valid"] and info["error"]
    res = env.unwrapped.reward_plans([(t, t.reference_plan) for t in env.unwrapped.tasks()])
    assert all(x.valid for x in res) and np.mean([x.reward for x in res]) > 0.3
