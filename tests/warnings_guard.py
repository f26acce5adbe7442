"""The guard against warnings from our own code (issue #38 item 10), registered by tests/conftest.py.

Every phase of a test (setup, call, teardown) runs under its own record of warnings; each recorded
warning is passed on to pytest (its summary and ``-W`` options see them as before), and one whose
file is ours (:data:`OWN`: the file of the line a warning is attributed to, the caller's for a
``stacklevel`` above 1, so a library's warning about our call of it counts) fails the test, naming
file, line and message. A test that expects a warning says so: ``pytest.warns`` (the warnings it
matches never reach the record; those it does not match do) or a ``filterwarnings`` mark (an ignored
warning is never recorded). ResourceWarning is left out: Python ignores it by default, and it is
raised where a leaked object is collected, often far from the leak (``-W default`` shows them).

Not a ``filterwarnings = ["error:::rltf", ...]`` entry: a warning turned into an exception where it is
raised is swallowed by the ``except Exception`` of a failing expert or flow backend (the test then
fails, if at all, far from its cause); recorded, it is reported whatever the code around it does."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rltf", "constrained_decoding", "envs", "common", "train", "benchmarks", "tests")
OWN = tuple(f"{ROOT / name}{os.sep}" for name in PACKAGES)
SHOWN_CHARS = 300  # of each warning's message, in the failure


def ours(w: warnings.WarningMessage) -> bool:
    """Whether a recorded warning is attributed to a file of ours (ResourceWarning aside)."""
    return not issubclass(w.category, ResourceWarning) and os.path.abspath(str(w.filename)).startswith(OWN)


def _guarded():
    """The body of each wrapper: the phase runs under a record; its warnings go on to pytest, and
    ours fail a phase that passed (one that failed keeps its own error)."""
    try:
        with warnings.catch_warnings(record=True) as seen:  # (the filters in force, pytest's and marks', kept)
            result = yield
    finally:
        for w in seen:  # on to pytest's own record (outside this one: no filter applies twice)
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
    mine = [w for w in seen if ours(w)]
    if mine:
        lines = [f"{os.path.relpath(w.filename, ROOT)}:{w.lineno}: {w.category.__name__}: "
                 f"{str(w.message)[:SHOWN_CHARS]}" for w in mine]
        pytest.fail("warnings from our own code (fix them, or expect them with pytest.warns or a "
                    "filterwarnings mark; tests/warnings_guard.py):\n  " + "\n  ".join(lines), pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _guarded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _guarded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _guarded())
