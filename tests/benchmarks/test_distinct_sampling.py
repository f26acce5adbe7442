"""benchmarks/distinct_sampling.py runs and prints one row per grammar with its counts."""

import pytest

from benchmarks import distinct_sampling

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_quick_run_prints_every_grammar_with_distinct_plans(capsys):
    distinct_sampling.main(["--quick", "-k", "3"])
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| OpenAGI") or ln.startswith("| travel")]
    assert len(rows) == 5
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        passes = [int(x) for x in cells[5].split(" / ")]
        distinct = [float(x) for x in cells[7].split(" / ")]
        assert all(p > 0 for p in passes) and distinct[1] == 3.0  # every draw: 3 distinct plans
