"""Instances: the seeded generators (uniform Blocksworld states, Logistics), the renaming and its round
trip, the persisted splits, and the folder loader with its one-line errors."""

from __future__ import annotations

import collections
import dataclasses
import json
import random

import pytest
from scipy import stats

from envs.pddl.errors import PddlError, PddlSemanticError, PddlSyntaxError
from envs.pddl.generators import blocksworld, logistics, random_towers, tower_completions
from envs.pddl.grounding import ground
from envs.pddl.instances import GeneratedSettings, _draw, generated_folder, load_folder
from envs.pddl.parsing import read_domain, read_problem
from envs.pddl.renaming import draw_renaming, read_renaming, rename_domain, rename_problem
from envs.pddl.search import find_plan
from envs.pddl.simulator import simulate
from envs.pddl.writing import domain_text, problem_text


def test_state_counts_are_the_known_ones():
    # the number of blocks-world states of n blocks (OEIS A001515), what bwstates samples from
    assert [tower_completions(n, 0) for n in range(1, 8)] == [1, 3, 13, 73, 501, 4051, 37633]


@pytest.mark.parametrize("n", [3, 4])
def test_blocksworld_states_are_drawn_uniformly(n):
    rng = random.Random(5)
    draws = 150 * tower_completions(n, 0)
    counts = collections.Counter(tuple(sorted(map(tuple, random_towers(n, rng)))) for _ in range(draws))
    assert len(counts) == tower_completions(n, 0)  # every state drawn
    assert stats.chisquare(list(counts.values())).pvalue > 1e-3
    assert all(sorted(b for t in towers for b in t) == list(range(n)) for towers in map(list, counts))


def test_generators_are_functions_of_their_seed(blocks, logistics_domain):
    def draw(seed, gen, domain, size, **kw):
        rng = random.Random(seed)
        return [problem_text(gen(domain, size, rng, f"p{k}", **kw)) for k in range(5)]

    assert draw(1, blocksworld, blocks, 5) == draw(1, blocksworld, blocks, 5)
    assert draw(1, blocksworld, blocks, 5) != draw(2, blocksworld, blocks, 5)
    assert draw(3, logistics, logistics_domain, 4, cities=3) == draw(3, logistics, logistics_domain, 4, cities=3)
    p = logistics(logistics_domain, 4, random.Random(0), "x", airplanes=2, cities=3, city_size=3)
    kinds = collections.Counter(p.objects.values())
    assert kinds == {"city": 3, "airport": 3, "location": 6, "truck": 3, "airplane": 2, "package": 4}
    small = logistics(logistics_domain, 2, random.Random(0), "y")
    assert simulate(ground(logistics_domain, small), find_plan(ground(logistics_domain, small)).actions).reached


def test_a_drawn_renaming_round_trips_and_keeps_plans(blocks):
    problem = blocksworld(blocks, 4, random.Random(2), "p")
    r = draw_renaming(blocks, sorted(problem.objects), seed=11)
    assert r == draw_renaming(blocks, sorted(problem.objects), seed=11)
    assert set(r.predicates) == set(blocks.predicates) and len(set(r.actions.values())) == 4
    d2, p2 = rename_domain(blocks, r, "mystery"), rename_problem(problem, r, "mystery")
    assert not set(d2.predicates) & set(blocks.predicates) and not set(p2.objects) & set(problem.objects)
    back = r.inverse()
    assert rename_domain(d2, back, blocks.name) == blocks and rename_problem(p2, back, problem.domain_name) == problem
    d3 = read_domain(text=domain_text(d2))  # the renamed files parse
    p3 = read_problem(d3, text=problem_text(p2, False))
    plan = find_plan(ground(blocks, problem)).actions
    renamed = [r.action_text(a) for a in plan]
    assert simulate(ground(d3, p3), renamed).reached
    assert find_plan(ground(d3, p3)).actions == tuple(renamed)  # the same search, the same plan, renamed


def test_a_renaming_file(tmp_path, blocks):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"predicates": {"on": "craves"}, "actions": {"stack": "overcome"}}))
    r = read_renaming(f)
    assert rename_domain(blocks, r).action("overcome").add[-1][0] == "craves"
    f.write_text(json.dumps({"predicates": {"on": "x", "clear": "x"}}))
    with pytest.raises(PddlSemanticError, match=r"r.json: the predicates renaming maps two names onto one$"):
        read_renaming(f)


def settings(**kw):
    base = dict(domain="blocksworld", sizes=(3, 4), long_sizes=(6, 7), counts=(20, 4, 6, 3), seed=4)
    return GeneratedSettings(**{**base, **kw})


