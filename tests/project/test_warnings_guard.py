"""No warnings from our own code in the test run (issue #38 item 10): tests/warnings_guard.py fails a
test phase that records a warning attributed to a file of ours, and passes every warning on to pytest;
tests that expect a warning say so (``pytest.warns``, a ``filterwarnings`` mark).

Before the change the suite ended with 59 warnings of ours (prompts cut by the travel flows, experts
failing without diffusers, a tensor that kept its graph in a test), and nothing stopped more."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from constrained_decoding.prompts import PromptTruncationWarning
from tests import warnings_guard
from tests.warnings_guard import ROOT, _guarded

OUR_FILE = str(ROOT / "rltf" / "flows" / "stray.py")  # (need not exist: a frame's file name is what counts)


def _in_file(filename: str, source: str, **names):
    """Runs ``source`` as code of ``filename``: a warning it raises is attributed to that file."""
    exec(compile(source, filename, "exec"), {"warnings": warnings, "np": np, **names})


def _phase(body, passed_on: list | None = None) -> list:
    """Runs ``body`` as a test phase under the guard, as pluggy drives a wrapper; returns the warnings
    the guard passed on, also into ``passed_on`` (raises what the guard raises)."""
    passed_on = [] if passed_on is None else passed_on
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        guard = _guarded()
        next(guard)
        try:
            try:
                body()
            except BaseException as exc:  # the phase failed: the wrapper gets its exception
                guard.throw(exc)
            with pytest.raises(StopIteration):
                guard.send(None)
        finally:
            passed_on.extend(log)
    return passed_on


def test_a_warning_from_our_code_fails_the_test_naming_it():
    with pytest.raises(pytest.fail.Exception, match=r"rltf/flows/stray\.py:1: RuntimeWarning: stray") as failed:
        _phase(lambda: _in_file(OUR_FILE, "warnings.warn('stray', RuntimeWarning)"))
    assert "pytest.warns or a filterwarnings mark" in str(failed.value)


def test_a_librarys_warning_about_our_line_counts():
    # numpy's "divide by zero" is attributed to the line that divides, as torch's "requires_grad=True to a
    # scalar" was to tests/flows/test_flow_travel.py
    with pytest.raises(pytest.fail.Exception, match=r"stray\.py:1: RuntimeWarning: divide by zero"):
        _phase(lambda: _in_file(OUR_FILE, "np.ones(1) / 0"))


def test_warnings_from_other_files_and_resource_warnings_pass_and_go_on_to_pytest():
    passed_on = _phase(lambda: (_in_file("/elsewhere/lib.py", "warnings.warn('theirs', UserWarning)"),
                                _in_file(OUR_FILE, "warnings.warn('leak', ResourceWarning)")))
    assert [(str(w.message), w.filename) for w in passed_on] == [("theirs", "/elsewhere/lib.py"), ("leak", OUR_FILE)]


def test_an_expected_warning_passes_and_an_unexpected_one_inside_pytest_warns_does_not():
    def expected():
        with pytest.warns(UserWarning, match="prompts longer"):  # (as tests/rl/test_rl_correctness.py asks)
            _in_file(OUR_FILE, "warnings.warn('prompts longer than 3 tokens', category)",
                     category=PromptTruncationWarning)

    assert _phase(expected) == []

    def unexpected():
        with pytest.warns(UserWarning, match="prompts longer"):
            _in_file(OUR_FILE, "warnings.warn('prompts longer', UserWarning); warnings.warn('stray', RuntimeWarning)")

    with pytest.raises(pytest.fail.Exception, match="RuntimeWarning: stray"):
        _phase(unexpected)


def test_a_failing_test_keeps_its_own_error_and_its_warnings_still_go_on():
    def fails():
        _in_file(OUR_FILE, "warnings.warn('stray', RuntimeWarning)")
        raise KeyError("its own")

    passed_on = []
    with pytest.raises(KeyError, match="its own"):
        _phase(fails, passed_on)
    assert [str(w.message) for w in passed_on] == ["stray"]


def test_the_session_runs_every_phase_under_the_guard(request):
    for phase in ("pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown"):
        impls = getattr(request.config.hook, phase).get_hookimpls()
        assert any(impl.function is getattr(warnings_guard, phase) for impl in impls), phase
