"""Held-out sets with power (issue #37 item 5): a suite's ``held_out`` sets every arm's held-out tasks
(``eval.splits=[non_train]``: every task of the suite not in its train split), every row keeps its
per-task scores per seed in ``compare.json``, and the report pairs each arm with the reference arm
by (task, seed) (``rltf/comparison/paired.py``); ``configs/compare/smollm2-full.yaml`` is that
comparison on the full OpenAGI suite's 165 non-train tasks. The last test runs a tiny suite end to end
(``train/compare.py`` running ``train/rltf.py`` arms) on the lite suite's non-train tasks."""

from __future__ import annotations

import contextlib
import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from envs.openagi.split import load_split
from envs.openagi.suite import task_specs
from rltf.comparison.report import write_report
from rltf.comparison.suites import check_arms, load_suite, suite_from_dict
from rltf.config.loading import ConfigError, load_config
from rltf.evaluation import schemas as ev
from rltf.stages.plan_job import Envs, build_envs

pytestmark = [pytest.mark.usefixtures("one_torch_thread")]


# ------------------------------------------------------------------------------ the held-out set
def test_non_train_is_every_task_of_the_suite_outside_the_train_split():
    tasks = [SimpleNamespace(id=i) for i in range(10)]
    # tasks 8 and 9 are in no split (the full suite's 126 such tasks): non_train holds them too
    envs = Envs(train=None, held_out=SimpleNamespace(tasks=lambda: tasks),
                splits={"train": [tasks[0], tasks[3]], "validation": [tasks[1], tasks[2]], "test": [tasks[4]]})
    assert [t.id for t in envs.tasks(["non_train"])] == [1, 2, 4, 5, 6, 7, 8, 9]
    assert [t.id for t in envs.tasks(["test", "validation"])] == [4, 1, 2]  # the splits as before
    # the full suite's persisted split: 185 tasks, 20 train -> 165 held out (19 validation, 20 test, 126 in none)
    split, n = load_split("full"), len(task_specs("full"))
    assert (n, len(split["train"]), len(split["validation"]), len(split["test"])) == (185, 20, 19, 20)
    assert n - len(split["train"]) == 165


def test_non_train_on_the_lite_suite_is_its_validation_and_test_tasks():
    cfg = load_config(["env.n_samples=2", "eval.splits=[non_train]"])
    run = SimpleNamespace(cfg=cfg, acc=SimpleNamespace(device="cpu", main_process_first=contextlib.nullcontext))
    envs = build_envs(run)
    held_out = envs.tasks(cfg.eval.splits)
    assert len(held_out) == 18 and len(envs.held_out.tasks()) == 38
    assert sorted(t.id for t in held_out) == sorted(t.id for t in envs.tasks(["validation", "test"]))
    assert not {t.id for t in held_out} & {t.id for t in envs.splits["train"]}


def test_eval_splits_takes_non_train_alone():
    assert load_config(["eval.splits=[non_train]"]).eval.splits == ["non_train"]
    with pytest.raises(ConfigError, match=r"or \[non_train\] alone \(every task not in the train split\)"):
        load_config(["eval.splits=[non_train,test]"])
    with pytest.raises(ConfigError, match=r"list of train, validation, test, or \[non_train\] alone"):
        load_config(["eval.splits=[heldout]"])


