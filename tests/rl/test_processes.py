"""Processes that scale: each process owns a fixed part of the train tasks (its execution cache holds
only its own) and evaluates its share of the held-out tasks, the results gathered on every process."""

import json

import numpy as np
import pytest

from rltf.rl.steps import draw_step, task_shard

IDS = [3, 5, 8, 13, 21, 34, 55, 89, 144]


def test_one_process_draws_what_it_always_drew():
    """The single-process draw is the one every earlier run made (the main job's numbers stay)."""
    for seed, step, n in ((0, 0, 8), (0, 7, 8), (3, 2, 4), (1, 5, 12)):  # n > len(IDS): with replacement
        rng = np.random.default_rng([seed, step])
        sample_seed = int(rng.integers(2**62))
        expected = rng.choice(IDS, size=n, replace=n > len(IDS)).tolist()
        draw = draw_step(seed, step, IDS, n)
        assert draw.task_ids == expected and draw.sample_seed == sample_seed


@pytest.mark.parametrize("world", [2, 3])
def test_each_process_draws_only_from_its_own_fixed_tasks(world):
    parts = [task_shard(IDS, p, world) for p in range(world)]
    assert sorted(t for part in parts for t in part) == sorted(IDS)  # the parts cover the tasks once
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    seen: list[set[int]] = [set() for _ in range(world)]
    for step in range(20):
        draws = [draw_step(0, step, IDS, 6, p, world) for p in range(world)]
        for p, d in enumerate(draws):
            assert len(d.task_ids) == 6 // world
            assert set(d.task_ids) <= set(parts[p])
            seen[p] |= set(d.task_ids)
            assert d.task_ids == draw_step(0, step, IDS, 6, p, world).task_ids  # a pure function
        assert len({d.sample_seed for d in draws}) == world  # each process its own sampler seed
    assert all(s.isdisjoint(o) for i, s in enumerate(seen) for o in seen[i + 1:])  # caches cannot overlap
    assert len(seen[0]) > 1  # and the draw still varies from step to step


def test_draws_differ_by_seed_and_step():
    assert draw_step(0, 1, IDS, 4, 1, 2).task_ids != draw_step(0, 2, IDS, 4, 1, 2).task_ids or \
        draw_step(0, 3, IDS, 4, 1, 2).task_ids != draw_step(0, 4, IDS, 4, 1, 2).task_ids
    assert [draw_step(0, s, IDS, 4, 0, 2).task_ids for s in range(5)] != \
        [draw_step(1, s, IDS, 4, 0, 2).task_ids for s in range(5)]


@pytest.mark.parametrize("args, message", [
    ((IDS, 5, 0, 2), "tasks_per_batch=5 must be divisible by the 2 processes"),
    ((IDS[:1], 2, 1, 2), "1 train task\\(s\\) for 2 processes"),
    ((IDS, 4, 2, 2), "process 2 of 2"),
])
def test_impossible_draws_are_one_clear_error(args, message):
    with pytest.raises(ValueError, match=message):
        draw_step(0, 0, *args)


def test_one_process_evaluates_every_task_itself():
    from rltf.evaluation.schemas import SchemaResult, by_process

    calls = []

    def share(rows):
        calls.append(rows)
        return SchemaResult("x", scores={10 + r: float(r) for r in rows})

    from tests.toy_env import toy_tasks

    tasks = toy_tasks()
    assert by_process("x", tasks, share).scores == {10: 0.0, 11: 1.0}
    assert calls == [[0, 1]]


@pytest.mark.slow
def test_two_processes_split_training_and_evaluation(tmp_path):
    """Two gloo processes: in training every sample is executed by one process only (the execution of
    the step's plans is shared by sample) and each process gets the rewards it would have computed
    alone; each evaluates half of the held-out tasks, and both end with the single process's
    evaluation results."""
    from accelerate import Accelerator

    from tests.processes_worker import evaluate_all, make_planner
    from tests.toy_env import toy_env
    from tests.two_processes import torchrun2

    torchrun2("tests/processes_worker.py", tmp_path)
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["world"] == r1["world"] == 2
    assert set(r0["train_executed"]).isdisjoint(r1["train_executed"])  # no sample executed by both
    assert r0["train_executed"] and r1["train_executed"]
    for r in (r0, r1):
        assert r["rewards"] == r["rewards_alone"] and any(x > 0 for x in r["rewards"])
    assert set(r0["eval_executed"]).isdisjoint(r1["eval_executed"])  # the evaluation was split
    assert r0["results"] == r1["results"]  # and gathered on both
    one = evaluate_all(make_planner(), toy_env(), Accelerator(cpu=True))
    assert r0["results"] == json.loads(json.dumps(one))  # the same as one process evaluating everything