def test_generated_splits_are_persisted_distinct_and_longer_for_test_long():
    folder = generated_folder(settings())
    assert generated_folder(settings()) == folder  # written once
    s = load_folder(folder)
    assert [len(s.split[k]) for k in ("train", "validation", "test", "test-long")] == [20, 4, 6, 3]
    by_id = {i.id: i for i in s.instances}
    texts = [problem_text(i.problem).split("\n", 1)[1] for i in s.instances]
    assert len(set(texts)) == len(texts)  # no instance repeated across splits
    train_max = max(by_id[i].task.size for i in s.split["train"])
    assert min(by_id[i].task.size for i in s.split["test-long"]) > train_max
    assert generated_folder(settings(seed=5)) != folder


def test_a_size_whose_instances_run_out_gives_its_turn_to_the_others(blocks):
    # 3 blocks have 13 states (at most 169 problems): 500 test problems of 3-5 blocks after 300 train ones
    # cannot keep the turns, so the 3-block turns go to 4 and 5 blocks, in turn; nothing repeats
    big = GeneratedSettings("blocksworld", (3, 5), (6, 8), (300, 20, 500, 100), 0)
    problems, split = _draw(big, blocks)
    sizes = {name: collections.Counter(len(problems[k - 1].objects) for k in ks) for name, ks in split.items()}
    assert [len(split[n]) for n in ("train", "validation", "test", "test-long")] == [300, 20, 500, 100]
    assert sizes["train"] == {3: 100, 4: 100, 5: 100}
    assert set(sizes["test"]) == {3, 4, 5} and sizes["test"][3] < 100 and abs(sizes["test"][4] - sizes["test"][5]) <= 1
    assert len({problem_text(dataclasses.replace(p, name="x")) for p in problems}) == len(problems)
    # a set that never runs out is drawn exactly as sizes in turn (lo + j mod n), split by split
    small, small_split = _draw(GeneratedSettings("blocksworld", (3, 5), (6, 8), (30, 6, 9, 3), 0), blocks)
    assert [len(small[k - 1].objects) for k in small_split["test"]] == [3, 4, 5] * 3
    assert list(map(problem_text, small[:30])) == list(map(problem_text, problems[:30]))  # the same train draws
    with pytest.raises(PddlError, match="cannot draw 200 distinct train instances .* sizes 3..3"):
        _draw(GeneratedSettings("blocksworld", (3, 3), (6, 8), (200, 1, 1, 1), 0), blocks)


def test_an_obfuscated_set_is_one_consistent_renaming():
    s = load_folder(generated_folder(settings(obfuscation_seed=3)))
    assert "on" not in s.domain.predicates and len(s.domain.actions) == 4
    r = read_renaming(s.folder / "renaming.json")
    for inst in s.instances[:5]:
        assert set(inst.problem.objects) <= set(r.objects.values())
        assert find_plan(inst.task) is not None


def test_the_folder_loader_reads_a_planbench_like_folder(folder):
    s = load_folder(folder)
    assert [i.id for i in s.instances] == [1, 2, 3]
    assert s.instances[0].given_plan == ("(unstack b a)", "(stack b c)", "(pick-up a)", "(stack a b)")
    assert s.instances[1].given_plan is None
    assert sorted(sum(s.split.values(), [])) == [1, 2, 3]  # no split.json: split by object count


def test_an_empty_folder_is_one_line(tmp_path):
    with pytest.raises(PddlSemanticError, match=rf"^{tmp_path}: no instance-<k>.pddl problem in the folder$"):
        load_folder(tmp_path)


def test_objects_outside_the_domains_types_are_one_line(folder):
    (folder / "instance-2.pddl").write_text((folder / "instance-2.pddl").read_text().replace("(:objects a",
                                                                                           "(:objects a - brick"))
    with pytest.raises(PddlError, match=r"instance-2.pddl:3: object 'a' has the type 'brick'"):
        load_folder(folder)


def test_an_unknown_action_in_a_plan_file_is_one_line_with_its_line(folder):
    (folder / "instance-1.plan").write_text("(unstack b a)\n(move b c)\n")
    with pytest.raises(PddlSemanticError, match=r"instance-1.plan:2: action 2 \(move b c\) is not an action of the "
                                                r"problem: unknown action 'move'"):
        load_folder(folder)


def test_a_malformed_problem_in_a_folder_names_its_file_and_line(folder):
    (folder / "instance-3.pddl").write_text("(define (problem x)\n  (:domain blocksworld-4ops)\n  (:objects a b\n")
    with pytest.raises(PddlSyntaxError, match=r"instance-3.pddl:3: the file ends; expected one of: name, rpar"):
        load_folder(folder)
