"""Environment, executor and cache on a small registry of cheap tools defined here.

The lite zoo is tested in its own files; here the tools are trivial arithmetic on strings so the
mechanics (typing, caching, fault isolation, batching, determinism) are checked exactly.
"""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the env)
from envs.openagi import metrics
from envs.openagi.cache import ExecutionCache
from envs.openagi.env import OpenAGIEnv
from envs.openagi.executor import PlanExecutor
from envs.openagi.plans import LinearPlan, NonlinearPlan, PlanLimits, parse_plan
from envs.openagi.registry import ToolRegistry
from envs.openagi.tasks import Sample, Task

CALLS: list[tuple[str, int]] = []


def _tool(name, f):
    def fn(*batches):
        CALLS.append((name, len(batches[0])))
        return [f(*xs) for xs in zip(*batches)]
    return fn


def make_registry():
    reg = ToolRegistry()
    reg.register("Upper", "text", "text", _tool("Upper", str.upper))
    reg.register("Strip", "text", "text", _tool("Strip", lambda s: s.replace("#", "")))
    reg.register("Reverse", "text", "text", _tool("Reverse", lambda s: s[::-1]))
    reg.register("Join", ("text", "text"), "text", _tool("Join", lambda a, b: a + "+" + b))

    def flaky(xs):
        CALLS.append(("Flaky", len(xs)))
        if any("boom" in x for x in xs):
            raise RuntimeError("boom in batch")
        return xs
    reg.register("Flaky", "text", "text", flaky)
    return reg


@pytest.fixture(autouse=True)
def exact_metric(monkeypatch):
    monkeypatch.setitem(metrics.METRICS, "equal", lambda p, t: [float(a == b) for a, b in zip(p, t)])
    CALLS.clear()


def make_tasks():
    lin = Task(0, "Given hashed lower text, how to return the upper text step by step?", ("text",), "text",
               "equal", "toy", ((),), LinearPlan(("Upper",)))
    lin.samples = [Sample(f"t0/{i}", (s,), s.replace("#", "").upper()) for i, s in enumerate(["a#b", "c", "d#"])]
    non = Task(1, "Given two texts, how to join them step by step?", ("text", "text"), "text", "equal", "toy2",
               ((), ()), NonlinearPlan(((), ()), "Join"))
    non.samples = [Sample(f"t1/{i}", (a, b), (a + "+" + b).upper())
                   for i, (a, b) in enumerate([("x", "y"), ("p", "q")])]
    flaky = Task(2, "Given text, how to keep it step by step?", ("text",), "text", "equal", "toy",
                 ((),), LinearPlan(("Flaky",)))
    flaky.samples = [Sample(f"t2/{i}", (s,), s) for i, s in enumerate(["ok", "boom", "fine"])]
    return [lin, non, flaky]


def make_env(**kw):
    return OpenAGIEnv(registry=make_registry(), tasks=make_tasks(), limits=PlanLimits(3, 2, 2), **kw)


def test_step_scores_plans_and_invalid_plans_score_zero_with_reason():
    env = make_env()
    obs, info = env.reset(options={"task": 0})
    assert obs.startswith("Given hashed") and info["task_id"] == 0
    _, r, term, trunc, info = env.step("Strip, Upper")
    assert (r, term, trunc, info["valid"]) == (1.0, True, False, True)
    assert info["scores"] == [1.0, 1.0, 1.0]
    _, r, *_ , info = env.step("Upper")
    assert r == pytest.approx(1 / 3)
    for bad in ["Upper, Upper", "Nope", "(Upper) Join", "", "((("]:
        env.reset(options={"task": 0})
        _, r, _, _, info = env.step(bad)
        assert r == 0.0 and info["valid"] is False and info["error"]
    _, r, *_, info = env.step(object())  # not even a plan
    assert r == 0.0 and info["valid"] is False


def test_nonlinear_plans_get_each_input():
    env = make_env()
    env.reset(options={"task": 1})
    assert env.step("() () Join, Upper")[1] == 1.0
    assert env.step("(Upper) () Join")[1] == 0.0
    assert env.step(NonlinearPlan((("Upper",), ("Upper",)), "Join"))[1] == 1.0


def test_expert_fault_fails_only_its_sample():
    env = make_env()
    env.reset(options={"task": 2})
    _, r, *_, info = env.step("Flaky")
    assert info["scores"] == [1.0, 0.0, 1.0] and r == pytest.approx(2 / 3)
    assert info["sample_errors"][1].startswith("Flaky raised RuntimeError")
    assert info["sample_errors"][0] is None