def test_a_suites_held_out_sets_every_arms_eval_splits():
    arms = [{"name": "a", "script": "train/rltf.py"}, {"name": "b", "script": "train/rltf.py", "overrides": ["seed=1"]}]
    suite = suite_from_dict({"name": "s", "held_out": "non_train", "common": ["rltf.steps=2"], "arms": arms})
    assert suite.held_out == "non_train" and suite.common == ("rltf.steps=2", "eval.splits=[non_train]")
    cmd = suite.arms[1].command(suite.common, [], 0, Path("x/b"))
    assert cmd.index("eval.splits=[non_train]") < cmd.index("seed=1")
    assert {n: c.eval.splits for n, c in check_arms(suite).items()} == {"a": ["non_train"], "b": ["non_train"]}
    listed = suite_from_dict({"name": "s", "held_out": ["validation", "test"], "arms": arms})
    assert listed.common == ("eval.splits=[validation,test]",)
    assert suite_from_dict({"name": "s", "arms": arms}).common == ()  # unset: the arms' own splits
    # an arm (or common) that sets its own held-out tasks would not be paired with the others
    with pytest.raises(ConfigError, match=r"held_out=non_train sets eval.splits for every arm, but arm b "
                                          r"\(eval.splits=\[test\]\) sets it too"):
        suite_from_dict({"name": "s", "held_out": "non_train",
                         "arms": [arms[0], {**arms[1], "overrides": ["eval.splits=[test]"]}]})
    with pytest.raises(ConfigError, match="held_out=5"):
        suite_from_dict({"name": "s", "held_out": 5, "arms": arms})
    with pytest.raises(ConfigError, match="paired_reference='c' is not an arm of the suite"):
        suite_from_dict({"name": "s", "paired_reference": "c", "arms": arms})
    # the paired reference: named, else the constrained GRPO arm, else the first arm
    assert suite_from_dict({"name": "s", "paired_reference": "b", "arms": arms}).reference_arm().name == "b"
    grpo = {"name": "g", "script": "train/grpo.py", "overrides": ["grpo.sampling=constrained"]}
    assert suite_from_dict({"name": "s", "arms": [*arms, grpo]}).reference_arm().name == "g"
    assert suite_from_dict({"name": "s", "arms": arms}).reference_arm().name == "a"


def test_the_smollm2_full_suite_evaluates_every_arm_on_the_full_suites_165_non_train_tasks():
    suite = load_suite("smollm2-full")
    assert suite.held_out == "non_train" and suite.reference_arm().name == "grpo-constrained"
    arms = {a.name: a for a in suite.arms}
    assert set(arms) == {"rltf", "rltf-moving-average", "rltf-set", "rltf-set-equal-cpu", "grpo-text",
                         "grpo-constrained", "bounds"} and suite.seeds == 5
    # the verdict (issue 37 item 6): 5 seeds for the unordered-set arm and constrained GRPO, 3 for the others
    assert {n for n, a in arms.items() if a.seeds is None} == {"rltf-set", "grpo-constrained"}
    loaded = check_arms(suite)  # validates the hf backend and the data sources; loads nothing
    lite = check_arms(load_suite("smollm2"))
    for name, cfg in loaded.items():
        assert (cfg.env.suite, cfg.env.backend, cfg.eval.splits) == ("full", "hf", ["non_train"]), name
        # validation tasks are held out too: nothing is selected on them
        assert cfg.rltf.eval_every == 0 and cfg.rltf.select == "last", name
        assert "oracle" not in cfg.eval.schemas, name  # millions of plans per full-suite task
        if name in lite and name != "bounds":  # the lite comparison's planner, budget and arms otherwise
            same = lite[name]
            assert (cfg.planner.model, cfg.rltf.steps, cfg.rltf.tasks_per_batch, cfg.rltf.k_samples, cfg.rltf.lr,
                    cfg.sft.epochs) == (same.planner.model, same.rltf.steps, same.rltf.tasks_per_batch,
                                        same.rltf.k_samples, same.rltf.lr, same.sft.epochs), name
            assert (cfg.eval.schemas, getattr(cfg, "grpo", None)) == (same.eval.schemas, getattr(same, "grpo", None))
        elif name.startswith("rltf-"):  # the verdict's RLTF arms: rltf's recipe, another baseline (equal CPU: steps)
            assert cfg.rltf.baseline in ("moving_average", "unordered_set")
            assert cfg.planner.model == lite["rltf"].planner.model
            assert cfg.rltf.steps == (88 if name == "rltf-set-equal-cpu" else lite["rltf"].rltf.steps), name
    # the lite comparison keeps its held-out tasks (and so its recorded run arguments)
    assert load_suite("smollm2").held_out is None and lite["rltf"].eval.splits == ["validation", "test"]
    assert load_suite("smollm2").reference_arm().name == "grpo-constrained"


