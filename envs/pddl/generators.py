"""Seeded instance generators of the domains the env ships (:data:`GENERATORS`, by domain file name).

**Blocksworld** draws the initial state and the goal state each uniformly among all states of ``n`` blocks
with the arm empty, as Slaney and Thiébaux's ``bwstates`` does ("Blocks World revisited", AIJ 125, 2001):
with ``g(n, k)`` the number of ways to finish a partial state of ``n`` ungrounded towers over ``k``
grounded ones (``g(0, k) = 1``, ``g(n, k) = g(n-1, k+1) + (n-1+k) g(n-1, k)``), one ungrounded tower at a
time goes onto the table with probability ``g(n-1, k+1) / g(n, k)``, else onto the top of one of the other
``n-1+k`` towers, each equally likely: every state has probability ``1 / g(n, 0)``. The goal lists the
goal state's ``on`` atoms (as the IPC / PlanBench generator writes it); a pair whose goal is empty or
already true is drawn again.

**Logistics** follows the IPC generator's parameters (``-a`` airplanes, ``-c`` cities, ``-s`` city size,
``-p`` packages): every city has ``s`` locations, the first an airport, and one truck at a random location
of it; airplanes start at random airports; each package starts and must end at a random location (drawn
again when all packages start where they must end). The size of an instance is its package count.

**Depots** follows the IPC 2002 generator's parameters (``-e`` depots, ``-i`` distributors, ``-t`` trucks,
``-p`` pallets, ``-h`` hoists, ``-c`` crates) and its draws: pallets and hoists number at least one per place,
the first of each at every place in turn and the rest at random places; trucks start at random places;
each crate goes onto the top of a random pallet's stack. The goal draws ``2c`` times a random crate and,
the first time a crate is drawn, puts it onto the top of a random pallet's goal stack, so some crates
have no goal. A goal that is empty or already true is drawn again (the IPC generator keeps it). The size
of an instance is its crate count.

Every draw comes from one ``random.Random(seed)`` (exact big integers for the state counts), so an instance
is a function of its generator, size and seed.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable

from envs.pddl.model import Domain, Literal, Problem


@functools.cache
def tower_completions(n: int, k: int) -> int:
    """``g(n, k)``: the states that complete ``n`` ungrounded towers over ``k`` grounded ones."""
    if n == 0:
        return 1
    return tower_completions(n - 1, k + 1) + (n - 1 + k) * tower_completions(n - 1, k)


def random_towers(n: int, rng: random.Random) -> list[list[int]]:
    """A uniformly drawn blocks-world state of blocks ``0..n-1``: towers listed bottom to top."""
    ungrounded = [[b] for b in range(n)]
    grounded: list[list[int]] = []
    while ungrounded:
        tower = ungrounded.pop()
        m, k = len(ungrounded) + 1, len(grounded)
        if rng.randrange(tower_completions(m, k)) < tower_completions(m - 1, k + 1):
            grounded.append(tower)
            continue
        j = rng.randrange(m - 1 + k)  # the other towers, equally likely
        host = ungrounded[j] if j < m - 1 else grounded[j - (m - 1)]
        host.extend(tower)  # the tower's bottom goes onto the host's top
    return grounded


def _blocks_atoms(towers: list[list[int]], names: list[str]) -> set[tuple[str, ...]]:
    atoms = {("arm-empty",)}
    for tower in towers:
        atoms.add(("on-table", names[tower[0]]))
        atoms.add(("clear", names[tower[-1]]))
        atoms |= {("on", names[up], names[down]) for down, up in zip(tower, tower[1:])}
    return atoms


def block_names(n: int) -> list[str]:
    """``a`` .. ``z``, then ``b27`` ...: short names (one token each in most vocabularies)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [letters[i] if i < 26 else f"b{i + 1}" for i in range(n)]


def blocksworld(domain: Domain, size: int, rng: random.Random, name: str) -> Problem:
    names = block_names(size)
    while True:
        init = _blocks_atoms(random_towers(size, rng), names)
        goal = sorted(a for a in _blocks_atoms(random_towers(size, rng), names) if a[0] == "on")
        if goal and not set(goal) <= init:
            break
    return Problem(name, domain.name, {n: "object" if "typing" not in domain.requirements else "block" for n in names},
                   frozenset(init), tuple(Literal(a[0], a[1:]) for a in goal))


LOGISTICS_DEFAULTS = {"airplanes": 1, "cities": 2, "city_size": 2}


