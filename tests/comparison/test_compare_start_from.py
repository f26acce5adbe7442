"""Arms that share a warm start (``start_from``, :mod:`rltf.comparison.suites`): the arm starts from the named
earlier arm's fine-tuned planner of the same seed with its own SFT off; the suite refuses a ``start_from`` that
is not an earlier arm; choosing the arm runs its source first; a missing source is a failed run naming it,
not a run from the base planner. End to end with real tiny pddl runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rltf.comparison.runs import planned_runs, run_one, run_suite
from rltf.comparison.suites import suite_from_dict
from rltf.config.loading import ConfigError

TINY = ["config=configs/pddl-blocksworld.yaml", "env.pddl.sizes=[3,3]", "env.pddl.long_sizes=[4,4]",
        "env.pddl.train_size=8", "env.pddl.validation_size=2", "env.pddl.test_size=4", "env.pddl.test_long_size=2",
        "sft.epochs=2", "rltf.steps=1", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=1",
        "eval.schemas=[finetuned,rltf]", "logging.progress_bar=false", "planner.max_plan_tokens=24"]

OTHER = "rltf.baseline=moving_average"  # an arm unlike the source


def suite(**dependent):
    return suite_from_dict({
        "name": "shared", "seeds": 1, "common": TINY,
        "arms": [{"name": "src", "script": "train/rltf.py"},
                 {"name": "other", "script": "train/rltf.py", "overrides": [OTHER]},
                 {"name": "dep", "script": "train/rltf.py", "overrides": [OTHER], **dependent}],
        "rows": [{"label": "src", "arm": "src", "schema": "rltf"}]})


def test_start_from_must_name_an_earlier_arm():
    with pytest.raises(ConfigError, match="arm dep: start_from='later': expected an arm listed before it"):
        suite(start_from="later")
    with pytest.raises(ConfigError, match="arm dep: start_from='dep': expected an arm listed before it "
                                          r"\(src, other\)"):
        suite(start_from="dep")


def test_the_command_starts_from_the_source_sft_of_the_same_seed(tmp_path):
    s = suite(start_from="src")
    args = s.arm("dep").command(s.common, ["rltf.lr=1e-4"], 3, tmp_path / "dep")
    i = args.index(f"planner.model={tmp_path / 'src' / 'seed3' / 'sft'}")
    assert args[i + 1] == "sft.enabled=false" and args.index("rltf.lr=1e-4") < i < args.index("seed=3")
    assert not any(a.startswith("planner.model=") for a in s.arm("other").command(s.common, [], 3, tmp_path))


def test_choosing_an_arm_runs_its_source_first():
    s = suite(start_from="src")
    assert [(seed, a.name) for seed, a in planned_runs(s, [0, 1], ["dep"])] == [
        (0, "src"), (0, "dep"), (1, "src"), (1, "dep")]
    assert [a.name for _, a in planned_runs(s, [0], ["other"])] == ["other"]


def test_a_missing_source_is_a_failed_run_naming_it(tmp_path):
    logged = []
    record = run_one(suite(start_from="src"), suite(start_from="src").arm("dep"), 0, tmp_path, log=logged.append)
    assert record.status == "failed" and "no fine-tuned planner at" in record.error
    assert "arm src seed 0 failed or has not run" in record.error and "FAILED" in logged[-1]
    assert not (tmp_path / "dep" / "seed0").exists()  # nothing was started


def test_a_shared_warm_start_is_the_source_planner(tmp_path, monkeypatch):
    monkeypatch.setenv("RLTF_CACHE_DIR", str(tmp_path / "cache"))
    s = suite(start_from="src")
    extra = [f"planner.embedded.dir={tmp_path / 'embedded'}"]
    records = run_suite(s, tmp_path / "runs", extra, arms=["dep"], log=lambda _: None)
    assert [(r.arm, r.status) for r in records] == [("src", "done"), ("dep", "done")]
    src, dep = (tmp_path / "runs" / a / "seed0" for a in ("src", "dep"))
    assert (src / "sft_history.json").is_file() and not (dep / "sft_history.json").exists()  # no second SFT
    log = (tmp_path / "runs" / "dep" / "seed0.log").read_text()
    assert f"planner: {src / 'sft'}" in log
    plans = [json.loads(Path(d, "results.json").read_text())["plans"]["finetuned"] for d in (src, dep)]
    assert plans[0] == plans[1]  # the same weights decode the same greedy plans
