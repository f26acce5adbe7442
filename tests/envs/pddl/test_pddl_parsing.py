"""Parsing and grounding: the shipped domains, typed grounding counts, and one-line errors naming the file,
the line and what was expected."""

from __future__ import annotations

import pytest

from envs.pddl.errors import PddlError, PddlSemanticError, PddlSyntaxError, UnsupportedRequirement
from envs.pddl.generators import logistics
from envs.pddl.grounding import ground
from envs.pddl.parsing import read_domain, read_problem
from envs.pddl.writing import domain_text, problem_text
from tests.envs.pddl.conftest import BW_PROBLEM


def test_blocksworld_parses_and_grounds_every_typed_instantiation(blocks):
    assert [a.name for a in blocks.actions] == ["pick-up", "put-down", "stack", "unstack"]  # written order
    assert blocks.requirements == ("strips",)
    task = ground(blocks, read_problem(blocks, text=BW_PROBLEM))
    n = 3
    assert len(task.actions) == n + n + n * n + n * n  # pick-up, put-down, stack, unstack over 3 blocks
    assert task.actions[0].text == "(pick-up a)" and task.by_text["(stack b c)"] >= 0
    # atoms: the initial ones first, then those the goal and the actions name (clear/on-table/holding x3,
    # on x9, arm-empty)
    assert len(task.atoms) == 3 * 3 + 9 + 1
    assert task.state_atoms(task.init) == sorted(read_problem(blocks, text=BW_PROBLEM).init)


def test_logistics_grounding_respects_types(logistics_domain):
    import random

    problem = logistics(logistics_domain, 2, random.Random(0), "l", airplanes=1, cities=2, city_size=2)
    task = ground(logistics_domain, problem)
    by_name = {}
    for a in task.actions:
        by_name[a.name] = by_name.get(a.name, 0) + 1
    places, airports, packages, trucks, planes, cities = 4, 2, 2, 2, 1, 2
    assert by_name == {"load-truck": packages * trucks * places, "load-airplane": packages * planes * places,
                       "unload-truck": packages * trucks * places, "unload-airplane": packages * planes * places,
                       "drive-truck": trucks * places * places * cities, "fly-airplane": planes * airports * airports}
    assert all(problem.objects[a.args[1]] == "truck" for a in task.actions if a.name == "load-truck")
    assert task.static_false and len(task.relevant) < len(task.actions)  # drives across cities never apply


def test_the_writer_round_trips(blocks, logistics_domain):
    import random

    for d in (blocks, logistics_domain):
        assert read_domain(text=domain_text(d)) == d
    p = logistics(logistics_domain, 3, random.Random(1), "x")
    assert read_problem(logistics_domain, text=problem_text(p)) == p


def test_a_malformed_file_is_one_line_with_file_line_and_expectation(tmp_path, blocks):
    bad = tmp_path / "instance-1.pddl"
    bad.write_text(BW_PROBLEM.replace("(:goal (and", "(:goal (and ("))
    with pytest.raises(PddlSyntaxError) as e:
        read_problem(blocks, bad)
    message = str(e.value)
    assert message.startswith(f"{bad}:5: found '('; expected one of: ") and "\n" not in message, message
    assert "name" in message


@pytest.mark.parametrize("text, expected", [
    (BW_PROBLEM.replace("(on b a)", "(on b a c)"), ":4: (on b a c) has 3 argument(s); expected 2"),
    (BW_PROBLEM.replace("(on b a)", "(under b a)"), ":4: (under b a) uses the undeclared predicate 'under'"),
    (BW_PROBLEM.replace("(on a b) (on b c)", "(on a b) (on b d)"), ":5: (on b d) names 'd', which is not an object"),
    (BW_PROBLEM.replace("blocksworld-4ops)", "logistics)"), ":2: the problem is for domain 'logistics'"),
])
def test_a_problem_that_does_not_fit_its_domain_is_one_line(blocks, text, expected):
    with pytest.raises(PddlSemanticError) as e:
        read_problem(blocks, "p.pddl", text)
    assert str(e.value).startswith("p.pddl" + expected) and "\n" not in str(e.value), str(e.value)


def test_objects_must_fit_the_predicates_types(logistics_domain):
    text = """(define (problem t) (:domain logistics) (:objects p - package c - city t1 - truck)
      (:init (at p c)) (:goal (in p t1)))"""
    with pytest.raises(PddlSemanticError, match=r"^q.pddl:2: \(at p c\): object 'c' of type 'city' does not fit "
                                                r"argument 2 of at \(type place\)$"):
        read_problem(logistics_domain, "q.pddl", text)
    with pytest.raises(PddlSemanticError, match=r"object 'p' has the type 'parcel', which domain 'logistics' does"):
        read_problem(logistics_domain, "q.pddl", text.replace("p - package", "p - parcel"))


def test_an_unsupported_requirement_is_refused_naming_it(tmp_path):
    text = (tmp_path / "d.pddl")
    domain = domain_text(read_domain(text="""(define (domain d) (:requirements :strips) (:predicates (p))
      (:action a :parameters () :precondition (p) :effect (not (p))))"""))
    text.write_text(domain.replace("(:requirements :strips)", "(:requirements :strips\n :conditional-effects)"))
    with pytest.raises(UnsupportedRequirement, match=rf"^{text}:3: requirement :conditional-effects is not supported "
                                                     r"by the pddl env \(it implements :strips, :typing"):
        read_domain(text)


def test_equality_and_negative_preconditions_ground(tmp_path):
    d = read_domain(text="""(define (domain d) (:requirements :strips :equality :negative-preconditions)
      (:predicates (p ?x) (q ?x ?y))
      (:action link :parameters (?x ?y) :precondition (and (p ?x) (not (= ?x ?y)) (not (q ?x ?y)))
        :effect (q ?x ?y)))""")
    task = ground(d, read_problem(d, text="(define (problem x) (:domain d) (:objects a b) (:init (p a)) "
                                          "(:goal (q a b)))"))
    assert [a.text for a in task.actions] == ["(link a b)", "(link b a)"]  # x = y excluded
    from envs.pddl.simulator import simulate

    assert simulate(task, "(link a b)").reached
    assert simulate(task, "(link a b) (link a b)").error == ("action 2 (link a b) is not applicable: its "
                                                             "precondition (not (q a b)) is false")


def test_every_error_is_a_user_error():
    from common.errors import UserError

    assert issubclass(PddlError, UserError) and issubclass(PddlError, ValueError)
