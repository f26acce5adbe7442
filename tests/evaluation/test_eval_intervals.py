"""Held-out figures with their spread (issue #15, item 5): the bootstrap interval over tasks, the
table and files that carry it, and ``train/evaluate.py`` on validation + test together."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from rltf.config.loading import ConfigError, load_config
from rltf.evaluation import schemas as ev

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------------------ bootstrap interval
def test_bootstrap_interval_contains_the_mean_and_is_seeded():
    rng = np.random.default_rng(0)
    for trial in range(20):
        scores = rng.uniform(0, 1, size=int(rng.integers(5, 40)))
        lo, hi = ev.bootstrap_interval(scores)
        assert 0 <= lo <= scores.mean() <= hi <= 1, (trial, lo, scores.mean(), hi)
    scores = rng.uniform(0, 1, size=10)
    assert ev.bootstrap_interval(scores) == ev.bootstrap_interval(list(scores))  # same scores, same interval
    assert ev.bootstrap_interval(scores, seed=1) == ev.bootstrap_interval(scores, seed=1)
    assert ev.bootstrap_interval(scores, seed=1) != ev.bootstrap_interval(scores, seed=2)
    # a wider level gives a wider interval from the same resamples
    lo90, hi90 = ev.bootstrap_interval(scores, level=0.9)
    lo99, hi99 = ev.bootstrap_interval(scores, level=0.99)
    assert lo99 <= lo90 and hi90 <= hi99


def test_bootstrap_interval_narrows_with_more_tasks():
    rng = np.random.default_rng(1)
    widths = {}
    for n in (10, 40, 160):
        w = [np.subtract(*ev.bootstrap_interval(rng.uniform(0, 1, size=n))[::-1]) for _ in range(5)]
        widths[n] = float(np.mean(w))
    assert widths[10] > widths[40] > widths[160] > 0
    # ~1/sqrt(n): 4x the tasks, about half the width
    assert 0.35 < widths[40] / widths[10] < 0.65


def test_bootstrap_interval_edge_cases():
    assert ev.bootstrap_interval([0.7] * 12) == (pytest.approx(0.7), pytest.approx(0.7))
    assert all(np.isnan(ev.bootstrap_interval([])))
    with pytest.raises(ValueError, match="level"):
        ev.bootstrap_interval([0.1, 0.2], level=1.5)
    with pytest.raises(ValueError, match="resamples"):
        ev.bootstrap_interval([0.1, 0.2], resamples=0)
    assert ev.format_interval(0.73671, (0.612, 0.8512)) == "0.7367 [0.61, 0.85]"
    assert ev.format_interval(0.5, None) == "0.5000"


def test_results_table_and_markdown_carry_the_interval_of_the_overall_score():
    tasks = [SimpleNamespace(id=i, metric="a" if i % 2 else "b") for i in range(10)]
    good = ev.SchemaResult("rltf", scores={i: 0.5 + 0.05 * i for i in range(10)})
    flat = ev.SchemaResult("oracle", scores={i: 0.9 for i in range(10)})
    table = ev.results_table([good, flat], tasks)
    assert table["columns"] == ["a", "b", "overall"]  # no new column: the rows stay as they were
    assert table["interval"]["column"] == "overall" and table["interval"]["resamples"] == ev.BOOTSTRAP_RESAMPLES
    lo, hi = table["intervals"]["rltf"]
    assert (lo, hi) == ev.bootstrap_interval(list(good.scores.values()))
    assert lo < table["rows"]["rltf"]["overall"] < hi
    assert table["intervals"]["oracle"] == [pytest.approx(0.9), pytest.approx(0.9)]
    md = ev.table_markdown(table, "t")
    assert f"| {ev.format_interval(good.overall, (lo, hi))} |" in md and "| 0.9000 [0.90, 0.90] |" in md
    assert "95% bootstrap interval over tasks" in md
    json.dumps(table)  # stored in the results JSON as it is


# ------------------------------------------------------------------------------ the splits key


def test_an_unknown_split_is_refused_with_the_key_named():
    with pytest.raises(ConfigError, match=r"eval\.splits.*train, validation, test"):
        load_config(["eval.splits=[validation,tset]"])
    assert load_config(["eval.splits=[validation,test]"]).eval.splits == ["validation", "test"]
