"""Two processes share a step's execution by sample (envs/openagi/split_rewards.py): each process's
results are those of scoring its own plans itself, and every (task, sample) is executed by one
process only. The processes are two threads here, each with its own env (its own caches), and an
exchange that all-gathers objects as torch.distributed's does."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from envs.openagi.factory import make_env
from envs.openagi.split_rewards import sample_owner
from tests.processes_worker import recording_samples

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONFIG = {"suite": "lite", "backend": "lite", "samples_per_step": 8}


class ThreadExchange:
    """All-gather of Python objects between ``n`` threads (one per process, in process order)."""

    def __init__(self, n: int):
        self.barrier, self.slots = threading.Barrier(n), [None] * n

    def of(self, process: int):
        def exchange(obj):
            self.slots[process] = obj
            self.barrier.wait()
            out = list(self.slots)
            self.barrier.wait()
            return out
        return exchange


def step_pairs(env, task_ids: list[int]) -> list:
    """A step's pairs for some tasks: each task's reference plan twice (a duplicate), a plan of the
    wrong signature where one exists (invalid), a free-text plan that does not parse."""
    tasks = [env.get_task(i) for i in task_ids]
    pairs = []
    for task in tasks:
        pairs += [(task, task.reference_plan), (task, task.reference_plan)]
        other = next((t for t in env.tasks() if (t.inputs, t.target) != (task.inputs, task.target)), None)
        pairs.append((task, other.reference_plan))
    pairs.append((tasks[0], "Image Denoising, No Such Tool"))
    return pairs


def test_split_execution_gives_each_process_its_own_results():
    shares = {0: [1, 8, 30, 36], 1: [5, 15, 31, 37, 14]}  # image, text and QA tasks, uneven counts
    reference_env = make_env(CONFIG, "train")
    expected = {p: reference_env.reward_plans(step_pairs(reference_env, ids), rng=np.random.default_rng([0, p]))
                for p, ids in shares.items()}

    envs = {p: make_env(CONFIG, "train") for p in shares}
    seen = {p: recording_samples(envs[p]) for p in shares}
    exchange, got, failed = ThreadExchange(2), {}, []

    def process(p):
        try:
            env = envs[p]
            got[p] = env.split_reward_plans(step_pairs(env, shares[p]), np.random.default_rng([0, p]),
                                            exchange.of(p), p, 2)
        except BaseException as exc:  # (a thread's failure would otherwise hang the other at the barrier)
            failed.append(exc)
            exchange.barrier.abort()

    threads = [threading.Thread(target=process, args=(p,)) for p in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed, failed
    for p in shares:
        assert len(got[p]) == len(expected[p])
        for mine, ref in zip(got[p], expected[p]):
            assert (mine.task_id, mine.plan_text, mine.valid, mine.error, mine.error_reason) == \
                   (ref.task_id, ref.plan_text, ref.valid, ref.error, ref.error_reason)
            assert mine.sample_errors == ref.sample_errors
            # MiniLM's float32 text embeddings move ~1e-8 with their batch's padding; the rest is exact
            np.testing.assert_allclose(mine.scores, ref.scores, rtol=1e-6, atol=0)
            np.testing.assert_allclose(mine.reward, ref.reward, rtol=1e-6, atol=0)
        assert any(r.valid and r.reward > 0 for r in got[p]) and any(not r.valid for r in got[p])
    # every executed (task, sample) ran on one process only, the process that owns it
    assert seen[0] and seen[1] and set(seen[0]).isdisjoint(seen[1])
    for p in shares:
        for task in envs[p].tasks():
            for i, s in enumerate(task.samples):
                if s.uid in seen[p]:
                    assert sample_owner(task.id, i, 2) == p
