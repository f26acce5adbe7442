"""Work shared within one ``reward_plans`` call (repeated plans, shared plan prefixes) gives exactly
what scoring every plan on its own gives: the same PlanResults, failures and their messages included,
and the same tool failure record; nothing of it outlives the call.

The toy registry of tests/envs/test_env_core.py (exact string tools, a tool that raises on one sample), and
the lite suite's real experts on every short plan of a few tasks."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from envs.openagi.env import OpenAGIEnv
from envs.openagi.executor import PlanExecutor
from envs.openagi.lite import build_lite_registry
from envs.openagi.plans import enumerate_plans, parse_plan
from envs.openagi.registry import DOWN_LIMIT
from envs.openagi.suite import SUITE_LIMITS, build_suite
from tests.envs.test_env_core import CALLS, exact_metric, make_env  # noqa: F401  (exact_metric: autouse fixture)

PAIRS = [
    (0, "Strip, Upper"), (0, "Strip, Upper, Reverse"), (0, "Strip,Upper"), (0, "Strip, Reverse"),
    (0, "Upper, Upper"),  # invalid plans: a tool twice, an unknown tool, Upper in a branch and the tail
    (0, "Nope"), (2, "Flaky"), (1, "(Strip) (Upper) Join, Upper"), (0, "Strip, Upper"),
    (2, "Flaky"), (1, "(Strip) (Upper) Join"), (1, "() () Join, Upper"), (0, "Upper"),
]


def results(env: OpenAGIEnv, pairs) -> list[dict]:
    return [asdict(r) for r in env.reward_plans(pairs)]


@pytest.mark.parametrize("cache_bytes", [0, 512 * 2**20])
def test_repeats_and_shared_prefixes_give_each_plans_own_results(cache_bytes):
    alone = results(make_env(cache_bytes=cache_bytes, share_work=False), PAIRS)
    CALLS.clear()
    shared = results(make_env(cache_bytes=cache_bytes, share_work=True), PAIRS)
    assert shared == alone
    assert [r["valid"] for r in shared].count(False) == 3  # a tool twice, an unknown tool, Upper twice
    flaky = shared[6]
    assert flaky["scores"] == [1.0, 0.0, 1.0] and flaky["sample_errors"][1].startswith("Flaky raised RuntimeError")
    assert shared[9] == flaky
    if not cache_bytes:
        # each distinct request made once: Strip, Upper once for the three plans starting "Strip";
        # Flaky's batch raises once, then each sample is tried alone once
        strips = [c for c in CALLS if c[0] == "Strip"]
        assert strips == [("Strip", 3), ("Strip", 2)]  # task 0's three samples, task 1's branch
        assert [c for c in CALLS if c[0] == "Flaky"] == [("Flaky", 3), ("Flaky", 1), ("Flaky", 1), ("Flaky", 1)]


def test_nothing_is_shared_across_calls():
    env = make_env(cache_bytes=0)
    env.reward_plans([(0, "Strip, Upper")])
    CALLS.clear()
    env.reward_plans([(0, "Strip, Upper")])
    assert CALLS == [("Strip", 3), ("Upper", 3)]
    assert env.executor._shared is None


def test_a_repeated_plans_metric_is_computed_once_per_call(monkeypatch):
    from envs.openagi import metrics

    asked: list[int] = []

    def counting(p, t):
        asked.append(len(p))
        return [float(a == b) for a, b in zip(p, t)]
    monkeypatch.setitem(metrics.METRICS, "equal", counting)
    env = make_env(cache_bytes=0)
    got = env.reward_plans([(0, "Strip, Upper"), (0, "Upper"), (0, "Strip,Upper"), (2, "Flaky"), (2, "Flaky")])
    assert [r.reward for r in got[:3]] == [1.0, pytest.approx(1 / 3), 1.0]
    assert asked == [3, 3, 2]  # Flaky's two good samples: once
    env.reward_plans([(0, "Strip, Upper")])
    assert asked == [3, 3, 2, 3]


def test_a_broken_tool_goes_down_after_as_many_requests_as_before():
    """The failure record counts requests, repeated ones too: a tool failing on every sample goes
    down after the same plans, so the same samples get "not called" errors."""
    def env(share_work: bool) -> OpenAGIEnv:
        e = make_env(cache_bytes=0, share_work=share_work)

        def broken(xs):
            raise ValueError("always")
        e.registry.register("Broken", "text", "text", broken)
        return e

    pairs = [(0, "Strip, Broken"), (0, "Broken"), (0, "Upper, Broken")] * (DOWN_LIMIT // 2)
    alone, shared = env(False), env(True)
    want, got = results(alone, pairs), results(shared, pairs)
    assert got == want
    assert any("not called" in (e or "") for r in got for e in r["sample_errors"])
    assert vars(shared.registry.health("Broken")) == vars(alone.registry.health("Broken"))


def test_executor_sharing_blocks_nest_and_end():
    ex = PlanExecutor(make_env().registry, None)
    plan = parse_plan("Strip, Upper")
    sample = make_env().get_task(0).samples[:1]
    with ex.sharing():
        with ex.sharing():
            first = ex.run(plan, sample)
        CALLS.clear()
        assert ex.run(plan, sample) == first and CALLS == []
    assert ex._shared is None
    ex.run(plan, sample)
    assert CALLS == [("Strip", 1), ("Upper", 1)]


def test_lite_experts_give_the_same_results_shared_or_alone():
    """Every valid plan of up to two tools of some image and text tasks, in one cold-cache call."""
    tasks = build_suite("lite", 0, 4)
    picked = [t for t in tasks if t.inputs == ("image",)][:2] + [t for t in tasks if t.inputs == ("text",)][:2]
    registry = build_lite_registry()
    pairs = [(t, p) for t in picked for p in enumerate_plans(registry, t.inputs, t.target, SUITE_LIMITS["lite"])
             if len(p.tools) <= 2]
    pairs += pairs[::3]  # repeats
    got = results(OpenAGIEnv(tasks=tasks, cache_bytes=0, registry=registry), pairs)
    want = results(OpenAGIEnv(tasks=tasks, cache_bytes=0, registry=registry, share_work=False), pairs)
    assert got == want
    assert len(pairs) > 30 and any(r["reward"] > 0 for r in got)


def merging_env(share_work: bool) -> OpenAGIEnv:
    """The toy env with two batch-invariant tools: Lower raises on a batch holding "boom", Tag returns
    None (no usable output) for "C"."""
    env = make_env(cache_bytes=0, share_work=share_work)

    def lower(xs):
        CALLS.append(("Lower", len(xs)))
        if "boom" in xs:
            raise RuntimeError("boom in batch")
        return [x.lower() for x in xs]

    def tag(xs):
        CALLS.append(("Tag", len(xs)))
        return [None if x == "C" else x + "!" for x in xs]
    env.registry.register("Lower", "text", "text", lower, batch_invariant=True)
    env.registry.register("Tag", "text", "text", tag, batch_invariant=True)
    return env


MERGED_PAIRS = [(0, "Tag"), (0, "Upper, Tag"), (2, "Tag"), (0, "Strip, Tag"), (0, "Tag, Upper"),
                (2, "Lower, Tag"), (0, "Lower, Tag"), (0, "Tag"), (1, "(Tag) (Lower) Join")]


def test_merged_requests_give_each_plans_own_results():
    alone = merging_env(False)
    want = results(alone, MERGED_PAIRS)
    CALLS.clear()
    env = merging_env(True)
    got = results(env, MERGED_PAIRS)
    assert got == want
    assert got[1]["sample_errors"][1] == "Tag returned None"
    assert got[5]["sample_errors"][1].startswith("Lower raised RuntimeError")
    assert {n: vars(env.registry.health(n)) for n in ("Tag", "Lower")} == {
        n: vars(alone.registry.health(n)) for n in ("Tag", "Lower")}
    # the linear plans' first tools merged: Tag on tasks 0 and 2's 3 + 3 samples, answering three
    # plans; Lower's merged call raises ("boom"), so each plan runs its own, isolating the sample.
    # Tag after a tool that is not batch-invariant (Upper, Strip) and in a branch: each plan's own
    tags = [c for c in CALLS if c[0] == "Tag"]
    assert CALLS[:2] == [("Tag", 6), ("Lower", 6)]
    assert tags == [("Tag", 6), ("Tag", 3), ("Tag", 3), ("Tag", 2), ("Tag", 3), ("Tag", 2)]


def test_tools_are_merged_only_when_batch_invariant():
    env = make_env(cache_bytes=0)
    env.reward_plans([(0, "Upper"), (2, "Upper")])
    assert CALLS == [("Upper", 3), ("Upper", 3)]
    lite = build_lite_registry()
    assert {t.name for t in lite if t.batch_invariant} == {
        "Image Super Resolution", "Image Denoising", "Image Deblurring", "Colorization"}