# ------------------------------------------------------------------------------ the paired report
TASKS = [SimpleNamespace(id=i, metric="m") for i in range(20)]
SUITE = {"name": "paired", "seeds": 2, "held_out": "non_train",
         "arms": [{"name": "rl", "script": "train/rltf.py", "history": None},
                  {"name": "grpo-c", "script": "train/grpo.py", "overrides": ["grpo.sampling=constrained"],
                   "history": None},
                  {"name": "bounds", "script": "train/evaluate.py", "history": None, "seeds": 1}],
         "rows": [{"label": "fine-tuned", "arm": "rl", "schema": "finetuned"},
                  {"label": "RL", "arm": "rl", "schema": "rltf", "trained": True},
                  {"label": "GRPO constrained", "arm": "grpo-c", "schema": "grpo", "trained": True},
                  {"label": "reference", "arm": "bounds", "schema": "reference"}]}


def _write_run(run_dir: Path, schemas: dict[str, dict[int, float]]) -> None:
    run_dir.mkdir(parents=True)
    results = [ev.SchemaResult(s, scores=sc) for s, sc in schemas.items()]
    (run_dir / "results.json").write_text(json.dumps({"table": ev.results_table(results, TASKS),
                                                      "scores": {r.schema: r.scores for r in results}}))


def test_the_report_pairs_each_arm_with_the_reference_by_task_and_seed(tmp_path):
    suite = suite_from_dict(SUITE)
    rng = np.random.default_rng(0)
    scores = {}
    for seed in (0, 1):
        grpo = {t.id: float(rng.uniform(0.2, 0.8)) for t in TASKS}
        rl = {t: v + 0.1 * (t % 2) for t, v in grpo.items()}  # better by 0.1 on odd tasks
        scores[seed] = (rl, grpo)
        # the arms list their tasks in different orders
        _write_run(tmp_path / "rl" / f"seed{seed}", {"finetuned": grpo, "rltf": dict(reversed(list(rl.items())))})
        _write_run(tmp_path / "grpo-c" / f"seed{seed}", {"grpo": grpo})
    _write_run(tmp_path / "bounds" / "seed0", {"reference": {t.id: 0.7 for t in TASKS}})
    summary = write_report(suite, tmp_path, log=lambda _: None)
    rows = {r["label"]: r for r in summary["rows"]}
    # per-task scores per arm row and seed
    assert rows["RL"]["task_scores"] == {str(s): {str(t): pytest.approx(v) for t, v in scores[s][0].items()}
                                         for s in (0, 1)}
    assert rows["reference"]["task_scores"].keys() == {"0"}
    paired = summary["paired"]
    assert paired["reference"] == {"arm": "grpo-c", "label": "GRPO constrained"} and summary["held_out"] == "non_train"
    (rl,) = paired["comparisons"]  # one-seed bounds are not paired
    assert rl["label"] == "RL" and rl["mean"] == pytest.approx(0.05) and (rl["n_tasks"], rl["n_seeds"]) == (20, 2)
    assert rl["per_task"]["3"] == pytest.approx(0.1) and rl["per_task"]["4"] == pytest.approx(0.0)
    assert rl["interval"][0] < 0.05 < rl["interval"][1] and (rl["tasks_better"], rl["tasks_tied"]) == (10, 10)
    md = (tmp_path / "compare.md").read_text()
    assert "Held-out set: `non_train` (20 tasks), the same for every arm." in md
    assert "Paired differences against **GRPO constrained** (arm `grpo-c`)" in md
    lo, hi = rl["interval"]
    assert f"| RL | +0.0500 | [{lo:+.4f}, {hi:+.4f}] | 20 × 2 | 10 / 0 / 10 |" in md
    assert json.loads((tmp_path / "compare.json").read_text())["paired"]["comparisons"][0]["mean"] == \
        pytest.approx(0.05)

    # a run of the reference arm is missing: the comparison names the unpaired (task, seed), no numbers
    (tmp_path / "grpo-c" / "seed1" / "results.json").unlink()
    summary = write_report(suite, tmp_path, log=lambda _: None)
    (rl,) = summary["paired"]["comparisons"]
    assert "mean" not in rl and rl["error"].startswith("20 unpaired (task, seed) between rl and grpo-c: task 0 seed 1 "
                                                       "(no score in grpo-c)")
    assert "| RL | not paired: 20 unpaired (task, seed)" in (tmp_path / "compare.md").read_text()


