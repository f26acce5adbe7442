"""rltf.reward_workers (rltf/rl/reward_workers.py): the plans executed by worker processes while the
learner scores them give the same rewards and parameters bit for bit; an expert that raises or a
worker that dies surfaces naming the plan; the workers stop with the run (no orphan processes)."""

import multiprocessing as mp
import os
import warnings

import numpy as np
import pytest
import torch
from accelerate import Accelerator

from envs.openagi.plans import enumerate_plans
from envs.openagi.registry import TEXT
from rltf.rl.reward_workers import AUTO_MIN_CORES, RewardWorkers, resolve_workers
from rltf.rl.trainer import RLTFTrainer
from tests.envs.test_third_env import SortEnv
from tests.rl.test_rltf import make_cfg, make_planner
from tests.toy_env import toy_env

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="the reward workers fork")


def _ours() -> list:
    return [p for p in mp.active_children() if p.name.startswith("rltf-reward-")]


def _train(tmp_path, workers: int, steps: int = 4, env=None, **env_kw):
    """``steps`` RL steps of the tiny job (toy env, tiny T5): each step's rewards and env row, and the
    parameters after them."""
    cfg = make_cfg(tmp_path / f"w{workers}", f"rltf.reward_workers={workers}", "rltf.checkpoint_every=0")
    planner = make_planner()
    trainer = RLTFTrainer(cfg, planner, env if env is not None else toy_env(samples_per_step=2, **env_kw),
                          Accelerator(cpu=True))
    rows, rewards = [], []
    try:
        for _ in range(steps):
            row = trainer.train_step()
            rows.append({k: v for k, v in row.items() if k != "train/plans_per_s"})
            rewards.append(trainer.last_batch.rewards.copy())
    finally:
        trainer.close()
    return rows, rewards, {k: v.detach().clone() for k, v in planner.model.state_dict().items()}


def test_workers_give_the_same_rewards_and_parameters_bit_for_bit(tmp_path):
    rows0, rewards0, params0 = _train(tmp_path, 0)
    rows2, rewards2, params2 = _train(tmp_path, 2)
    assert not _ours()  # closed: no worker left
    for r0, r2 in zip(rewards0, rewards2, strict=True):
        assert r0.tobytes() == r2.tobytes()
    assert any(len(set(r.tolist())) > 1 for r in rewards0)  # plans of different rewards: updates that move
    assert rows0 == rows2  # every metric, bit for bit (the cache's hit rate summed over the workers)
    assert rows0[-1]["train/cache_hit_rate"] > 0
    assert params0.keys() == params2.keys()
    for k in params0:
        assert torch.equal(params0[k], params2[k]), k


def test_train_closes_the_pool_at_its_end(tmp_path):
    cfg = make_cfg(tmp_path, "rltf.reward_workers=2", "rltf.steps=2", "rltf.checkpoint_every=0")
    trainer = RLTFTrainer(cfg, make_planner(), toy_env(samples_per_step=2), Accelerator(cpu=True))
    pids = []
    real_step = trainer.train_step

    def step():
        row = real_step()
        pids.extend(p.pid for p in trainer._pool.procs)
        assert all(p.is_alive() for p in trainer._pool.procs)  # one pool for the run, not one per step
        return row

    trainer.train_step = step
    trainer.train()
    assert trainer.step == 2 and len(set(pids)) == 2
    assert not trainer._pool.alive and not _ours()
    assert all(not os.path.exists(f"/proc/{pid}") for pid in pids)  # exited and reaped: no orphan, no zombie


def test_pool_matches_reward_plans_on_the_real_lite_experts():
    """The OpenAGI-Lite experts and metrics (images, text, MiniLM) over three rounds of plans of every
    train task: the workers' results are the in-process env's, draw and caches included."""
    envs = pytest.importorskip("envs")
    a, _ = envs.make_train_and_held_out({"samples_per_step": 3, "n_samples": 6})
    b, _ = envs.make_train_and_held_out({"samples_per_step": 3, "n_samples": 6})
    pool = RewardWorkers(b, 2)
    try:
        for round_ in range(3):
            pairs = []
            for t in a.tasks():
                plans = list(enumerate_plans(a.registry, t.inputs, t.target, a.limits))
                pairs += [(t, plans[(round_ * 3 + i) % len(plans)]) for i in range(2)]
            want = a.reward_plans(pairs, rng=np.random.default_rng(round_))
            got = pool.submit(pairs, np.random.default_rng(round_), round_ + 1)()
            assert [(r.task_id, r.plan_text, r.valid, r.scores, r.sample_errors) for r in got] == \
                [(r.task_id, r.plan_text, r.valid, r.scores, r.sample_errors) for r in want]
            assert np.array([r.reward for r in got]).tobytes() == np.array([r.reward for r in want]).tobytes()
        assert pool.cache_stats().hits == a.cache_stats().hits > 0
        assert pool.cache_stats().misses == a.cache_stats().misses
        assert all(c > 0 for c in pool.cpu_s)
    finally:
        pool.close()
    assert not pool.alive and not _ours()


