"""Descriptions: the templates of Blocksworld, Logistics and Depots (exact strings on one small problem
each), and the generic rendering of any other domain, in that domain's own names."""

from __future__ import annotations

import pytest

from envs.pddl.describe import render
from envs.pddl.instances import shipped_domain
from envs.pddl.parsing import read_domain, read_problem
from envs.pddl.renaming import draw_renaming, rename_domain, rename_problem

BLOCKS = """(define (problem bw-tiny) (:domain blocksworld-4ops) (:objects a b c)
  (:init (arm-empty) (on-table a) (on b a) (clear b) (on-table c) (clear c))
  (:goal (and (on a b) (on b c))))"""
LOGISTICS = """(define (problem log-tiny) (:domain logistics)
  (:objects c0 c1 - city l0-0 l1-0 - airport l0-1 - location t0 - truck a0 - airplane p0 p1 - package)
  (:init (in-city l0-0 c0) (in-city l0-1 c0) (in-city l1-0 c1) (at t0 l0-1) (at a0 l0-0) (at p0 l0-1)
         (in p1 a0))
  (:goal (and (at p0 l1-0) (at p1 l0-1))))"""
DEPOTS = """(define (problem depot-tiny) (:domain depots)
  (:objects depot0 - depot distributor0 - distributor truck0 - truck pallet0 pallet1 - pallet
            crate0 crate1 crate2 - crate hoist0 hoist1 - hoist)
  (:init (at pallet0 depot0) (at pallet1 distributor0) (at truck0 depot0) (at hoist0 depot0) (available hoist0)
         (at hoist1 distributor0) (lifting hoist1 crate1) (at crate0 depot0) (on crate0 pallet0) (clear crate0)
         (clear pallet1) (in crate2 truck0))
  (:goal (and (on crate0 pallet1) (on crate1 crate0))))"""

EXPECTED = {
    "blocksworld": (BLOCKS, "Objects: a, b, c. As initial conditions I have that, the hand is empty, block b is clear, "
                    "block c is clear, block b is on top of block a, block a is on the table and block c is on the "
                    "table. My goal is to have that block a is on top of block b and block b is on top of block c."),
    "logistics": (LOGISTICS, "Objects: c0, c1, l0-0, l1-0, l0-1, t0, a0, p0, p1. As initial conditions I have that, "
                  "airport l0-0 is in city c0, location l0-1 is in city c0, airport l1-0 is in city c1, airplane a0 "
                  "is at airport l0-0, package p0 is at location l0-1, truck t0 is at location l0-1 and package p1 "
                  "is in airplane a0. My goal is to have that package p0 is at airport l1-0 and package p1 is at "
                  "location l0-1."),
    "depots": (DEPOTS, "Objects: depot0, distributor0, truck0, pallet0, pallet1, crate0, crate1, crate2, hoist0, "
               "hoist1. As initial conditions I have that, crate0 is at depot0, hoist0 is at depot0, hoist1 is at "
               "distributor0, pallet0 is at depot0, pallet1 is at distributor0, truck0 is at depot0, crate0 is on "
               "pallet0, crate2 is in truck0, hoist1 is lifting crate1, hoist0 is available, crate0 is clear and "
               "pallet1 is clear. My goal is to have that crate0 is on pallet1 and crate1 is on crate0."),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_template_renders_the_state_and_the_goal(name):
    domain = read_domain(shipped_domain(name))
    text, expected = EXPECTED[name]
    assert render(domain, read_problem(domain, text=text)) == expected


@pytest.mark.parametrize("name", list(EXPECTED))
def test_a_renamed_domain_reads_generically_in_its_own_names(name):
    domain = read_domain(shipped_domain(name))
    problem = read_problem(domain, text=EXPECTED[name][0])
    r = draw_renaming(domain, list(problem.objects), seed=3, types=bool(domain.types))
    text = render(rename_domain(domain, r, "mystery"), rename_problem(problem, r, "mystery"))
    original = {*domain.predicates, *domain.types, *problem.objects, "block", "hand", "table", "city", "package"}
    assert not set(text.replace(",", " ").replace(".", " ").split()) & original
    on = next(a for a in sorted(problem.init) if len(a) == 3)  # a relation: "<x> <predicate> <y>"
    assert f"{r.objects[on[1]]} {r.predicates[on[0]]} {r.objects[on[2]]}" in text
