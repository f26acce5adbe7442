"""``pip install -e ".[dev]"`` installs what the suite needs and not triton (issue #38 item 10).

xgrammar (the XGrammar peer of ``benchmarks/decoding.py``) requires triton, about 1 GB of a venv's
3.6 GB of packages; the suite needs neither: the peer's tests skip without xgrammar, naming the
``bench`` extra that installs it."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def test_the_dev_extra_pulls_neither_xgrammar_nor_triton():
    extras = _extras()
    assert not _names(extras["dev"]) & {"xgrammar", "triton"}, extras["dev"]
    assert {"pytest", "hypothesis", "ruff"} <= _names(extras["dev"])
    assert "xgrammar" in _names(extras["bench"])


def test_tests_that_need_xgrammar_skip_naming_the_bench_extra():
    users = [p for p in (ROOT / "tests").rglob("*.py") if p != Path(__file__) and "xgrammar" in p.read_text()]
    for path in users:
        text = path.read_text()
        if re.search(r"^\s*(import xgrammar|from xgrammar)", text, re.M) or "importorskip(\"xgrammar\"" in text:
            assert '.[bench]' in text, f"{path.relative_to(ROOT)} needs xgrammar: its skip should name the bench extra"