class _TwoProcesses:
    """An accelerator stand-in for :func:`all_reduce_grads`: two processes whose mean is any
    elementwise function (here 0.5 x + 1), counting its collectives."""

    num_processes = 2

    def __init__(self):
        self.calls = 0

    def reduce(self, t, reduction):
        assert reduction == "mean"
        self.calls += 1
        return 0.5 * t + 1


def test_gradients_are_averaged_in_buckets_as_one_call_per_parameter_would(monkeypatch):
    import torch

    from rltf.run import distributed

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2), torch.nn.Linear(2, 2))
    model[1].weight.requires_grad_(False)
    model(torch.randn(5, 3)).sum().backward()
    model[2].bias.grad = None  # a parameter without a gradient on this process: zeros join the mean
    expected = {n: 0.5 * (p.grad if p.grad is not None else torch.zeros_like(p)) + 1
                for n, p in model.named_parameters() if p.requires_grad}
    monkeypatch.setattr(distributed, "GRAD_BUCKET_ELEMENTS", 10)  # buckets of 12 | 4 + 2 + 4 | 2 elements
    acc = _TwoProcesses()
    distributed.all_reduce_grads(acc, model)
    assert acc.calls == 3
    for n, p in model.named_parameters():
        if p.requires_grad:
            torch.testing.assert_close(p.grad, expected[n], rtol=0, atol=0)
        else:
            assert p.grad is None


class _ThreadPair:
    """An accelerator stand-in for one of two processes run as threads: ``reduce`` sums (or
    averages) the tensors both threads hand in, in process order, as a real all-reduce would."""

    num_processes = 2

    def __init__(self, index: int, shared: dict, barrier):
        self.process_index, self.shared, self.barrier = index, shared, barrier

    def reduce(self, t, reduction):
        self.shared[self.process_index] = t.clone()
        self.barrier.wait()
        total = self.shared[0] + self.shared[1]
        self.barrier.wait()
        return total if reduction == "sum" else total / 2


def test_row_sparse_gradients_are_averaged_exactly_as_dense_ones(monkeypatch):
    """A large gradient (a token embedding) is averaged over the rows some process touched only:
    every parameter's averaged gradient equals the plain mean of the two processes' gradients,
    bit for bit, rows neither touched included."""
    import threading

    import torch

    from rltf.run import distributed

    monkeypatch.setattr(distributed, "ROW_SPARSE_MIN_ROWS", 50)

    def model_with_grads(tokens):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(60, 4), torch.nn.Linear(4, 3))
        model(torch.tensor(tokens)).sum().backward()
        return model

    tokens = ([1, 5, 5, 9], [5, 17, 40])  # process 0 and 1 touch different rows, sharing row 5
    models = [model_with_grads(t) for t in tokens]
    expected = [(a.grad + b.grad) / 2 for a, b in zip(models[0].parameters(), models[1].parameters())]
    calls = [0, 0]
    shared, barrier = {}, threading.Barrier(2)

    def run(i):
        acc = _ThreadPair(i, shared, barrier)
        reduce = acc.reduce

        def counted(t, reduction):
            calls[i] += 1
            return reduce(t, reduction)

        acc.reduce = counted
        distributed.all_reduce_grads(acc, models[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [2, 2]  # the row flags, then one bucket
    for model in models:
        for p, want in zip(model.parameters(), expected):
            torch.testing.assert_close(p.grad, want, rtol=0, atol=0)
        touched = torch.nonzero(model[0].weight.grad.abs().sum(1)).flatten().tolist()
        assert touched == [1, 5, 9, 17, 40]
