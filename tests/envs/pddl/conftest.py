"""Fixtures of the pddl env's tests: a cache folder of their own (plans and generated sets are written
there, never into the user's), the shipped domains parsed, a tiny problem and a folder of problems."""

from __future__ import annotations

import random

import pytest

from envs.pddl.generators import blocksworld
from envs.pddl.instances import shipped_domain
from envs.pddl.parsing import read_domain
from envs.pddl.writing import problem_text

BW_PROBLEM = """(define (problem bw-tiny)
  (:domain blocksworld-4ops)
  (:objects a b c)
  (:init (arm-empty) (on-table a) (on b a) (clear b) (on-table c) (clear c))
  (:goal (and (on a b) (on b c))))
"""


@pytest.fixture(autouse=True)
def own_cache(tmp_path_factory, monkeypatch):
    """``RLTF_CACHE_DIR`` in a folder shared by this session's pddl tests."""
    monkeypatch.setenv("RLTF_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "pddl_cache"))


@pytest.fixture(scope="session")
def blocks():
    return read_domain(shipped_domain("blocksworld"))


@pytest.fixture(scope="session")
def logistics_domain():
    return read_domain(shipped_domain("logistics"))


@pytest.fixture
def folder(tmp_path, blocks):
    """A PlanBench-like folder: the domain, three problems, a plan file for the first."""
    f = tmp_path / "bw"
    f.mkdir()
    (f / "domain.pddl").write_text(shipped_domain("blocksworld").read_text())
    (f / "instance-1.pddl").write_text(BW_PROBLEM)
    rng = random.Random(3)
    for k in (2, 3):
        (f / f"instance-{k}.pddl").write_text(problem_text(blocksworld(blocks, 3 + k % 2, rng, f"p{k}"), False))
    (f / "instance-1.plan").write_text("(unstack b a)\n(stack b c)\n(pick-up a)\n(stack a b)\n; cost = 4 (unit cost)\n")
    return f
