"""Benchmark: the execution cache on the RL workload (many plans sharing prefixes, repeated).

Scores every valid plan of every train task ``--repeats`` times, once with the (sample, plan
prefix) cache and once without, on the same data and experts, and prints the ratio. Learned
experts and the metric model are warmed up first so neither run pays for training or loading.

    python benchmarks/env_cache.py [--n-samples 8] [--repeats 2] [--split train]

Last line: ``cache speedup: <ratio>x``.
"""

from __future__ import annotations

import argparse
import time

from envs.openagi.env import OpenAGIEnv
from envs.openagi.lite import build_lite_registry
from envs.openagi.plans import enumerate_plans


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-samples", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--split", default="train")
    args = p.parse_args(argv)

    registry = build_lite_registry()
    make = lambda cache_bytes: OpenAGIEnv(split=args.split, n_samples=args.n_samples,  # noqa: E731
                                          registry=registry, cache_bytes=cache_bytes)
    warm = make(0)
    warm.reward_plans([(t, t.reference_plan) for t in warm.tasks()])  # train/load experts and metrics
    pairs = [(t, plan) for t in warm.tasks() for plan in enumerate_plans(registry, t.inputs, t.target, warm.limits)]
    print(f"{len(warm.tasks())} {args.split} tasks, {len(pairs)} valid plans, {args.n_samples} samples each, "
          f"{args.repeats} passes")

    timings = {}
    for name, cache_bytes in (("cached", 1 << 30), ("uncached", 0)):
        env = make(cache_bytes)
        t0 = time.perf_counter()
        rewards = []
        for _ in range(args.repeats):
            rewards = [r.reward for r in env.reward_plans(pairs)]
        timings[name] = time.perf_counter() - t0
        stats = env.cache_stats()
        extra = (f", hit rate {stats.hit_rate:.1%}, {stats.entries} entries, {stats.bytes / 2**20:.1f} MiB"
                 if stats else "")
        print(f"{name:9s} {timings[name]:8.2f}s  {len(pairs) * args.repeats / timings[name]:8.1f} plans/s  "
              f"{env.executor.tool_calls} batched expert calls{extra}  mean reward {sum(rewards) / len(rewards):.4f}")
    print(f"cache speedup: {timings['uncached'] / timings['cached']:.1f}x")


if __name__ == "__main__":
    main()