# ------------------------------------------------------------------------------ end to end
TINY = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "env.n_samples=2", "env.samples_per_step=2",
        "sft.epochs=1", "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=0",
        "rltf.checkpoint_every=0", "eval.num_beams=2", "eval.schemas=[finetuned,rltf]", "logging.progress_bar=false"]


@pytest.mark.slow
def test_a_tiny_suite_runs_every_arm_on_the_non_train_tasks_and_pairs_them(tmp_path):
    from train.compare import main  # a recipe (train/ is not a package of the layers): only this test runs it

    suite_file = tmp_path / "tiny.yaml"
    suite_file.write_text(textwrap.dedent(f"""
        name: tiny
        seeds: 2
        held_out: non_train
        paired_reference: slow
        common: {json.dumps([*TINY, f"planner.embedded.dir={tmp_path / 'embedded'}"])}
        arms:
          - {{name: fast, script: train/rltf.py, overrides: ["rltf.lr=0.01"]}}
          - {{name: slow, script: train/rltf.py, overrides: ["rltf.lr=0.0001"]}}
        rows:
          - {{label: fine-tuned, arm: fast, schema: finetuned}}
          - {{label: RLTF lr 0.01, arm: fast, schema: rltf, trained: true}}
          - {{label: RLTF lr 0.0001, arm: slow, schema: rltf, trained: true}}
        """))
    summary = main([f"suite={suite_file}", f"output_dir={tmp_path / 'out'}"])
    root = tmp_path / "out" / "tiny"
    split = load_split("lite")
    non_train = {str(i) for i in range(len(task_specs("lite")))} - {str(i) for i in split["train"]}
    assert len(non_train) == 18
    for arm in ("fast", "slow"):
        for seed in (0, 1):
            cfg = yaml.safe_load((root / arm / f"seed{seed}" / "config.yaml").read_text())
            assert cfg["eval"]["splits"] == ["non_train"], (arm, seed)
    rows = {r["label"]: r for r in summary["rows"]}
    for label in ("RLTF lr 0.01", "RLTF lr 0.0001"):
        assert set(rows[label]["task_scores"]) == {"0", "1"}
        assert all(set(per_task) == non_train for per_task in rows[label]["task_scores"].values()), label
        assert rows[label]["n_tasks"] == 18
    (fast,) = summary["paired"]["comparisons"]
    assert summary["paired"]["reference"] == {"arm": "slow", "label": "RLTF lr 0.0001"}
    assert (fast["label"], fast["n_tasks"], fast["n_seeds"]) == ("RLTF lr 0.01", 18, 2)
    expected = np.mean([s - rows["RLTF lr 0.0001"]["task_scores"][seed][t]
                        for seed, per_task in rows["RLTF lr 0.01"]["task_scores"].items() for t, s in per_task.items()])
    assert fast["mean"] == pytest.approx(expected)
    assert fast["mean"] == pytest.approx(rows["RLTF lr 0.01"]["mean"] - rows["RLTF lr 0.0001"]["mean"])
    md = (root / "compare.md").read_text()
    assert "Held-out set: `non_train` (18 tasks)" in md and "| RLTF lr 0.01 | " in md.split("Paired differences")[1]
