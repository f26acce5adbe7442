"""Benchmark (issue #24 item 2, "fixed work once"): what the oracle's disk cache and the travel grammar
memo save, the reference and the cached path measured in the same run, in CPU seconds.

* **oracle** -- the OpenAGI oracle (exhaustive search, :mod:`envs.openagi.oracle`) of the main job's
  held-out tasks (``configs/default.yaml``: the lite suite's test split): ``cold`` searches them
  (``search_oracle``, a fresh env: empty execution cache), ``cached`` reads them back
  (``oracle_for_task`` on another fresh env, from a temporary cache folder the first pass filled);
  the entries must be identical.
* **travel step** -- one flat RL step on ``--queries`` travel queries of 3 / 5 / 7 days under the
  embedded planner of ``benchmarks/decoding_travel.py`` (T5 d_model 128, default embedded settings): grammars,
  ``--k`` sampled plans per query, rewards, teacher-forced log-probabilities and backward. ``cold``:
  every grammar built (:func:`envs.travel.grammar.build_travel_grammar`, what each newly drawn query
  cost); ``reused``: the grammars from the env's memo (``env.grammar``: built once per query content,
  :mod:`envs.travel.grammar_memo`). Also the tokens per plan: the step should grow like them. The
  reused step is split into its phases (``sample``: constrained sampling, of which ``decoder`` is the
  model's own forward passes (encoder and decoder stacks, timed by forward hooks) and ``rows`` the
  KV-cache joins and drops of branch rows (:class:`constrained_decoding.kv_rows.RowBatch`);
  ``reward``; ``score+bwd``: teacher-forced log-probabilities and backward), and each phase's growth
  from the shortest to the longest plans is printed beside the tokens' growth.

    OMP_NUM_THREADS=1 python benchmarks/fixed_work.py [--oracle-tasks 0] [--queries 8] [--k 4] [--repeats 3]

The last line is ``oracle cold/cached: <ratio>; travel step cold/reused 3/5/7 days: <r>/<r>/<r>``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402

from benchmarks.decoding_travel import build_embedded, travel_tokenizer_texts  # noqa: E402
from constrained_decoding import kv_rows, plan_logprobs, sample_plans  # noqa: E402
from envs.openagi.env import OpenAGIEnv  # noqa: E402
from envs.openagi.oracle import oracle_for_task, search_oracle  # noqa: E402
from envs.openagi.oracle.fingerprint import code_fingerprint  # noqa: E402
from envs.openagi.split import load_split  # noqa: E402
from envs.travel import grammar_memo  # noqa: E402
from envs.travel.env import TravelPlannerEnv  # noqa: E402
from envs.travel.grammar import build_travel_grammar  # noqa: E402

TRAVEL_DAYS = (3, 5, 7)


def cpu_of(fn):
    """(result, CPU seconds of this process) of ``fn()``."""
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def oracle_section(n_tasks: int) -> float:
    test_ids = load_split("lite")["test"]
    test_ids = test_ids[:n_tasks] if n_tasks else test_ids

    def fresh_env():  # the held-out env of the default config: all 20 samples, its own execution cache
        return OpenAGIEnv(split="all", n_samples=20, data_seed=0)

    code_fingerprint()  # (once per process: not the per-task cost)
    env = fresh_env()
    cold, cold_s = cpu_of(lambda: [search_oracle(env, env.get_task(i)) for i in test_ids])
    with tempfile.TemporaryDirectory() as folder:
        env = fresh_env()
        first, first_s = cpu_of(lambda: [oracle_for_task(env, env.get_task(i), cache_dir=folder) for i in test_ids])
        env = fresh_env()
        cached, cached_s = cpu_of(lambda: [oracle_for_task(env, env.get_task(i), cache_dir=folder) for i in test_ids])
    if not cold == first == cached:
        raise SystemExit("the cached oracle differs from the searched one")
    ratio = cold_s / max(cached_s, 1e-9)
    print(f"oracle of {len(test_ids)} held-out tasks (lite suite, 20 samples each), CPU seconds:")
    print(f"  cold (searched)           {cold_s:8.2f}")
    print(f"  first cached run (search + write) {first_s:8.2f}")
    print(f"  cached (read back)        {cached_s:8.3f}   cold/cached {ratio:,.0f}x   identical entries: yes")
    return ratio


def travel_section(n_queries: int, k: int, repeats: int = 3) -> list[float]:
    env = TravelPlannerEnv("all")
    model, tok = build_embedded(travel_tokenizer_texts(env))
    print(f"\ntravel flat step: {n_queries} queries x {k} plans, embedded planner "
          f"({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params, vocab {len(tok)}), CPU seconds:")
    print(f"  {'days':>4} {'tokens/plan':>11} {'cold step':>10} {'(grammars)':>11} "
          f"{'reused step':>12} {'cold/reused':>12}")

    phases: dict[str, float] = {}
    timers = PhaseTimers(model, phases)

    def step(queries, grammars, seed):
        prompts = [q.query for q in queries]
        decoded, phases["sample"] = cpu_of(lambda: sample_plans(model, tok, prompts, grammars, k, 1.0, seed=seed))
        plans = [d for ds in decoded for d in ds]
        owners = [q for q, ds in zip(queries, decoded) for _ in ds]
        _, phases["reward"] = cpu_of(lambda: env.reward_plans([(q, d.plan) for q, d in zip(owners, plans)]))

        def score_and_backward():
            model.zero_grad()
            lp = plan_logprobs(model, tok, [q.query for q in owners], [d.grammar for d in plans], plans, 1.0)
            (-lp.mean()).backward()

        with timers.paused():  # the scoring forward is its own phase, not sampling's decoder
            _, phases["score+bwd"] = cpu_of(score_and_backward)
        return sum(len(r) for d in plans for r in d.rows) / len(plans)

    ratios, split = [], []
    for days in TRAVEL_DAYS:
        queries = [q for q in env.queries() if q.days == days][:n_queries]
        grammar_memo.clear()
        for q in queries:  # warm the decoder's per-grammar tables for the reused pass below
            env.grammar(tok, q)
        step(queries, [env.grammar(tok, q) for q in queries], seed=0)

        def cold():
            grammars = [build_travel_grammar(tok, env.candidates(q), env.max_attractions) for q in queries]
            return step(queries, grammars, seed=1)

        def grammars_only():
            return [build_travel_grammar(tok, env.candidates(q), env.max_attractions) for q in queries]

        _, grammar_s = cpu_of(grammars_only)
        rows, cold_s = cpu_of(cold)
        runs = []
        for _ in range(repeats):  # the median of each phase over repeats (the cores may be shared)
            timers.reset()
            _, reused_s = cpu_of(lambda: step(queries, [env.grammar(tok, q) for q in queries], seed=1))
            runs.append({"tokens": rows, "step": reused_s, **phases, **timers.totals})
        split.append({key: statistics.median(r[key] for r in runs) for key in runs[0]})
        reused_s = split[-1]["step"]
        ratios.append(cold_s / reused_s)
        print(f"  {days:>4} {rows:>11.1f} {cold_s:>10.2f} {grammar_s:>11.2f} {reused_s:>12.2f} {ratios[-1]:>11.2f}x")
    print_phase_growth(split)
    return ratios


class PhaseTimers:
    """CPU seconds inside the model's forward passes (encoder and decoder stacks, by forward hooks)
    and inside the KV-cache row joins and drops (``RowBatch.prepend`` / ``select``), summed until
    :meth:`reset`; :meth:`paused` leaves a block out."""

    def __init__(self, model, phases: dict[str, float]):
        self.totals = {"decoder": 0.0, "rows": 0.0}
        self._on, self._start = True, 0.0
        for stack in (model.get_encoder(), model.get_decoder()):
            stack.register_forward_pre_hook(lambda *_: self._begin())
            stack.register_forward_hook(lambda *_: self._end("decoder"))
        for name in ("prepend", "select"):
            self._wrap(kv_rows.RowBatch, name)

    def _begin(self) -> None:
        self._start = time.process_time()

    def _end(self, key: str) -> None:
        if self._on:
            self.totals[key] += time.process_time() - self._start

    def _wrap(self, cls, name: str) -> None:
        method = getattr(cls, name)
        timers = self

        def timed(batch, *args, **kwargs):
            t = time.process_time()
            out = method(batch, *args, **kwargs)
            if timers._on:
                timers.totals["rows"] += time.process_time() - t
            return out

        setattr(cls, name, timed)

    def reset(self) -> None:
        self.totals.update(decoder=0.0, rows=0.0)

    @contextlib.contextmanager
    def paused(self):
        self._on = False
        try:
            yield
        finally:
            self._on = True


def print_phase_growth(split: list[dict[str, float]]) -> None:
    """The reused step's phases per plan length, and each one's growth from the shortest plans to the
    longest against the tokens' growth."""
    keys = ("step", "sample", "decoder", "rows", "reward", "score+bwd")
    print("  reused step by phase, CPU s (sample = decoder forward + row joins/drops + the rest):")
    print(f"  {'tokens':>7} " + " ".join(f"{k:>10}" for k in keys))
    for row in split:
        print(f"  {row['tokens']:>7.1f} " + " ".join(f"{row[k]:>10.2f}" for k in keys))
    first, last = split[0], split[-1]
    print(f"  growth {TRAVEL_DAYS[0]} -> {TRAVEL_DAYS[-1]} days: tokens x{last['tokens'] / first['tokens']:.2f}; "
          + ", ".join(f"{k} x{last[k] / max(first[k], 1e-9):.2f}" for k in keys))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--oracle-tasks", type=int, default=0, help="held-out tasks whose oracle is measured (0: all)")
    p.add_argument("--queries", type=int, default=8, help="travel queries per step (rltf.tasks_per_batch)")
    p.add_argument("--k", type=int, default=4, help="plans sampled per query (rltf.k_samples)")
    p.add_argument("--repeats", type=int, default=3, help="reused travel steps per length (the median is printed)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    oracle = oracle_section(args.oracle_tasks)
    travel = travel_section(args.queries, args.k, args.repeats)
    print(f"oracle cold/cached: {oracle:,.0f}x; travel step cold/reused {'/'.join(map(str, TRAVEL_DAYS))} days: "
          + "/".join(f"{r:.2f}x" for r in travel))


if __name__ == "__main__":
    main()