def logistics(domain: Domain, size: int, rng: random.Random, name: str, airplanes: int = 1, cities: int = 2,
              city_size: int = 2) -> Problem:
    objects: dict[str, str] = {}
    init: set[tuple[str, ...]] = set()
    locations: list[str] = []
    airports: list[str] = []
    for c in range(cities):
        city = f"c{c}"
        objects[city] = "city"
        for s in range(city_size):
            loc = f"l{c}-{s}"
            objects[loc] = "airport" if s == 0 else "location"
            (airports if s == 0 else locations).append(loc)
            init.add(("in-city", loc, city))
    every_loc = [x for x in objects if objects[x] in ("airport", "location")]
    for c in range(cities):
        truck = f"t{c}"
        objects[truck] = "truck"
        init.add(("at", truck, f"l{c}-{rng.randrange(city_size)}"))
    for a in range(airplanes):
        objects[f"a{a}"] = "airplane"
        init.add(("at", f"a{a}", rng.choice(airports)))
    packages = [f"p{i}" for i in range(size)]
    for p in packages:
        objects[p] = "package"
    while True:
        start = [rng.choice(every_loc) for _ in packages]
        end = [rng.choice(every_loc) for _ in packages]
        if start != end:
            break
    init |= {("at", p, s) for p, s in zip(packages, start)}
    goal = tuple(Literal("at", (p, e)) for p, e in zip(packages, end))
    return Problem(name, domain.name, objects, frozenset(init), goal)


DEPOTS_DEFAULTS = {"depots": 1, "distributors": 2, "trucks": 2, "pallets": 3, "hoists": 3}
"""The IPC 2002 set's smallest problem (pfile1: ``depot-1-2-2-3-3-2``, its size 2 crates)."""


def depots(domain: Domain, size: int, rng: random.Random, name: str, depots: int = 1, distributors: int = 2,
           trucks: int = 2, pallets: int = 3, hoists: int = 3) -> Problem:
    places = [f"depot{i}" for i in range(depots)] + [f"distributor{i}" for i in range(distributors)]
    pallets, hoists = max(pallets, len(places)), max(hoists, len(places))
    objects = {p: "depot" if p.startswith("depot") else "distributor" for p in places}
    objects |= {f"truck{i}": "truck" for i in range(trucks)}
    objects |= {f"pallet{i}": "pallet" for i in range(pallets)}
    objects |= {f"crate{i}": "crate" for i in range(size)}
    objects |= {f"hoist{i}": "hoist" for i in range(hoists)}

    def place_of(i: int) -> str:  # the first of each kind at every place in turn, the rest at random
        return places[i] if i < len(places) else rng.choice(places)

    while True:
        init: set[tuple[str, ...]] = {("at", f"truck{i}", rng.choice(places)) for i in range(trucks)}
        for i in range(hoists):
            init |= {("at", f"hoist{i}", place_of(i)), ("available", f"hoist{i}")}
        pallet_at = [place_of(i) for i in range(pallets)]
        top = [f"pallet{i}" for i in range(pallets)]
        init |= {("at", f"pallet{i}", pallet_at[i]) for i in range(pallets)}
        for c in range(size):
            p = rng.randrange(pallets)
            init |= {("at", f"crate{c}", pallet_at[p]), ("on", f"crate{c}", top[p])}
            top[p] = f"crate{c}"
        init |= {("clear", t) for t in top}
        goal_top = [f"pallet{i}" for i in range(pallets)]
        goal_on: dict[int, str] = {}
        for _ in range(2 * size):
            c = rng.randrange(size)
            if c in goal_on:
                continue
            p = rng.randrange(pallets)
            goal_on[c], goal_top[p] = goal_top[p], f"crate{c}"
        goal = [("on", f"crate{c}", goal_on[c]) for c in sorted(goal_on)]
        if goal and not set(goal) <= init:
            break
    return Problem(name, domain.name, objects, frozenset(init), tuple(Literal(a[0], a[1:]) for a in goal))


Generator = Callable[..., Problem]
GENERATORS: dict[str, Generator] = {"blocksworld": blocksworld, "logistics": logistics, "depots": depots}
"""Domain (a shipped domain file's stem) -> ``generator(domain, size, rng, name, **settings) -> Problem``."""
GENERATOR_DEFAULTS: dict[str, dict[str, int]] = {"logistics": LOGISTICS_DEFAULTS, "depots": DEPOTS_DEFAULTS}
"""A generator's parameters besides the size, with their defaults (``env.pddl.<domain>.*``)."""