def _raising_env(how: str):
    env = toy_env(samples_per_step=2)

    def fill(xs):
        if how == "exception":
            raise ValueError("the fill expert broke")
        if how == "escape":  # not an Exception: the env does not catch it
            raise SystemExit("the fill expert left")
        os._exit(9)  # how == "die"

    env.registry.register("Fill Mask", TEXT, TEXT, fill, replace=True)
    return env


def test_an_expert_that_raises_is_reported_as_in_the_learner(tmp_path):
    """Caught by the env (the sample fails, reward 0): the trainer's warning and error rate see it,
    the same with workers as without."""
    seen = {}
    for workers in (0, 2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows, rewards, _ = _train(tmp_path, workers, steps=1, env=_raising_env("exception"))
        seen[workers] = (rows, [r.tobytes() for r in rewards], sorted(str(w.message) for w in caught
                                                                    if "Fill Mask" in str(w.message)))
    assert seen[0] == seen[2]
    assert seen[2][0][0]["train/expert_error_rate"] > 0
    assert seen[2][2] and "the fill expert broke" in seen[2][2][0]


@pytest.mark.parametrize("how, said", [("escape", "SystemExit: the fill expert left"),
                                       ("die", "died (exit code 9)")])
def test_a_worker_that_raises_or_dies_stops_the_step_naming_the_plan(tmp_path, how, said):
    cfg = make_cfg(tmp_path, "rltf.reward_workers=2", "rltf.k_samples=4", "rltf.steps=3", "rltf.checkpoint_every=0")
    trainer = RLTFTrainer(cfg, make_planner(), _raising_env(how), Accelerator(cpu=True))
    with pytest.raises(RuntimeError) as err:
        trainer.train()
    message = str(err.value)
    assert "step 1: reward worker" in message and said in message and "Fill Mask" in message
    assert "\n" not in message
    assert not trainer._pool.alive and not _ours()  # every worker stopped, the dead one reaped


def test_resolve_workers():
    env = toy_env()
    assert resolve_workers(0, env, 1) == 0 and resolve_workers(3, env, 1) == 3
    assert resolve_workers(-1, env, 1, cores=2) == 0  # the 2-core default: in the learner
    assert resolve_workers(-1, env, 1, cores=AUTO_MIN_CORES) == AUTO_MIN_CORES // 4
    assert resolve_workers(-1, env, 1, cores=64) == 4
    assert resolve_workers(-1, env, 2, cores=16) == 0  # several processes: off
    with pytest.raises(ValueError, match=r"rltf.reward_workers=2: 2 processes share the execution"):
        resolve_workers(2, env, 2)
    # the env says why it cannot: its experts on a GPU (OpenAGI's hf backend) ...
    with pytest.raises(ValueError, match=r"rltf.reward_workers=1: env.backend=hf"):
        resolve_workers(1, toy_env(backend="hf"), 1)
    assert resolve_workers(-1, toy_env(backend="hf"), 1, cores=64) == 0
    # ... or no sample subsets to replay (the base class's answer: the travel sandbox's)
    sorting = SortEnv(0, [0, 1])
    with pytest.raises(ValueError, match=r"rltf.reward_workers=1: the SortEnv env does not draw"):
        resolve_workers(1, sorting, 1)


def test_a_worker_runs_torch_and_blas_on_one_thread(monkeypatch):
    """Whatever the learner uses (two threads here), a worker's torch and BLAS pools run one."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    env = toy_env()

    def report(xs):  # the worker's thread counts, carried out by the error a worker reports
        blas = {p["num_threads"] for p in threadpoolctl.threadpool_info()}
        omp = os.environ["OMP_NUM_THREADS"]
        raise SystemExit(f"threads torch={torch.get_num_threads()} blas={sorted(blas)} omp={omp}")

    env.registry.register("Fill Mask", TEXT, TEXT, report, replace=True)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        pool = RewardWorkers(env, 1)
        plan = next(p for p in enumerate_plans(env.registry, env.tasks()[0].inputs, env.tasks()[0].target, env.limits)
                    if "Fill Mask" in env.format_plan(p))
        with pytest.raises(RuntimeError, match=r"threads torch=1 blas=\[1\] omp=1"):
            pool.submit([(env.tasks()[0], plan)], None, 1)()
        assert torch.get_num_threads() == 2  # the learner's own setting is untouched
    finally:
        torch.set_num_threads(before)
    assert not pool.alive and not _ours()
