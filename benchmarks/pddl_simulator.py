"""The pddl env's speed (issue #50 item 6): simulator action applications per CPU second on Blocksworld
(target >= 1e5), and what parsing and grounding a problem costs on Blocksworld and Logistics.

    python benchmarks/pddl_simulator.py [--blocks 5] [--seconds 2]

Applications: random walks from generated Blocksworld instances' initial states, one applicable action
after another, each applied by the simulator's rule (the bitset test ``state & pre == pre`` and the update
``(state & ~delete) | add``, :mod:`envs.pddl.simulator`); the count of applications over the CPU seconds
they took (``time.process_time``), choosing the walk's actions (an index into the state's applicable
list, drawn beforehand) included. :func:`envs.pddl.simulator.simulate` on whole plans is timed too
(plan texts parsed back to actions included). Parse + ground: the mean CPU seconds per problem over the
generated instances of each size, with the parser built already (importing and building it, once: ~0.7 s).
"""

from __future__ import annotations

import argparse
import random
import time

from envs.pddl.generators import blocksworld, logistics
from envs.pddl.grounding import ground
from envs.pddl.instances import shipped_domain
from envs.pddl.parsing import read_domain, read_problem
from envs.pddl.search import find_plan
from envs.pddl.simulator import simulate
from envs.pddl.writing import problem_text


def parse_and_ground(domain_name: str, generate, sizes, per_size: int = 20) -> list[str]:
    domain = read_domain(shipped_domain(domain_name))
    rng = random.Random(0)
    lines = []
    for size in sizes:
        texts = [problem_text(generate(domain, size, rng, f"p{k}"), "typing" in domain.requirements)
                 for k in range(per_size)]
        read_problem(domain, text=texts[0])  # the parser's tables built
        start = time.process_time()
        problems = [read_problem(domain, text=t) for t in texts]
        parsed = time.process_time()
        tasks = [ground(domain, p) for p in problems]
        done = time.process_time()
        lines.append(f"{domain_name:12s} size {size:2d}: parse {(parsed - start) / per_size * 1e3:6.2f} ms, ground "
                     f"{(done - parsed) / per_size * 1e3:6.2f} ms per problem ({len(tasks[0].actions)} ground "
                     f"actions, {len(tasks[0].atoms)} atoms)")
    return lines


def applications_per_second(blocks: int, seconds: float) -> tuple[float, int]:
    domain = read_domain(shipped_domain("blocksworld"))
    rng = random.Random(1)
    tasks = [ground(domain, blocksworld(domain, blocks, rng, f"p{k}")) for k in range(16)]
    draws = [rng.randrange(1 << 30) for _ in range(1 << 16)]
    applied, spent = 0, 0.0
    while spent < seconds:
        for task in tasks:
            actions = [task.actions[i] for i in task.relevant]
            start = time.process_time()
            state = task.init
            for d in draws[:4096]:
                ok = [a for a in actions if state & a.pre == a.pre and not state & a.neg]
                a = ok[d % len(ok)]
                state = (state & ~a.delete) | a.add
            spent += time.process_time() - start
            applied += 4096
    return applied / spent, applied


def plans_per_second(blocks: int) -> tuple[float, float]:
    domain = read_domain(shipped_domain("blocksworld"))
    rng = random.Random(2)
    tasks = [ground(domain, blocksworld(domain, blocks, rng, f"p{k}")) for k in range(32)]
    plans = [" ".join(find_plan(t).actions) for t in tasks]
    start = time.process_time()
    n = actions = 0
    while time.process_time() - start < 1.0:
        for t, p in zip(tasks, plans):
            actions += simulate(t, p).length
            n += 1
    spent = time.process_time() - start
    return n / spent, actions / spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    for line in parse_and_ground("blocksworld", blocksworld, (4, 5, 10, 15)):
        print(line)
    for line in parse_and_ground("logistics", logistics, (2, 4, 8)):
        print(line)
    rate, n = applications_per_second(args.blocks, args.seconds)
    print(f"blocksworld {args.blocks} blocks: {rate:,.0f} action applications per CPU second "
          f"(random walks, choosing among the applicable actions included; {n:,} applications)")
    plans, actions = plans_per_second(args.blocks)
    print(f"blocksworld {args.blocks} blocks: simulate() on plan texts: {plans:,.0f} plans, {actions:,.0f} actions "
          "per CPU second (parsing the text included)")


if __name__ == "__main__":
    main()
