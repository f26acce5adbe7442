"""Depots: the shipped IPC 2002 domain, its seeded generator (the IPC generator's parameters and draws),
the planner on small sizes, and ``env.pddl.domain=depots`` end to end."""

from __future__ import annotations

import collections
import random

import pytest

import envs
from envs.pddl.config import PddlEnvConfig
from envs.pddl.factory import settings_of
from envs.pddl.generators import depots
from envs.pddl.grounding import ground
from envs.pddl.instances import generated_folder, shipped_domain
from envs.pddl.parsing import read_domain
from envs.pddl.search import find_plan
from envs.pddl.simulator import simulate
from envs.pddl.writing import problem_text


@pytest.fixture(scope="module")
def depots_domain():
    return read_domain(shipped_domain("depots"))


def test_the_shipped_domain_is_ipc_depots(depots_domain):
    assert [a.name for a in depots_domain.actions] == ["drive", "lift", "drop", "load", "unload"]
    assert depots_domain.types == {"place": "object", "locatable": "object", "depot": "place", "distributor": "place",
                                   "truck": "locatable", "hoist": "locatable", "surface": "locatable",
                                   "pallet": "surface", "crate": "surface"}
    lift = depots_domain.action("lift")
    assert [t for _, t in lift.params] == [("hoist",), ("crate",), ("surface",), ("place",)]
    assert ("lifting", "?x", "?y") in lift.add and ("on", "?y", "?z") in lift.delete


def _stacks_are_consistent(problem):
    """Every surface holds at most one crate, the clear surfaces are exactly the stacks' tops, and a crate
    stands where its pallet stands."""
    init = problem.init
    on = {a[2]: a[1] for a in init if a[0] == "on"}
    assert len(on) == sum(a[0] == "on" for a in init)
    surfaces = [o for o, t in problem.objects.items() if t in ("pallet", "crate")]
    assert {a[1] for a in init if a[0] == "clear"} == {s for s in surfaces if s not in on}
    at = {a[1]: a[2] for a in init if a[0] == "at"}
    below = {crate: surface for surface, crate in on.items()}
    for crate in (o for o, t in problem.objects.items() if t == "crate"):
        base = crate
        while base in below:
            base = below[base]
        assert problem.objects[base] == "pallet" and at[crate] == at[base]


def test_the_generator_follows_the_ipc_parameters(depots_domain):
    p = depots(depots_domain, 4, random.Random(0), "x", depots=2, distributors=3, trucks=2, pallets=3, hoists=6)
    kinds = collections.Counter(p.objects.values())
    # pallets and hoists: at least one per place (3 pallets asked, 5 places)
    assert kinds == {"depot": 2, "distributor": 3, "truck": 2, "pallet": 5, "crate": 4, "hoist": 6}
    places = ["depot0", "depot1", "distributor0", "distributor1", "distributor2"]
    assert [next(a[2] for a in p.init if a[:2] == ("at", f"pallet{i}")) for i in range(5)] == places
    assert [next(a[2] for a in p.init if a[:2] == ("at", f"hoist{i}")) for i in range(5)] == places
    assert all(("available", f"hoist{i}") in p.init for i in range(6))
    _stacks_are_consistent(p)
    assert p.goal and all(g.pred == "on" for g in p.goal) and not {(g.pred, *g.args) for g in p.goal} <= p.init


def test_the_generator_is_a_function_of_its_seed_and_its_goals_are_stackable(depots_domain):
    def draw(seed):
        rng = random.Random(seed)
        return [problem_text(depots(depots_domain, 3, rng, f"p{k}")) for k in range(20)]

    assert draw(1) == draw(1) and draw(1) != draw(2)
    rng = random.Random(4)
    goal_counts = set()
    for _ in range(30):
        p = depots(depots_domain, 3, rng, "x")
        _stacks_are_consistent(p)
        onto = [g.args[1] for g in p.goal]
        assert len(onto) == len(set(onto))  # one crate per surface in the goal too
        goal_counts.add(len(p.goal))
    assert goal_counts > {3}  # some draws leave crates without a goal, as the IPC generator does


@pytest.mark.parametrize("size", [2, 3])
def test_the_planner_solves_small_depots_optimally(depots_domain, size):
    rng = random.Random(size)
    for _ in range(3):
        task = ground(depots_domain, depots(depots_domain, size, rng, "x"))
        plan = find_plan(task)
        assert plan is not None and plan.optimal and simulate(task, plan.actions).reached


def test_depots_end_to_end_through_the_env_settings():
    cfg = {"name": "pddl", "pddl": {"domain": "depots", "sizes": [2, 2], "long_sizes": [3, 3], "train_size": 3,
                                    "validation_size": 1, "test_size": 1, "test_long_size": 1}}
    train_env, held_out = envs.make_train_and_held_out(cfg)
    task = train_env.tasks()[0]
    assert task.description.startswith("Objects: depot0, distributor0, distributor1, truck0, truck1, pallet0")
    assert train_env.reward_plans([(task.id, task.reference_plan)])[0].reward == 1.0
    assert len(held_out.tasks()) == 6  # every problem: train, validation, test, test-long


def test_the_depots_settings_are_the_sets_key_and_are_checked():
    small, more_trucks = PddlEnvConfig(domain="depots"), PddlEnvConfig(domain="depots")
    more_trucks.depots.trucks = 3
    assert dict(settings_of(small).generator) == {"depots": 1, "distributors": 2, "trucks": 2, "pallets": 3,
                                                  "hoists": 3}
    assert settings_of(small).key() != settings_of(more_trucks).key()
    assert settings_of(PddlEnvConfig(domain="blocksworld")).generator == ()
    folder = generated_folder(settings_of(PddlEnvConfig(domain="depots", sizes=[2, 2], long_sizes=[3, 3],
                                                        train_size=2, validation_size=0, test_size=0,
                                                        test_long_size=1)))
    assert "truck1 - truck" in (folder / "instance-1.pddl").read_text()
    bad = PddlEnvConfig(domain="depots")
    bad.depots.hoists = 0
    with pytest.raises(Exception, match=r"^bad value for 'env.pddl.depots.hoists': 0; expected an integer >= 1$"):
        bad.validate()
