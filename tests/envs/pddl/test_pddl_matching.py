"""Training instances in a handed domain's names: a drawn renaming of each known domain is found back by
matching the two domains' structure (or read from a renaming file), the generated instances in its names
are solvable and accept the known domain's plans renamed, and a domain that renames nothing known (or one
in two ways) is refused in one line."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

import envs
from envs.pddl.config import PddlEnvConfig
from envs.pddl.describe import instructions, render
from envs.pddl.errors import PddlError
from envs.pddl.generators import GENERATORS, blocksworld
from envs.pddl.grounding import ground
from envs.pddl.instances import GeneratedSettings, generated_folder, known_domains, load_folder, shipped_domain
from envs.pddl.matching import DomainMismatch, find_renaming, match_domain
from envs.pddl.parsing import read_domain
from envs.pddl.renaming import Renaming, draw_renaming, neutral_variables, rename_domain, rename_problem
from envs.pddl.search import find_plan
from envs.pddl.simulator import simulate
from envs.pddl.writing import domain_text, problem_text

UNRELATED = """(define (domain gripper) (:requirements :strips)
  (:predicates (room ?r) (ball ?b) (at-robby ?r) (at ?b ?r) (free ?g) (carry ?o ?g) (gripper ?g))
  (:action move :parameters (?from ?to) :precondition (and (room ?from) (room ?to) (at-robby ?from))
    :effect (and (at-robby ?to) (not (at-robby ?from)))))
