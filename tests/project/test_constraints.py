"""Reproducible installs (issue 38, item 9): constraints.txt pins every dependency pyproject.toml declares
(names compared as PEP 503 normalises them) to one exact version its range accepts, and the README's and
CI's installs use it. Written by ``python .ci/constraints.py`` from an installed environment."""

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's (constraints.txt pins Python 3.11's)")

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "constraints.txt"
# .[hf] (diffusers, timm) is installed on the GPU machine only, so nothing here resolved it: unpinned, said so
# in constraints.txt's header
UNPINNED_EXTRAS = {"hf"}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    out: dict[str, str] = {}
    for n, raw in enumerate(CONSTRAINTS.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s=<>!~;,]+)", line)
        assert m, f"constraints.txt:{n}: {raw!r} is not one exact pin (name==version)"
        name = normalise(m.group(1))
        assert name not in out, f"constraints.txt:{n}: {m.group(1)} pinned twice"
        Version(m.group(2))  # a valid version
        out[name] = m.group(2)
    return out


def declared() -> list[tuple[str, Requirement]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [("dependencies", Requirement(r)) for r in project["dependencies"]]
    for extra, items in project.get("optional-dependencies", {}).items():
        if extra not in UNPINNED_EXTRAS:
            reqs += [(f"[{extra}]", Requirement(r)) for r in items]
    return reqs


def test_every_declared_dependency_has_one_pin_its_range_accepts():
    pinned = pins()
    unpinned = [f"{req.name} ({where})" for where, req in declared() if normalise(req.name) not in pinned]
    assert not unpinned, f"constraints.txt has no pin for: {unpinned} (python .ci/constraints.py)"
    outside = [f"{req} ({where}): pinned {pinned[normalise(req.name)]}" for where, req in declared()
               if not req.specifier.contains(pinned[normalise(req.name)], prereleases=True)]
    assert not outside, f"pins outside pyproject.toml's ranges: {outside}"


def test_the_torch_pin_accepts_the_cpu_and_the_cuda_wheel():
    torch = pins()["torch"]
    assert "+" not in torch, "a local label (+cpu) in the pin would refuse a CUDA user's wheel"
    for build in (f"{torch}+cpu", f"{torch}+cu128", torch):
        assert SpecifierSet(f"=={torch}").contains(build), build
    # a CUDA torch requires its own triton exactly (2.13.0: triton==3.7.1): a triton pin would refuse it
    assert "triton" not in pins()


def test_the_readme_and_ci_install_with_the_constraints():
    ci = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    ci_installs = re.findall(r"^python -m pip install (.+)$", ci, re.M)
    readme_installs = re.findall(r"^pip install (.+)$", readme, re.M)
    assert len(ci_installs) >= 3 and readme_installs
    for cmd in ci_installs + readme_installs:
        assert cmd.endswith(" -c constraints.txt"), f"pip install {cmd}: without -c constraints.txt"
    assert "torch==2.13.0" in ci_installs[0], "torch is installed first, pinned"
