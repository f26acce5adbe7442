"""How travel sampling grows with the plan's length (issue #39 item 4): ``sample_plans`` on travel
queries of 3, 5 and 7 days under the embedded planner of ``benchmarks/decoding_travel.py``.

Per trip length: tokens per plan and in all, row-steps (rows read by the decoder's passes, prefills
counted per token), CPU seconds of one call (the
median of ``--repeats``; ``time.process_time``), of which ``decoder`` is the model's own forward
passes (encoder and decoder stacks, by forward hooks) and ``rows`` the KV-cache row moves
(:class:`constrained_decoding.kv_rows.RowBatch` joins, drops and forks, and
:class:`constrained_decoding.slot_rows.SlotBatch`'s, its step's bookkeeping included); then each figure's growth
from the shortest plans to the longest beside the tokens' growth. Linear in tokens means the
call's growth equals the tokens'.

    OMP_NUM_THREADS=1 python benchmarks/decoding_growth.py [--queries 4] [--k 8] [--repeats 3]
    OMP_NUM_THREADS=1 python benchmarks/decoding_growth.py --queries 8 --k 1   # one plan per query

With several plans per query the plans of a short trip share rows (2 queries x 8 plans: 187 distinct
rows of 272 at 3 days, 557 of 624 at 7 days), and identical rows are decoded once: tokens
per plan then understate the short trips' work and the growth says more about the queries than about
the decoder. ``--k 1`` draws one plan per query, so every row a plan holds is decoded for it: there
tokens and row-steps grow alike and the call's growth against the tokens' is the decoder's own.

Both join paths are timed in the same run, taking turns (``--paths``): ``slot`` (joining rows go into
free slots of a :class:`~constrained_decoding.slot_rows.SlotBatch`, the default) and ``restack`` (every
join re-stacks the whole running cache, ``PlannerRunner(policy=DevicePolicy(slots=False))``). The last lines are
``slot/restack call: <r> / <r> / <r> (3/5/7 days)`` and per path ``travel sampling growth 3 -> 7 days
(<path>): tokens x<r>, call x<r>, per token x<r>``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.decoding_travel import TRAVEL_DAYS, build_embedded, travel_queries, travel_tokenizer_texts  # noqa: E402
from constrained_decoding import kv_rows, slot_rows  # noqa: E402
from constrained_decoding.decode import sample_plans  # noqa: E402
from constrained_decoding.device_policy import DevicePolicy  # noqa: E402
from constrained_decoding.runner import PlannerRunner  # noqa: E402
from envs.travel.env import TravelPlannerEnv  # noqa: E402

PATHS = ("slot", "restack")
ROW_MOVES = {  # the methods that move cache rows (those that exist), per class
    "RowBatch": ("prepend", "select", "fork"),
    "SlotBatch": ("__init__", "join", "select", "fork", "advance"),
}


class Timers:
    """CPU seconds inside the model's forward passes and inside RowBatch's row moves."""

    def __init__(self, model):
        self.totals = {"decoder": 0.0, "rows": 0.0, "row-steps": 0}
        self._start = 0.0
        model.get_decoder().register_forward_pre_hook(self._count, with_kwargs=True)
        for stack in (model.get_encoder(), model.get_decoder()):
            stack.register_forward_pre_hook(lambda *_: self._begin())
            stack.register_forward_hook(lambda *_: self._end())
        for module in (kv_rows, slot_rows):
            for cls_name, names in ROW_MOVES.items():
                cls = getattr(module, cls_name, None)
                for name in names if cls is not None and cls.__module__ == module.__name__ else ():
                    self._wrap(cls, name)

    def _count(self, _module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        shape = (kwargs["inputs_embeds"] if ids is None else ids).shape
        self.totals["row-steps"] += shape[0] * shape[1]

    def _begin(self) -> None:
        self._start = time.process_time()

    def _end(self) -> None:
        self.totals["decoder"] += time.process_time() - self._start

    def _wrap(self, cls, name: str) -> None:
        method = getattr(cls, name)
        totals = self.totals

        def timed(*args, **kwargs):
            t = time.process_time()
            out = method(*args, **kwargs)
            totals["rows"] += time.process_time() - t
            return out

        setattr(cls, name, timed)


@contextlib.contextmanager
def runner_path(slot_cache: bool):
    """Every PlannerRunner made inside takes slots (``slot_cache``) or re-stacks at every join."""
    init = PlannerRunner.__init__
    PlannerRunner.__init__ = functools.partialmethod(init, policy=DevicePolicy(slots=slot_cache))
    try:
        yield
    finally:
        PlannerRunner.__init__ = init


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=4, help="travel queries per trip length")
    p.add_argument("--k", type=int, default=8, help="plans sampled per query")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS),
                   help="slot: joins into a SlotBatch (the default); restack: every join re-stacks the cache")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    env = TravelPlannerEnv("all")
    model, tok = build_embedded(travel_tokenizer_texts(env))
    timers = Timers(model)
    print(f"travel sampling, {args.queries} queries x {args.k} plans, embedded planner; CPU s per call "
          f"(median of {args.repeats}, the paths taking turns)")
    tables: dict[str, list[dict[str, float]]] = {path: [] for path in args.paths}
    for days in TRAVEL_DAYS:
        qs = travel_queries(env, days, args.queries)
        prompts, grammars = [q.query for q in qs], [env.grammar(tok, q) for q in qs]
        sample_plans(model, tok, prompts, grammars, args.k, seed=0)  # warm: state tables
        runs: dict[str, list[dict[str, float]]] = {path: [] for path in args.paths}
        for _ in range(args.repeats):
            for path in args.paths:
                timers.totals.update({"decoder": 0.0, "rows": 0.0, "row-steps": 0})
                with runner_path(path == "slot"):
                    t = time.process_time()
                    out = sample_plans(model, tok, prompts, grammars, args.k, seed=0)
                    runs[path].append({"call": time.process_time() - t, **timers.totals})
        plans = [d for ds in out for d in ds]
        for path in args.paths:
            row = {k: statistics.median(r[k] for r in runs[path]) for k in runs[path][0]}
            row["tokens"] = sum(len(r) for d in plans for r in d.rows) / len(plans)
            row["plans"] = len(plans)
            tables[path].append(row)
    for path, table in tables.items():
        print(f"\n{path}:")
        print(f"  {'days':>4} {'tokens/plan':>11} {'row-steps':>10} {'call s':>8} {'decoder s':>10} "
              f"{'rows s':>8} {'us/token':>9} {'us/row-step':>12}")
        for days, row in zip(TRAVEL_DAYS, table):
            per_token = 1e6 * row["call"] / (row["tokens"] * row["plans"])
            print(f"  {days:>4} {row['tokens']:>11.1f} {row['row-steps']:>10.0f} {row['call']:>8.3f} "
                  f"{row['decoder']:>10.3f} {row['rows']:>8.3f} {per_token:>9.1f} "
                  f"{1e6 * row['call'] / row['row-steps']:>12.1f}")
        first, last = table[0], table[-1]
        growth = {k: last[k] / max(first[k], 1e-9) for k in ("tokens", "row-steps", "call", "decoder", "rows")}
        print(f"  growth {TRAVEL_DAYS[0]} -> {TRAVEL_DAYS[-1]} days: "
              + ", ".join(f"{k} x{v:.2f}" for k, v in growth.items()))
    if len(tables) == 2:
        ratios = [a["call"] / b["call"] for a, b in zip(tables["slot"], tables["restack"])]
        days = "/".join(map(str, TRAVEL_DAYS))
        print("slot/restack call: " + " / ".join(f"{r:.2f}" for r in ratios) + f" ({days} days)")
    for path, table in tables.items():
        g_tok, g_call = table[-1]["tokens"] / table[0]["tokens"], table[-1]["call"] / table[0]["call"]
        print(f"travel sampling growth {TRAVEL_DAYS[0]} -> {TRAVEL_DAYS[-1]} days ({path}): tokens x{g_tok:.2f}, "
              f"call x{g_call:.2f}, per token x{g_call / g_tok:.2f}")


if __name__ == "__main__":
    main()