"""


def handed_file(tmp_path, name: str, seed: int) -> tuple:
    """A renaming of a known domain drawn with ``seed`` (types too where it has them), written as another
    author would: other variable names, predicates and actions declared in reverse order."""
    known = known_domains()[name]
    drawn = draw_renaming(known, [], seed, types=bool(known.types))
    renamed = neutral_variables(rename_domain(known, drawn, f"handed-{name}"))
    renamed = dataclasses.replace(renamed, predicates=dict(reversed(renamed.predicates.items())),
                                  actions=tuple(reversed(renamed.actions)))
    path = tmp_path / f"{name}-renamed.pddl"
    path.write_text(domain_text(renamed))
    return path, drawn


@pytest.mark.parametrize("name", list(GENERATORS))
def test_a_drawn_renaming_is_found_back_by_matching(tmp_path, name):
    path, drawn = handed_file(tmp_path, name, seed=13)
    found_name, found = find_renaming(read_domain(path), known_domains())
    assert found_name == name and found == drawn  # predicates, actions and types; no objects drawn


@pytest.mark.parametrize("name", list(GENERATORS))
def test_instances_in_the_handed_names_are_solvable_and_take_the_renamed_plans(tmp_path, name):
    path, drawn = handed_file(tmp_path, name, seed=5)
    settings = GeneratedSettings(str(path), (2, 2), (3, 3), (3, 0, 0, 1), seed=1)
    folder = generated_folder(settings)
    s = load_folder(folder)
    assert (folder / "domain.pddl").read_text() == path.read_text()  # the handed file itself
    known = known_domains()[name]
    back = Renaming(**json.loads((folder / "renaming.json").read_text())).inverse()
    for inst in s.instances:
        assert inst.problem.domain_name == f"handed-{name}"
        assert not set(inst.problem.objects) & {o for o in (known.types or {})}
        original = rename_problem(inst.problem, back, known.name)
        plan = find_plan(ground(known, original))  # the known domain's plan, renamed action by action
        renamed_plan = [back.inverse().action_text(a) for a in plan.actions]
        assert simulate(inst.task, renamed_plan).reached
        assert find_plan(inst.task) is not None


def test_a_renaming_file_is_used_instead_of_matching_and_checked(tmp_path):
    path, drawn = handed_file(tmp_path, "logistics", seed=2)
    given = tmp_path / "r.json"
    given.write_text(drawn.to_json())
    name, r = find_renaming(read_domain(path), known_domains(), drawn)
    assert (name, r) == ("logistics", drawn)
    wrong = dataclasses.replace(drawn, actions={**drawn.actions, "load-truck": drawn.actions["load-airplane"],
                                                "load-airplane": drawn.actions["load-truck"]})
    with pytest.raises(DomainMismatch, match=r"renames none of the domains the generators know under the renaming "
                                             r"file \(blocksworld: .*; logistics: action \S+ differs; depots: "):
        find_renaming(read_domain(path), known_domains(), wrong)
    cfg = PddlEnvConfig(domain=str(path), renaming=str(given), sizes=[1, 1], long_sizes=[2, 2])
    cfg.validate()
    assert cfg.generated_domain() == "logistics" and dict(cfg.generator_settings())["cities"] == 2


def test_an_unrelated_domain_is_refused_in_one_line(tmp_path):
    path = tmp_path / "gripper.pddl"
    path.write_text(UNRELATED)
    with pytest.raises(DomainMismatch) as e:
        find_renaming(read_domain(path), known_domains())
    assert "\n" not in str(e.value)
    assert str(e.value).startswith(f"{path}: renames none of the domains the generators know (blocksworld: "
                                   "predicates of arities [1, 1, 1, 1, 1, 2, 2] where blocksworld-4ops has "
                                   "[0, 1, 1, 1, 2]; logistics: untyped where logistics is typed; depots: ")
    with pytest.raises(PddlError, match=r"gripper.pddl: renames none of the domains the generators know"):
        PddlEnvConfig(domain=str(path)).validate()


def test_a_domain_with_a_missing_effect_names_what_did_not_match():
    blocks = known_domains()["blocksworld"]
    stack = blocks.action("stack")
    broken = dataclasses.replace(blocks, actions=tuple(dataclasses.replace(a, add=a.add[1:]) if a is stack else a
                                                       for a in blocks.actions))
    with pytest.raises(DomainMismatch, match=r"blocksworld\.pddl: not a renaming of blocksworld-4ops: no predicate is "
                                             r"used as blocksworld-4ops's arm-empty \(arity and the actions' uses\)$"):
        match_domain(blocks, broken)


def test_two_consistent_matchings_are_refused_naming_them():
    blocks = known_domains()["blocksworld"]
    twin = dataclasses.replace(blocks.action("put-down"), name="put-down-again")
    doubled = dataclasses.replace(blocks, actions=(*blocks.actions[:3], twin))
    with pytest.raises(DomainMismatch, match=r"renames blocksworld-4ops in more than one way \(put-down -> put-down "
                                             r"or put-down-again; put-down-again -> put-down-again or put-down\); "
                                             r"give the renaming \(env.pddl.renaming\)$"):
        match_domain(dataclasses.replace(doubled, name="blocksworld-4ops"), doubled)


def test_training_for_a_handed_domain_end_to_end_and_its_descriptions_keep_no_original_name(tmp_path):
    path, drawn = handed_file(tmp_path, "depots", seed=8)
    cfg = {"name": "pddl", "pddl": {"domain": str(path), "sizes": [2, 2], "long_sizes": [3, 3], "train_size": 3,
                                    "validation_size": 1, "test_size": 1, "test_long_size": 1}}
    train_env, _ = envs.make_train_and_held_out(cfg)
    task = train_env.tasks()[0]
    assert train_env.reward_plans([(task.id, task.reference_plan)])[0].reward == 1.0
    known = known_domains()["depots"]
    original = {*known.predicates, *(a.name for a in known.actions), *known.types, "depots"}
    words = set(task.description.replace(",", " ").replace(".", " ").split())
    assert not words & original and not any(w.startswith(t) for w in words for t in known.types)
    assert task.description.startswith(f"Objects: {drawn.types['depot']}0, {drawn.types['distributor']}0")


def test_an_obfuscated_set_keeps_no_original_name_in_its_instructions():
    s = load_folder(generated_folder(GeneratedSettings("logistics", (1, 1), (2, 2), (2, 0, 0, 1), 0,
                                                       obfuscation_seed=4)))
    known = read_domain(shipped_domain("logistics"))
    text = instructions(s.domain) + render(s.domain, s.instances[0].problem)
    assert s.domain.name == "mystery-4"
    assert not any(f"({n} " in text or f"({n})" in text or f"?{n}" in text
                   for n in [*known.predicates, *(a.name for a in known.actions), "truck", "pkg", "loc-from"])
    assert all(v == f"x{i}" for a in s.domain.actions for i, (v, _) in enumerate(a.params, 1))
    files = "".join(p.read_text() for p in s.folder.glob("*.pddl"))
    assert not any(f" {n} " in files or f" {n})" in files for n in [*known.types, "logistics"])
    assert "(problem mystery-4-1)" in files
    # the set is a function of its settings: asked again, the same folder
    assert generated_folder(GeneratedSettings("logistics", (1, 1), (2, 2), (2, 0, 0, 1), 0,
                                              obfuscation_seed=4)) == s.folder


def test_the_handed_domains_own_problem_files_are_the_evaluation_folder(tmp_path):
    """Train on the generated set in the handed names, evaluate on a folder of that domain's own files."""
    path, drawn = handed_file(tmp_path, "blocksworld", seed=21)
    folder = tmp_path / "own"
    folder.mkdir()
    known = known_domains()["blocksworld"]
    problem = blocksworld(known, 3, random.Random(0), "theirs-1")
    own = dataclasses.replace(drawn, objects={"a": "red", "b": "blue", "c": "green"})  # their own object names
    (folder / "instance-1.pddl").write_text(problem_text(rename_problem(problem, own, "handed-blocksworld"), False))
    (folder / "domain.pddl").write_text(path.read_text())
    common = {"domain": str(path), "sizes": [2, 2], "long_sizes": [3, 3], "train_size": 2, "validation_size": 0,
              "test_size": 1, "test_long_size": 0}
    train_env, _ = envs.make_train_and_held_out({"name": "pddl", "pddl": common})
    evaluation = envs.make_train_and_held_out({"name": "pddl", "pddl": {**common, "problems": str(folder)}})[1]
    task = evaluation.tasks()[0]
    plan = " ".join(own.action_text(a) for a in find_plan(ground(known, problem)).actions)
    assert evaluation.reward_plans([(task.id, plan)])[0].reward == 1.0
    assert train_env.plan_instructions() == evaluation.plan_instructions()  # one domain, one set of actions
