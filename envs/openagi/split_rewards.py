"""A step's rewards computed by several processes together, each executing its own samples.

With several training processes each process samples plans for its own tasks, and executing them
was its own work too: the processes waited for the one whose tasks cost most (the lite suite's
summarisation task alone costs as much as ten image tasks). :func:`split_reward_plans` splits the
execution by *sample* instead: sample ``i`` of task ``t`` is executed by process ``(t + i) mod
processes`` (:func:`sample_owner`), for the plans of every process, so each process does about
half of every task's work, and a (task, sample) pair is still only ever executed and cached by one
process (the execution and score caches do not overlap).

One call, on every process at once (``exchange`` is an all-gather of Python objects):

1. each process draws its plans' sample subsets as :meth:`OpenAGIEnv.reward_plans` draws them
   (one subset per task, from ``rng``, in the order the tasks first appear) and checks its plans;
2. the (task, plan, subset) lists are exchanged; each process scores every plan on the samples of
   its subset that it owns (:meth:`OpenAGIEnv.reward_plans` on the task cut to those samples);
3. the per-sample scores and errors are exchanged; each process puts its own plans' results
   together: the scores in subset order and their mean, the reward :meth:`OpenAGIEnv.reward_plans`
   computes.

A sample's score is a pure function of (task, sample, plan), so the rewards are those of one
process scoring the plans itself; experts that batch samples give the same per-sample outputs
whatever the batch (tested for the batched image experts), except the MiniLM text similarity,
whose float32 embeddings move by ~1e-8 with the padding of the batch they were computed in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["cut_task", "drawn_samples", "sample_owner", "split_reward_plans"]


def sample_owner(task_id: int, sample_index: int, processes: int) -> int:
    """The process that executes sample ``sample_index`` of task ``task_id``."""
    return (task_id + sample_index) % processes


def split_reward_plans(env, pairs: Sequence[tuple[Any, Any]], rng: np.random.Generator,
                       exchange: Callable[[Any], list[Any]], process: int, processes: int) -> list:
    """:meth:`OpenAGIEnv.reward_plans` of this process's ``pairs`` with the execution shared by all
    ``processes`` (see the module docstring); every process calls it at the same time."""
    tasks = [env.get_task(t) for t, _ in pairs]
    subsets = drawn_samples(env, tasks, rng)  # task id -> the indices of the samples its plans are scored on
    # the plans checked (and formatted) here, on no sample: what an invalid plan's result is
    checked = env.reward_plans([(cut_task(task, []), plan) for task, (_, plan) in zip(tasks, pairs)])
    mine = [(task.id, plan, subsets[task.id] if r.valid else []) for task, (_, plan), r in zip(tasks, pairs, checked)]
    # per call (the env shares work between a call's plans: repeats, shared prefixes; one subset per
    # task in a call): (process, index, samples here, the task cut to them, plan) of each plan
    calls: list[tuple[dict, list]] = []  # per call: {task id: (own samples, the task cut to them)}, items
    for owner, items in enumerate(exchange(mine)):
        for j, (task_id, plan, subset) in enumerate(items):
            own = [i for i in subset if sample_owner(task_id, i, processes) == process]
            if not own:
                continue
            call = next((c for c in calls if c[0].get(task_id, (own,))[0] == own), None)
            if call is None:
                call = ({}, [])
                calls.append(call)
            cuts, work = call
            cut = cuts.setdefault(task_id, (own, cut_task(env.get_task(task_id), own)))[1]
            work.append((owner, j, own, cut, plan))
    scored = {}
    for _, work in calls:
        for (owner, j, own, _, _), r in zip(work, env.reward_plans([(task, plan) for *_, task, plan in work])):
            scored[(owner, j)] = (own, r.scores, r.sample_errors)
    parts = exchange(scored)
    results = []
    for j, ((task_id, _, subset), r) in enumerate(zip(mine, checked)):
        if not r.valid:
            results.append(r)
            continue
        score, error = {}, {}
        for part in parts:
            if (process, j) in part:
                own, values, errors = part[(process, j)]
                score.update(zip(own, values))
                error.update(zip(own, errors))
        scores = [score[i] for i in subset]
        reward = float(np.mean(scores)) if scores else 0.0
        results.append(dataclasses.replace(r, reward=reward if math.isfinite(reward) else 0.0, scores=scores,
                                           sample_errors=[error[i] for i in subset]))
    return results


def drawn_samples(env, tasks: Sequence[Any], rng: np.random.Generator | None) -> dict[int, list[int]]:
    """Task id -> the indices of the samples :meth:`OpenAGIEnv.reward_plans` scores the plans of
    ``tasks`` (one entry per plan) on, drawn from ``rng`` as it draws them: one subset per task, in
    the order the tasks first appear. The rewards of the plans on their tasks cut to these samples
    (:func:`cut_task`; no draw then) are those of ``reward_plans`` with ``rng``."""
    subsets: dict[int, list[int]] = {}
    for task in tasks:
        if task.id not in subsets:
            index = {s.uid: i for i, s in enumerate(task.samples)}
            subsets[task.id] = [index[s.uid] for s in env.samples_for(task, rng)]
    return subsets


def cut_task(task, indices: Sequence[int]):
    """``task`` holding only its samples ``indices`` (in that order): the env scores a plan on all of
    a task's samples when it has no more than ``samples_per_step``, without drawing."""
    return dataclasses.replace(task, samples=[task.samples[i] for i in indices])