def test_cache_reuses_shared_prefixes_and_counts():
    env = make_env()
    t = env.get_task(0)
    env.reward_plans([(t, "Strip, Upper"), (t, "Strip, Upper, Reverse"), (t, "Strip, Reverse")])
    # Strip computed once for the 3 samples; Upper once; Reverse twice (two different prefixes)
    assert [c for c in CALLS] == [("Strip", 3), ("Upper", 3), ("Reverse", 3), ("Reverse", 3)]
    s = env.cache_stats()
    assert s.hits == 3 * 3 and s.misses == 4 * 3 and s.entries == 4 * 3
    CALLS.clear()
    env.reward_plans([(t, "Strip, Upper, Reverse")])
    assert CALLS == []


def test_repeated_plans_are_scored_once_and_failures_retried(monkeypatch):
    scored: list[int] = []

    def counting(p, t):
        scored.append(len(p))
        return [float(a == b) for a, b in zip(p, t)]
    monkeypatch.setitem(metrics.METRICS, "equal", counting)
    env = make_env()
    # the K samples of one task in an RL step: the same plan, written two ways, four times
    results = env.reward_plans([(0, "Strip, Upper"), (0, "Strip,Upper"), (0, "Strip, Upper"), (0, "Upper")])
    assert [r.reward for r in results] == [1.0, 1.0, 1.0, pytest.approx(1 / 3)]
    assert [r.scores for r in results[:3]] == [[1.0] * 3] * 3
    assert scored == [3, 3]  # one metric call per distinct plan
    # a sample whose expert failed is not remembered: the next call runs it (and only it) again
    first = env.reward_plans([(2, "Flaky")])[0]
    CALLS.clear()
    again = env.reward_plans([(2, "Flaky")])[0]
    assert CALLS and all(call == ("Flaky", 1) for call in CALLS)
    assert again.scores == first.scores == [1.0, 0.0, 1.0]
    assert again.sample_errors[1].startswith("Flaky raised RuntimeError") and again.sample_errors[0] is None


def test_no_cache_recomputes_and_gives_the_same_rewards():
    a, b = make_env(), make_env(cache_bytes=0)
    pairs = [(0, "Strip, Upper"), (0, "Upper, Strip"), (1, "(Strip) (Upper) Join, Upper"), (2, "Flaky")] * 2
    assert [r.reward for r in a.reward_plans(pairs)] == [r.reward for r in b.reward_plans(pairs)]
    assert b.cache_stats() is None


def test_cache_is_bounded_by_bytes():
    c = ExecutionCache(max_bytes=1000)
    for i in range(100):
        c.put(i, np.zeros(10, dtype=np.float32))
    s = c.stats()
    assert s.bytes <= 1000 and s.evictions > 0 and len(c) == s.entries < 100
    assert 99 in c and 0 not in c


def test_subset_of_samples_is_seeded():
    env1, env2 = make_env(samples_per_step=2), make_env(samples_per_step=2)
    env1.reset(seed=3, options={"task": 0}), env2.reset(seed=3, options={"task": 0})
    a = [env1.step("Upper")[4]["scores"] for _ in range(5)]
    b = [env2.step("Upper")[4]["scores"] for _ in range(5)]
    assert a == b and all(len(x) == 2 for x in a)


def test_reset_picks_tasks_reproducibly_and_rejects_unknown_tasks():
    env = make_env()
    seq = [env.reset(seed=11)[1]["task_id"] if i == 0 else env.reset()[1]["task_id"] for i in range(10)]
    env2 = make_env()
    seq2 = [env2.reset(seed=11)[1]["task_id"] if i == 0 else env2.reset()[1]["task_id"] for i in range(10)]
    assert seq == seq2
    with pytest.raises(ValueError, match="unknown task 99"):
        env.reset(options={"task": 99})


def test_executor_direct():
    ex = PlanExecutor(make_registry(), None)
    out = ex.run(parse_plan("(Upper) (Reverse) Join"), [Sample("s", ("ab", "cd"), None)])
    assert out.outputs == ["AB+dc"] and out.errors == [None]


def test_gym_make_after_import_envs():
    env = gym.make("OpenAGI-Lite-v0", registry=make_registry(), tasks=make_tasks(), limits=PlanLimits(3, 2, 2))
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, str)
    _, r, term, _, info = env.step("not a plan")
    assert r == 0.0 and term and "unknown tool" in info["error"]
