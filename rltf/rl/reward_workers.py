"""A step's rewards computed by worker processes while the learner scores the plans (``rltf.reward_workers``).

Executing the plans a step samples is most of a default RL step (OpenAGI-Lite: the lite tools and
the metrics, ~70% of its CPU), and the step's teacher-forced scoring forward (step 4 of
:meth:`rltf.rl.trainer.RLTFTrainer.train_step`) does not need the rewards. With ``rltf.reward_workers``
= N > 0, N worker processes execute the plans while the learner runs that forward (and the KL
reference's); the rewards are collected before the loss weights need them.

* **The same rewards, bit for bit.** The env's random draw (which of a task's samples its plans are
  scored on: ``draw.env_rng``) is made in the learner, exactly as the env's ``reward_plans`` makes it
  (``env.drawn_samples``); a worker scores each plan on its task cut to those samples
  (``env.cut_task``), which draws nothing. An env says whether it can (``env.reward_workers_unsupported``,
  :mod:`envs.protocol`: OpenAGI's lite backend can). Every task belongs to one worker for the whole run
  (the train tasks dealt round-robin), so a task's executions, cached expert outputs and cached
  scores live in one process and follow the same sequence of calls as in the learner; a (task,
  sample, plan) score depends on nothing else (sample uids are per task). What is process-wide
  rather than per task is kept by the caveats below.
* **Fork, after the env is built.** The workers are forked from the learner at its first step, so
  each holds an exact copy of the train env as it is then: registry (whatever tools a config or a
  test registered: they are closures, not picklable, so a spawned worker could only rebuild the
  env from its config), tasks, caches, loaded metric models. Fork once torch has run threads is safe
  here because the children never run a parallel region: the first thing a worker does is set torch's
  and the BLAS pools' threads to 1 (DataLoader workers' pattern), it never touches a GPU (the pool is
  for CPU experts: an env whose experts run on a GPU, OpenAGI's ``env.backend: hf``, refuses it), and it
  only calls the env.
* **Faults.** An expert that raises inside the env fails its samples as in the learner (the results
  carry the errors; the trainer's ``env.expert_failures`` warnings and ``train/expert_error_rate``
  see them). An exception that escapes the env in a worker, a worker that dies (killed, out of
  memory), or one that sends nothing back within ``rltf.reward_worker_timeout_s`` of being sent its
  plans (hung, stopped: it is then killed) stops the step with one line (:class:`RewardWorkerFailed`,
  exit status 2 from the CLI) naming the worker, the step, its tasks and the (task, plan) that raised
  (re-run alone to find it) or the plans it held, never a zero reward. The step stops before its
  update: nothing of it is written (no checkpoint, no history row), and ``resume=true`` continues
  from the last checkpoint. (Restarting the worker and rerunning its tasks was not chosen: a task's
  caches and the tool registry's failure record live in its worker, so a fresh worker would not
  give the in-process rewards bit for bit; a fault is rare enough to be worth a stop and a look.)
  The pool is closed at the end of :meth:`~rltf.rl.trainer.RLTFTrainer.train`, on its exceptions,
  and when the trainer is collected or the interpreter exits (the workers are daemons; one also
  exits when the learner's end of its pipe closes).
* **Several accelerate processes**: the pool is off (they already share the execution by sample:
  OpenAGI's ``env.split_reward_plans``); ``-1`` resolves to 0 and an explicit count is refused.

Caveats of "bit for bit" (OpenAGI's): the learner on one torch/BLAS thread (the workers run on one; float
sums of several threads may be ordered otherwise); no expert failures in a row (the tool registry's
record of a tool's failures is per process: with failures the retries may differ); MiniLM text
embeddings are cached per process by text, and one computed in another batch (another worker's task,
the learner's validation) may differ by ~1e-8 (OpenAGI's sharing of a step's execution between
processes has the same caveat).

``-1`` (the default) picks the count from the cores: 0 below :data:`AUTO_MIN_CORES` usable cores per
process, else ``min(AUTO_MAX, cores // 4)`` (a 16-core GPU machine: 4). Below 8 cores the default stays
in the learner: there the workers share the cores with the learner's threads (and a 2-core box's
other jobs), and the in-process path is the reference every test and fingerprint was recorded on,
which the caveats above could otherwise touch in the last bits; an explicit count uses workers on
any machine (``benchmarks/rl_step.py --reward-workers N`` times both).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait

import numpy as np

from common.errors import UserError
from envs.protocol import RLTFEnv

AUTO_MIN_CORES = 8
AUTO_MAX = 4
JOIN_S = 10.0  # how long a closing worker may take to exit before it is terminated
TIMEOUT_S = 600.0  # rltf.reward_worker_timeout_s's default: seconds a worker may take over one step's plans
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


class RewardWorkersError(UserError, ValueError):
    """An ``rltf.reward_workers`` count this run cannot use (one line, exit status 2 from the CLI)."""


class RewardWorkerFailed(UserError, RuntimeError):
    """A reward worker that raised, died or hung: the step stops (one line naming the worker, its
    tasks and plans; exit status 2 from the CLI); nothing of the step is written."""


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        return os.cpu_count() or 1


def resolve_workers(setting: int, env: RLTFEnv, num_processes: int, cores: int | None = None) -> int:
    """The pool size for ``rltf.reward_workers = setting`` on ``env`` (-1: from the cores; see the module
    docstring); an explicit count the run cannot use raises :class:`RewardWorkersError` naming why
    (several processes, the env's ``reward_workers_unsupported()``, no fork)."""
    if setting < -1:
        raise RewardWorkersError(f"rltf.reward_workers={setting}: expected -1 (from the cores), 0 (in the learner) "
                                 "or a count of workers")
    why = None
    if num_processes > 1:
        why = (f"{num_processes} processes share the execution by sample already (each its own part of every "
               "step's plans)")
    elif (unsupported := env.reward_workers_unsupported()) is not None:
        why = unsupported
    elif "fork" not in mp.get_all_start_methods():
        why = "this platform cannot fork the learner"
    if setting == -1:
        cores = (usable_cores() if cores is None else cores) // num_processes
        return 0 if why or cores < AUTO_MIN_CORES else min(AUTO_MAX, cores // 4)
    if setting > 0 and why:
        raise RewardWorkersError(f"rltf.reward_workers={setting}: {why}; set rltf.reward_workers=0")
    return setting


class RewardWorkers:
    """``workers`` forked processes executing ``env``'s plans, each for its own tasks (see the module
    docstring). :meth:`submit` a step's (task, plan) pairs, then call what it returns for their results."""

    def __init__(self, env, workers: int, timeout_s: float = TIMEOUT_S):
        if workers < 1:
            raise ValueError(f"{workers} reward workers: expected at least 1")
        if not timeout_s > 0:
            raise ValueError(f"reward worker timeout {timeout_s!r} s: expected a number of seconds > 0")
        self.env, self.workers, self.timeout_s = env, workers, float(timeout_s)
        self.owner = {tid: i % workers for i, tid in enumerate(env.task_ids)}  # a task's worker, for the run
        self.stats: list = [None] * workers  # each worker's cache stats after its last batch
        self.cpu_s = [0.0] * workers  # each worker's CPU seconds so far (its process_time)
        self._sent = 0  # batches sent: each reply echoes its batch's number (a stale reply is skipped)
        ctx = mp.get_context("fork")
        pipes = [ctx.Pipe(duplex=True) for _ in range(workers)]
        self.conns = [mine for mine, _ in pipes]
        self.procs = []
        try:
            for i, (_, theirs) in enumerate(pipes):
                p = ctx.Process(target=_serve, args=(theirs, env, self.conns), name=f"rltf-reward-{i}", daemon=True)
                p.start()
                self.procs.append(p)
        finally:
            for _, theirs in pipes:
                theirs.close()
        self._closer = weakref.finalize(self, _shutdown, self.procs, self.conns)

    def submit(self, pairs: Sequence[tuple], rng: np.random.Generator | None, step: int) -> Callable[[], list]:
        """Send step ``step``'s (task, plan) pairs to their tasks' workers, the env's draw of their
        sample subsets made here from ``rng``; returns the function that collects the results."""
        tasks = [self.env.get_task(t) for t, _ in pairs]
        subsets = self.env.drawn_samples(tasks, rng)
        items: list[list] = [[] for _ in range(self.workers)]
        for j, (task, (_, plan)) in enumerate(zip(tasks, pairs)):
            items[self.owner.get(task.id, task.id % self.workers)].append((j, task.id, plan))
        sent = []
        self._sent += 1
        deadline = time.monotonic() + self.timeout_s
        for w, mine in enumerate(items):
            if not mine:
                continue
            try:
                self.conns[w].send((self._sent, [(tid, subsets[tid], plan) for _, tid, plan in mine]))
            except (BrokenPipeError, ConnectionResetError, EOFError):
                raise self._died(w, step, mine) from None
            sent.append((w, mine))
        return lambda batch=self._sent: self._collect(sent, len(pairs), step, batch, deadline)

    def _collect(self, sent: list, n: int, step: int, batch: int, deadline: float) -> list:
        results: list = [None] * n
        for w, mine in sent:
            conn, proc = self.conns[w], self.procs[w]
            kind, number = None, -1
            while number < batch:  # (replies to batches sent but never collected: a step that raised)
                if not wait([conn, proc.sentinel], timeout=max(0.0, deadline - time.monotonic())):
                    raise self._hung(w, step, mine)
                try:
                    kind, number, payload, stats, cpu = conn.recv() if conn.poll() else (None, batch, None, None, None)
                except (EOFError, ConnectionResetError):
                    kind, number = None, batch
            if kind is None:
                raise self._died(w, step, mine)
            if kind == "error":
                self.close()
                raise RewardWorkerFailed(f"step {step}: reward worker {w} (pid {proc.pid}, tasks "
                                         f"{_task_list(mine)}) failed: {payload}; no reward of the step is used")
            self.stats[w], self.cpu_s[w] = stats, cpu
            for (j, _, _), r in zip(mine, payload, strict=True):
                results[j] = r
        return results

    def _died(self, w: int, step: int, mine: list) -> RewardWorkerFailed:
        proc = self.procs[w]
        proc.join(1.0)
        code = proc.exitcode
        how = (f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 and
               -code in signal.valid_signals() else f"died (exit code {code})")
        self.close()
        return RewardWorkerFailed(f"step {step}: reward worker {w} (pid {proc.pid}, tasks {_task_list(mine)}) {how} "
                                  f"executing {self._plans(mine)}; no reward of the step is used (resume=true "
                                  "continues from the last checkpoint)")

    def _hung(self, w: int, step: int, mine: list) -> RewardWorkerFailed:
        proc = self.procs[w]
        proc.kill()  # (SIGKILL ends a stopped process too)
        proc.join(5.0)
        self.close()
        return RewardWorkerFailed(
            f"step {step}: reward worker {w} (pid {proc.pid}, tasks {_task_list(mine)}) sent nothing back within "
            f"rltf.reward_worker_timeout_s={self.timeout_s:g} s executing {self._plans(mine)}: hung or stopped, "
            "so it was killed; no reward of the step is used (raise the timeout for slow experts; resume=true "
            "continues from the last checkpoint)")

    def _plans(self, mine: list) -> str:
        plans = "; ".join(f"task {tid}: {_plan_text(self.env, plan)}" for _, tid, plan in mine[:3])
        more = f" and {len(mine) - 3} more" if len(mine) > 3 else ""
        return f"{len(mine)} plan(s) ({plans}{more})"

    def cache_stats(self):
        """The execution caches' stats summed over the workers (None without a cache)."""
        parts = [s for s in self.stats if s is not None]
        if not parts:
            return self.env.cache_stats()
        total = type(parts[0])()
        for s in parts:
            for f in ("hits", "misses", "evictions", "entries", "bytes"):
                setattr(total, f, getattr(total, f) + getattr(s, f))
        return total

    def close(self) -> None:
        """Stop the workers (each finishes the batch it is on, then exits; terminated after
        :data:`JOIN_S` seconds). Idempotent."""
        self._closer()

    @property
    def alive(self) -> bool:
        return self._closer.alive


def _shutdown(procs: list, conns: list) -> None:
    for conn in conns:
        try:
            conn.send(None)
        except (OSError, EOFError, ValueError):
            pass
    deadline = time.monotonic() + JOIN_S
    for p, conn in zip(procs, conns):
        while p.is_alive() and time.monotonic() < deadline:  # read what it still sends (a reply never collected)
            try:
                if conn.poll(0.05):
                    conn.recv()
            except (OSError, EOFError):
                p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.terminate()
            p.join(2.0)
        if p.is_alive():
            p.kill()
            p.join()
    for conn in conns:
        conn.close()


# ------------------------------------------------------------------------------- in a worker
def _serve(conn, env, inherited: list) -> None:
    """A worker's loop: (batch number, [(task id, sample indices, plan)]) in, ("ok", batch number,
    results, cache stats, CPU seconds) or ("error", batch number, what raised, ...) out; None or the
    learner's end closing: exit."""
    for c in inherited:  # the learner's ends of every pipe: EOF here when the learner is gone
        c.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's to handle (it closes the pool)
    _one_thread()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            return
        if msg is None:
            return
        number, items = msg
        try:
            results = env.reward_plans(_pairs(env, items))
            reply = ("ok", number, results, env.cache_stats(), time.process_time())
        except BaseException as exc:  # noqa: BLE001  (a worker reports everything that escapes the env)
            reply = ("error", number, _culprit(env, items, exc), None, time.process_time())
        try:
            conn.send(reply)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            return
        except Exception as exc:  # (a result that does not pickle)
            conn.send(("error", number, f"its results could not be sent back: {type(exc).__name__}: {exc}", None, 0.0))


def _one_thread() -> None:
    """One thread for torch, the BLAS pools and what a library started later reads (this process only)."""
    os.environ.update(dict.fromkeys(THREAD_VARS, "1"))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    try:
        from threadpoolctl import threadpool_limits  # optional (scikit-learn's): only a worker limits BLAS

        threadpool_limits(1)
    except ImportError:  # (numpy's BLAS then keeps the threads OPENBLAS_NUM_THREADS gave it at import)
        pass


def _pairs(env, items: list) -> list:
    cuts: dict[int, object] = {}
    for tid, subset, _ in items:
        if tid not in cuts:
            cuts[tid] = env.cut_task(env.get_task(tid), subset)
    return [(cuts[tid], plan) for tid, _, plan in items]


def _culprit(env, items: list, exc: BaseException) -> str:
    """What raised: the first (task, plan) of ``items`` that raises executed alone, else all of them."""
    what = f"{type(exc).__name__}: {_clip(str(exc))}"
    for tid, subset, plan in items:
        try:
            env.reward_plans([(env.cut_task(env.get_task(tid), subset), plan)])
        except BaseException as alone:  # noqa: BLE001
            return (f"executing task {tid}'s plan {_plan_text(env, plan)!r} raised "
                    f"{type(alone).__name__}: {_clip(str(alone))}")
    tasks = sorted({tid for tid, _, _ in items})
    return f"executing the plans of tasks {tasks} together raised {what} (none raises alone)"


def _plan_text(env, plan) -> str:
    try:
        return env.format_plan(plan)
    except Exception:  # noqa: BLE001
        return repr(plan)


def _task_list(mine: list) -> str:
    """The task ids of a worker's (index, task id, plan) items, sorted, at most 10 named."""
    tids = sorted({tid for _, tid, _ in mine})
    return ", ".join(map(str, tids[:10])) + (f" and {len(tids) - 10} more" if len(tids) > 10 else "")


def _clip(text: str, chars: int = 300) -> str:
    """``text`` on one line, clipped (an exception's message may echo a huge input)."""
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return text if len(text) <= chars else text[:chars] + "..."

