"""The oracle is searched once per key and read back from disk (envs/openagi/oracle/{fingerprint,store}.py)."""

import json
import logging
import threading
import warnings

import pytest

from envs.openagi.env import OpenAGIEnv
from envs.openagi.oracle import OracleEntry, oracle_for_task, search_oracle, store
from envs.openagi.oracle.fingerprint import oracle_key
from envs.openagi.plans import LinearPlan, PlanLimits
from envs.openagi.registry import ToolRegistry
from envs.openagi.tasks import Sample, Task

LIMITS = PlanLimits(2, 1, 1)  # few plans per task: the lite experts on 2 samples search in ~0.1 s


@pytest.fixture(scope="module")
def env():
    return OpenAGIEnv(split="all", n_samples=2, limits=LIMITS)


@pytest.fixture
def searches(env, monkeypatch):
    """How many times the plans were executed (one ``reward_plans`` call per search)."""
    calls = []
    real = env.reward_plans
    monkeypatch.setattr(env, "reward_plans", lambda pairs, rng=None: calls.append(len(pairs)) or real(pairs, rng))
    return calls


@pytest.fixture(autouse=True)
def enabled(monkeypatch):
    monkeypatch.delenv(store.DISABLE_VARIABLE, raising=False)


def _task(env, i=0):
    return env.tasks()[i]


def test_a_hit_returns_the_searched_entry_without_searching(env, searches, tmp_path):
    task = _task(env)
    searched = oracle_for_task(env, task, cache_dir=tmp_path)
    assert searched == search_oracle(env, task) and searched.n_plans > 1
    assert len(list(tmp_path.glob("*.json"))) == 1
    searches.clear()
    again = oracle_for_task(env, task, cache_dir=tmp_path)
    assert again == searched and searches == []
    assert all(type(getattr(again, k)) is t for k, t in store.FIELDS.items())


def test_env_oracle_plans_reads_the_cache(env, searches, tmp_path, monkeypatch):
    monkeypatch.setattr(store, "default_dir", lambda: tmp_path / "oracle")
    tasks = [_task(env, 0), _task(env, 4)]
    first = env.oracle_plans(tasks)
    searches.clear()
    assert env.oracle_plans(tasks) == first and searches == []
    assert len(list((tmp_path / "oracle").glob("*.json"))) == 2


def test_a_changed_key_input_misses(env, tmp_path):
    task = _task(env)
    key = oracle_key(env, task, LIMITS)
    assert key == oracle_key(env, task, LIMITS)
    assert oracle_key(env, task, PlanLimits(3, 1, 1)) != key
    assert oracle_key(env, _task(env, 4), LIMITS) != key
    other_samples = OpenAGIEnv(split="all", n_samples=3, limits=LIMITS, registry=env.registry)
    assert oracle_key(other_samples, other_samples.get_task(task.id), LIMITS) != key
    other_seed = OpenAGIEnv(split="all", n_samples=2, data_seed=1, limits=LIMITS, registry=env.registry)
    assert oracle_key(other_seed, other_seed.get_task(task.id), LIMITS) != key
    fewer_tools = ToolRegistry([t for t in env.registry if t.name != "Image Deblurring"])
    assert oracle_key(OpenAGIEnv(tasks=env.tasks(), registry=fewer_tools, limits=LIMITS), task, LIMITS) != key
    # and the miss searches: a wider limit finds more plans than the entry kept for the narrow one
    narrow = oracle_for_task(env, task, cache_dir=tmp_path)
    wide = oracle_for_task(env, task, PlanLimits(3, 1, 1), cache_dir=tmp_path)
    assert wide.n_plans > narrow.n_plans and len(list(tmp_path.glob("*.json"))) == 2


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "edited score", "other key"])
def test_a_damaged_file_is_searched_again_and_rewritten(env, searches, tmp_path, damage, caplog):
    task = _task(env)
    searched = oracle_for_task(env, task, cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.json")
    good = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff garbage \x13" * 7)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        doc = json.loads(good)
        if damage == "edited score":
            doc["entry"]["oracle_score"] = 1.0
        else:
            doc["key"] = "0" * 64
        path.write_text(json.dumps(doc))
    searches.clear()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, logger=store.__name__):
        warnings.simplefilter("always")
        rebuilt = oracle_for_task(env, task, cache_dir=tmp_path)
    assert caught == []
    assert rebuilt == searched and searches  # searched again, the same entry
    assert "damaged" in caplog.text
    assert path.read_bytes() == good  # rewritten whole
    searches.clear()
    assert oracle_for_task(env, task, cache_dir=tmp_path) == searched and searches == []


def test_concurrent_writers_never_expose_a_partial_file(tmp_path, caplog):
    key = "ab" * 32
    fields = {"task_id": 3, "reference_plan": "A, B", "reference_score": 0.25, "oracle_plan": "A" * 5000,
              "oracle_score": 0.5, "n_plans": 12}
    seen, stop = [], threading.Event()

    def write():
        for _ in range(40):
            store.save(tmp_path, key, fields)

    def read():
        while not stop.is_set():
            seen.append(store.load(tmp_path, key))

    readers = [threading.Thread(target=read) for _ in range(2)]
    writers = [threading.Thread(target=write) for _ in range(4)]
    with caplog.at_level(logging.INFO, logger=store.__name__):
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join()
        stop.set()
        for t in readers:
            t.join()
    assert "damaged" not in caplog.text
    assert all(s is None or s == fields for s in seen)
    assert [p.name for p in tmp_path.iterdir()] == [f"{key}.json"]  # no temporary file left behind
    assert store.load(tmp_path, key) == fields


def test_what_the_key_cannot_describe_is_searched_every_time(env, tmp_path, monkeypatch):
    reg = ToolRegistry()
    reg.register("Upper", "text", "text", lambda xs: [x.upper() for x in xs])  # a test's lambda: not keyed
    toy = Task(0, "upper", ("text",), "text", "exact_match", "toy", ((),), LinearPlan(("Upper",)))
    toy.samples = [Sample("u/0", ("ab",), "AB")]
    toy_env = OpenAGIEnv(tasks=[toy], registry=reg, limits=LIMITS)
    assert oracle_key(toy_env, toy, LIMITS) is None
    assert oracle_for_task(toy_env, toy, cache_dir=tmp_path) == OracleEntry(0, "Upper", 1.0, "Upper", 1.0, 1)
    subset = OpenAGIEnv(split="all", n_samples=2, samples_per_step=1, limits=LIMITS, registry=env.registry)
    assert oracle_key(subset, subset.tasks()[0], LIMITS) is None  # scored on a drawn subset of the samples
    monkeypatch.setenv(store.DISABLE_VARIABLE, "0")
    oracle_for_task(env, _task(env), cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
