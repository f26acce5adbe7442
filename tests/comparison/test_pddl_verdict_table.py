"""The pddl verdict's table (``rltf/comparison/env_values.py``, ``aggregate.py``, ``report.py``): a row whose
column is ``headline`` reads the env's declared headline (pddl: the plain goal rate) per task from the env's
own table columns, not the training reward -- here shaping is on, so the reward is not the goal rate -- and a
suite with ``splits`` reports every row on the test and test-long splits apart, each with its paired
differences. Runs are written as ``train/rltf.py`` writes them (``results.json`` beside ``config.yaml``),
their plans scored by a real generated Blocksworld set."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

import envs
from rltf.comparison import env_values
from rltf.comparison.aggregate import aggregate
from rltf.comparison.report import comparison_markdown
from rltf.comparison.results import read_runs
from rltf.comparison.suites import suite_from_dict

ENV = {"name": "pddl", "pddl": {"domain": "blocksworld", "sizes": [3, 3], "long_sizes": [4, 4], "train_size": 4,
                                "validation_size": 1, "test_size": 4, "test_long_size": 3, "seed": 11,
                                "grammar": "legal", "shaping": {"goal_fraction": 0.5, "step_cost": 0.0}}}


def suite(splits: bool) -> object:
    return suite_from_dict({
        "name": "pddl-table", "seeds": 2, "held_out": "non_train", "paired_reference": "empty",
        **({"splits": ["test", "test-long"]} if splits else {}), "metrics": ["goal rate", "executable"],
        "arms": [{"name": "half", "script": "train/rltf.py"}, {"name": "empty", "script": "train/rltf.py"}],
        "rows": [{"label": "half solved", "arm": "half", "schema": "rltf", "column": "headline"},
                 {"label": "half solved, reward", "arm": "half", "schema": "rltf", "column": "reward"},
                 {"label": "nothing", "arm": "empty", "schema": "rltf", "column": "headline"}]})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two arms x two seeds: ``half`` writes the optimal plan for every other held-out problem and the
    optimal plan without its last action (executable, goal missed: a shaped reward) for the rest; ``empty``
    the empty plan."""
    root = tmp_path_factory.mktemp("pddl_table")
    mp = pytest.MonkeyPatch()
    mp.setenv("RLTF_CACHE_DIR", str(root / "cache"))
    env_values.clear_cache()
    held = {s: envs.make(ENV, s) for s in ("test", "test-long")}
    truth = {}
    for arm in ("half", "empty"):
        for seed in (0, 1):
            plans, rewards, reached = {}, {}, {}
            for env in held.values():
                for k, t in enumerate(env.tasks()):
                    full = t.reference_plan
                    plan = "" if arm == "empty" else full if (k + seed) % 2 == 0 else full.rsplit(" (", 1)[0]
                    (r,) = env.reward_plans([(t, plan)])
                    plans[str(t.id)], rewards[str(t.id)], reached[str(t.id)] = plan, r.reward, float(r.reached)
            run = root / "runs" / arm / f"seed{seed}"
            run.mkdir(parents=True)
            (run / "config.yaml").write_text(yaml.safe_dump({"seed": seed, "env": ENV}))
            row = {"goal rate": float(np.mean(list(reached.values()))), "executable": 1.0,
                   "reward": float(np.mean(list(rewards.values())))}
            (run / "results.json").write_text(json.dumps({"table": {"rows": {"rltf": row}},
                                                          "plans": {"rltf": plans}, "scores": {"rltf": rewards}}))
            truth[arm, seed] = (reached, rewards)
    ids = {s: [str(t.id) for t in e.tasks()] for s, e in held.items()}
    yield root / "runs", truth, ids
    mp.undo()
    env_values.clear_cache()


def test_the_headline_is_the_goal_rate_per_split_whatever_the_shaping(runs):
    root, truth, ids = runs
    s = suite(splits=True)
    summary = aggregate(s, read_runs(s, root))
    assert summary["headline"] == "goal rate" and summary["splits"] == ["test", "test-long"]
    by = {(r["label"], r["split"]): r for r in summary["rows"]}
    assert len(by) == 6
    for split in ("test", "test-long"):
        goal = [np.mean([truth["half", seed][0][t] for t in ids[split]]) for seed in (0, 1)]
        shaped = [np.mean([truth["half", seed][1][t] for t in ids[split]]) for seed in (0, 1)]
        row = by["half solved", split]
        assert row["column"] == "goal rate" and row["n_tasks"] == len(ids[split])
        assert row["values"] == pytest.approx({"0": goal[0], "1": goal[1]})
        assert by["half solved, reward", split]["values"] == pytest.approx({"0": shaped[0], "1": shaped[1]})
        assert np.mean(shaped) > np.mean(goal) > 0  # shaping on: the reward is not the goal rate
        assert by["nothing", split]["mean"] == 0.0
        assert row["metrics"]["goal rate"]["mean"] == pytest.approx(np.mean(goal))
        paired = summary["paired_by_split"][split]
        (c,) = [c for c in paired["comparisons"] if c["arm"] == "half"]
        assert c["mean"] == pytest.approx(np.mean(goal)) and c["n_tasks"] == len(ids[split])
    md = comparison_markdown(summary)
    assert "#### Split `test`" in md and "#### Split `test-long`" in md and "(`goal rate`" in md


def test_without_splits_the_headline_is_the_pooled_goal_rate(runs):
    root, truth, ids = runs
    s = suite(splits=False)
    summary = aggregate(s, read_runs(s, root))
    (row,) = [r for r in summary["rows"] if r["label"] == "half solved"]
    every = ids["test"] + ids["test-long"]
    want = [np.mean([truth["half", seed][0][t] for t in every]) for seed in (0, 1)]
    assert row["values"] == pytest.approx({"0": want[0], "1": want[1]}) and "split" not in row
    assert row["n_tasks"] == len(every) and "splits" not in summary


def test_bad_splits_are_refused():
    from rltf.config.loading import ConfigError

    with pytest.raises(ConfigError, match="distinct split names"):
        suite_from_dict({"name": "x", "splits": ["test", "test"], "arms": [{"name": "a", "script": "s"}]})


def test_the_results_page_shows_each_split_the_paired_differences_and_cpu_per_arm(runs, tmp_path, monkeypatch):
    from benchmarks import results_pages as rp

    root, _, _ = runs
    s = suite(splits=True)
    summary = aggregate(s, read_runs(s, root))
    summary["runs"]["half"][0]["cpu_s"], summary["runs"]["half"][1]["cpu_s"] = 10.0, 14.0
    folder = tmp_path / "pddl-verdict"
    folder.mkdir()
    (folder / "compare.json").write_text(json.dumps(summary, default=str))
    monkeypatch.setattr(rp, "REPO", tmp_path)
    text = rp.render_page(rp.replace(rp.next_page("pddl-verdict"), source=folder))
    assert "#### Split `test`" in text and "#### Split `test-long`" in text
    assert text.count("Paired differences against **nothing**") == 2 and "| half solved | +0.5" in text
    assert "| `half` | 2 | 12 ± 3 |" in text and "| `empty` | 2 | — |" in text
    (folder / "compare.json").write_text(json.dumps({**summary, "splits": None}, default=str))
    with pytest.raises(rp.ResultsError, match="no per-split rows"):
        rp.render_page(rp.replace(rp.next_page("pddl-verdict"), source=folder))
