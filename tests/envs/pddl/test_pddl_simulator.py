"""The simulator's verdicts and error texts, and the planner: optimal lengths against brute force, the
greedy fallback, the disk cache with the time a search took."""

from __future__ import annotations

import json
import random

import pytest

from envs.pddl.generators import blocksworld
from envs.pddl.grounding import ground
from envs.pddl.parsing import read_problem
from envs.pddl.search import best_first, cache_key, find_plan, reference_plan
from envs.pddl.simulator import simulate
from tests.envs.pddl.conftest import BW_PROBLEM


@pytest.fixture(scope="module")
def tiny(blocks):
    return ground(blocks, read_problem(blocks, text=BW_PROBLEM))


def test_a_valid_plan_reaching_the_goal(tiny):
    out = simulate(tiny, "(unstack b a)\n(stack b c) (PICK-UP a) ( stack a  b ) ; done")
    assert out.valid and out.reached and out.length == 4 and out.goal_fraction == 1.0 and out.error is None


def test_an_executable_plan_that_misses_the_goal(tiny):
    out = simulate(tiny, "(unstack b a) (stack b c)")
    assert out.valid and not out.reached and out.goal_fraction == 0.5  # (on b c) holds, (on a b) not


@pytest.mark.parametrize("plan, error", [
    ("(unstack b a) (stack b c) (stack a b)",
     "action 3 (stack a b) is not applicable: its precondition (holding a) is false"),
    ("(pick-up a)", "action 1 (pick-up a) is not applicable: its precondition (clear a) is false"),
    ("(unstack b a) (fly b c)", "action 2 (fly b c) is not an action of the problem: unknown action 'fly' "
                                "(the domain has pick-up, put-down, stack, unstack)"),
    ("(stack b z)", "action 1 (stack b z) is not an action of the problem: unknown object 'z'"),
    ("(stack b)", "action 1 (stack b) is not an action of the problem: stack takes 2 argument(s), got 1"),
    ("unstack b from a", "no action found in 'unstack b from a'; expected actions such as (pick-up a)"),
])
def test_an_invalid_plan_names_its_first_failing_action_and_why(tiny, plan, error):
    out = simulate(tiny, plan)
    assert not out.valid and not out.reached and out.error == error


def _shortest_by_brute_force(task, max_len):
    """The length of the shortest plan, enumerating every sequence of applicable actions (depth first)."""
    best = None

    def walk(state, depth):
        nonlocal best
        if task.goal_reached(state):
            best = depth if best is None else min(best, depth)
            return
        if depth == max_len or best is not None and depth >= best:
            return
        for i in task.applicable(state):
            a = task.actions[i]
            walk((state & ~a.delete) | a.add, depth + 1)

    walk(task.init, 0)
    return best


def test_breadth_first_plans_are_optimal_against_brute_force(blocks):
    rng = random.Random(7)
    for k in range(12):
        task = ground(blocks, blocksworld(blocks, 3, rng, f"p{k}"))
        found = find_plan(task)
        assert found.optimal and found.planner == "breadth-first"
        assert simulate(task, found.actions).reached
        assert len(found.actions) == _shortest_by_brute_force(task, 8)


def test_beyond_the_budget_best_first_then_greedy_search_find_valid_plans(blocks):
    task = ground(blocks, blocksworld(blocks, 9, random.Random(1), "big"))
    found = find_plan(task, optimal_nodes=50)
    assert not found.optimal and found.planner == "best-first (g + h)"
    assert simulate(task, found.actions).reached
    greedy, _ = best_first(task, 50_000, weight=None)  # the last resort: h alone
    assert simulate(task, greedy).reached
    assert find_plan(task, optimal_nodes=50, greedy_nodes=2) is None  # every search gives up


def test_reference_plans_are_cached_with_their_time(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("RLTF_CACHE_DIR", str(tmp_path))
    first = reference_plan(tiny)
    path = tmp_path / "pddl" / "plans" / f"{cache_key(tiny, 50_000, 50_000)}.json"
    data = json.loads(path.read_text())
    assert data["actions"] == list(first.actions) and data["seconds"] >= 0 and data["optimal"]
    path.write_text(json.dumps({**data, "seconds": 123.0}))
    assert reference_plan(tiny).seconds == 123.0  # read back, not searched again
    path.write_text("{damaged")
    assert reference_plan(tiny).actions == first.actions  # a damaged entry is searched again
