"""Plans for the warm start and the oracle row: breadth-first search on the grounded problem (optimal for
unit costs) within a node budget, best-first search on ``g + h`` beyond it, greedy best-first search on
``h`` as the last resort (both satisficing), cached on disk with the time they took (:func:`reference_plan`).

``h`` is the sum over goal atoms of the first layer of the relaxed planning graph (deletes ignored) that
holds them, computed with bitsets; ties go to the shallower node. On Blocksworld (one seed's instances)
``g + h`` finds 28 actions for 8 blocks and 36 for 10 in a few hundred expansions where greedy search
finds 60 and 58. The cache lives
in the rltf cache folder (``pddl/plans/<hash of domain, problem and budgets>.json``), written atomically.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import time
from collections import deque
from dataclasses import asdict, dataclass

from common.atomic import write_atomic
from common.cache_dir import cache_writes, rltf_cache_dir
from envs.pddl.grounding import GroundTask

PLANNER_VERSION = 2  # bump when a search changes the plans it returns (the cache key holds it)


@dataclass(frozen=True)
class FoundPlan:
    """A plan (action texts), whether it is proven optimal, which search found it and how long it took."""

    actions: tuple[str, ...]
    optimal: bool
    planner: str
    seconds: float
    expanded: int


def breadth_first(task: GroundTask, max_nodes: int) -> tuple[list[int] | None, int, bool]:
    """``(plan, expanded, exhausted)``: a shortest plan, or None when none exists within ``max_nodes``
    expanded states (``exhausted``: the whole reachable space was searched, so no plan exists)."""
    if task.goal_reached(task.init):
        return [], 0, False
    parent: dict[int, tuple[int, int]] = {task.init: (-1, -1)}
    queue = deque([task.init])
    actions = task.actions
    expanded = 0
    while queue:
        if expanded >= max_nodes:
            return None, expanded, False
        state = queue.popleft()
        expanded += 1
        for i in task.candidates(state):
            a = actions[i]
            if state & a.pre == a.pre and not state & a.neg:
                nxt = (state & ~a.delete) | a.add
                if nxt in parent:
                    continue
                parent[nxt] = (state, i)
                if task.goal_reached(nxt):
                    return _path(parent, nxt), expanded, False
                queue.append(nxt)
    return None, expanded, True


def _path(parent: dict[int, tuple[int, int]], state: int) -> list[int]:
    out = []
    while parent[state][0] != -1:
        state, i = parent[state]
        out.append(i)
    return out[::-1]


def goal_layers(task: GroundTask, state: int) -> int | None:
    """The sum over goal atoms of the first relaxed layer holding them (None: the goal is unreachable)."""
    reach, layer, total = state, 0, 0
    pending = task.goal_pos & ~reach
    actions = [task.actions[i] for i in task.relevant]
    while pending:
        layer += 1
        new = reach
        for a in actions:
            if reach & a.pre == a.pre:
                new |= a.add
        if new == reach:
            return None
        total += layer * (pending & new).bit_count()
        pending &= ~new
        reach = new
    return total


def best_first(task: GroundTask, max_nodes: int, weight: float | None = 1.0) -> tuple[list[int] | None, int]:
    """A plan found by best-first search on ``g + weight * h`` (``weight`` None: greedy, on ``h`` alone),
    ``h`` = :func:`goal_layers` (not admissible: the plans are good, not proven optimal); None within
    ``max_nodes`` expansions."""
    h0 = goal_layers(task, task.init)
    if h0 is None:
        return None, 0
    parent: dict[int, tuple[int, int]] = {task.init: (-1, -1)}
    best_g = {task.init: 0}
    heap = [(h0, 0, 0, task.init)]
    counter, expanded = 1, 0
    actions = task.actions
    while heap and expanded < max_nodes:
        _, g, _, state = heapq.heappop(heap)
        if g > best_g[state]:
            continue  # reached again more cheaply since it was queued
        if task.goal_reached(state):
            return _path(parent, state), expanded
        expanded += 1
        for i in task.candidates(state):
            a = actions[i]
            if state & a.pre == a.pre and not state & a.neg:
                nxt = (state & ~a.delete) | a.add
                if best_g.get(nxt, g + 2) <= g + 1 or weight is None and nxt in parent:
                    continue
                parent[nxt], best_g[nxt] = (state, i), g + 1
                h = goal_layers(task, nxt)
                if h is not None:
                    heapq.heappush(heap, (h if weight is None else g + 1 + weight * h, g + 1, counter, nxt))
                    counter += 1
    return None, expanded


def find_plan(task: GroundTask, optimal_nodes: int = 50_000, greedy_nodes: int = 50_000) -> FoundPlan | None:
    """Breadth-first within ``optimal_nodes`` expansions (optimal), else best-first on ``g + h`` within
    ``greedy_nodes``, else greedy best-first within ``greedy_nodes`` (satisficing)."""
    start = time.process_time()
    plan, expanded, exhausted = breadth_first(task, optimal_nodes)
    name, optimal = "breadth-first", True
    for weight, label in ((1.0, "best-first (g + h)"), (None, "greedy best-first")):
        if plan is not None or exhausted:
            break
        plan, more = best_first(task, greedy_nodes, weight)
        expanded += more
        name, optimal = label, False
    if plan is None:
        return None
    return FoundPlan(tuple(task.actions[i].text for i in plan), optimal, name, time.process_time() - start, expanded)


def cache_key(task: GroundTask, optimal_nodes: int, greedy_nodes: int) -> str:
    from envs.pddl.writing import domain_text, problem_text  # the canonical texts: names, not file layout

    blob = json.dumps([PLANNER_VERSION, domain_text(task.domain), problem_text(task.problem), optimal_nodes,
                       greedy_nodes])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def reference_plan(task: GroundTask, optimal_nodes: int = 50_000, greedy_nodes: int = 50_000,
                   cache: bool = True) -> FoundPlan | None:
    """:func:`find_plan`, read from / written to the disk cache (the time is the search's, kept)."""
    if not cache:
        return find_plan(task, optimal_nodes, greedy_nodes)
    folder = rltf_cache_dir("pddl", "plans")
    path = folder / f"{cache_key(task, optimal_nodes, greedy_nodes)}.json"
    if path.is_file():
        try:
            data = json.loads(path.read_text())
            return None if data is None else FoundPlan(**{**data, "actions": tuple(data["actions"])})
        except (ValueError, TypeError, KeyError):
            pass  # a damaged entry: searched again and rewritten
    found = find_plan(task, optimal_nodes, greedy_nodes)
    with cache_writes(folder):
        write_atomic(path, json.dumps(None if found is None else asdict(found)))
    return found
