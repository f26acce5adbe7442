"""benchmarks/decoding.py's travel section runs end to end at a tiny size and prints its ratio lines."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "decoding.py"


def test_travel_section_prints_build_times_and_per_step_ratios(capsys):
    spec = importlib.util.spec_from_file_location("bench_decoding", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--sections", "travel", "--samples", "2", "--beams", "2", "--prompts", "2", "--repeats", "1",
                "--travel-queries", "1", "--build-queries", "1", "--build-repeats", "1", "--threads", "1"])
    out = capsys.readouterr().out
    for days in (3, 5, 7):
        assert re.search(rf"travel {days}-day\s+1\s+\d", out)
    assert re.search(r"openagi \(signature\)\s+\d+\s+\d", out)
    for name in ("travel", "openagi"):
        for mode in ("sample", "beam"):
            line = rf"^{name} constrained/unconstrained per step: (\d+\.\d+) \({mode};.*per token-step: (\d+\.\d+)\)$"
            m = re.search(line, out, re.MULTILINE)
            assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0, out
    # ours prefills forced text (several tokens per row in a pass): more token-steps than row-steps on travel
    rows = re.findall(r"^  travel\s+ours\s+[\d.]+\s+\d+\s+(\d+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(\d+)", out, re.MULTILINE)
    assert rows and all(int(k) > int(r) for r, k in rows), out
