"""The SmolLM2 comparison suite (``configs/compare/smollm2.yaml``, issue #23 item 5): RLTF and two TRL
GRPO arms (free text from a text SFT start, constrained sampling from RLTF's start) on
SmolLM2-135M-Instruct with one prompt and budget; and the held-out valid-plan rate read from a
results table's ``valid_rate``."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml

from rltf.comparison.report import write_report
from rltf.comparison.suites import check_arms, load_suite, suite_from_dict
from rltf.config.loading import RunConfig
from rltf.evaluation import schemas as ev


def test_the_smollm2_suite_runs_every_arm_on_smollm2_with_one_start_and_one_budget():
    suite = load_suite("smollm2")
    assert {a.name for a in suite.arms} == {"rltf", "grpo-text", "grpo-constrained", "bounds"} and suite.seeds == 3
    loaded = check_arms(suite)
    trained = {r.arm for r in suite.rows if r.trained}
    assert trained == {"rltf", "grpo-text", "grpo-constrained"}
    assert {r.schema for r in suite.rows if r.arm == "rltf"} == {"zero", "few", "finetuned", "rltf"}
    for name in trained:
        cfg = loaded[name]
        assert isinstance(cfg, RunConfig), name
        assert cfg.planner.model == "smollm2" and cfg.planner.lora.enabled and cfg.sft.epochs == 2, name
        assert (cfg.rltf.steps, cfg.rltf.tasks_per_batch, cfg.rltf.k_samples) == (40, 4, 4), name
        assert cfg.rltf.lr == loaded["rltf"].rltf.lr and cfg.rltf.temperature == loaded["rltf"].rltf.temperature
        assert cfg.eval.splits == ["validation", "test"], name
        assert suite.arm(name).plans_per_step == ("rltf.tasks_per_batch", "rltf.k_samples")
    assert loaded["rltf"].rltf.baseline == "rloo"
    free, constrained = loaded["grpo-text"].grpo, loaded["grpo-constrained"].grpo
    assert (free.sampling, constrained.sampling) == ("free", "constrained")
    assert constrained.warm_start == "constrained"  # RLTF's own fine-tuned start
    assert free.warm_start == "text"  # a constrained start writes no valid free text: TRL's own text SFT
    assert suite.arm("grpo-text").history == suite.arm("grpo-constrained").history == "train_history.json"
    assert loaded["bounds"].eval.schemas == ["reference", "oracle"] and suite.arm("bounds").seeds == 1


def test_the_held_out_valid_rate_comes_from_the_results_tables_valid_rate(tmp_path):
    tasks = [SimpleNamespace(id=i, metric="m") for i in range(4)]
    suite = suite_from_dict({"name": "v", "seeds": 1, "arms": [{"name": "a", "script": "x.py", "history": None}],
                             "rows": [{"label": "zero", "arm": "a", "schema": "zero"},
                                      {"label": "tuned", "arm": "a", "schema": "finetuned", "valid": 1.0}]})
    zero = ev.SchemaResult("zero", scores={i: 0.1 for i in range(4)}, valid={0: True, 1: False, 2: False, 3: False})
    tuned = ev.SchemaResult("finetuned", scores={i: 0.5 for i in range(4)})  # validity not recorded
    run_dir = tmp_path / "a" / "seed0"
    run_dir.mkdir(parents=True)
    (run_dir / "results.json").write_text(json.dumps({"table": ev.results_table([zero, tuned], tasks),
                                                      "scores": {"zero": zero.scores, "finetuned": tuned.scores}}))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({}))
    rows = {r["label"]: r for r in write_report(suite, tmp_path, log=lambda _: None)["rows"]}
    assert rows["zero"]["valid_held_out"] == pytest.approx(0.25)
    assert rows["tuned"]["valid_held_out"] == 1.0  # the suite's row value where the table has none


def test_the_smollm2_ablations_suite_changes_one_thing_per_arm_against_the_shipped_config():
    suite = load_suite("smollm2-ablations")
    assert suite.seeds == 3
    loaded = check_arms(suite)
    shipped = loaded["rloo-all"]
    assert shipped.planner.model == "smollm2" and shipped.rltf.baseline == "rloo" and shipped.rltf.update_epochs == 1
    assert set(shipped.planner.lora.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                        "up_proj", "down_proj"}
    changed = {"rloo-attention": ("planner.lora.target_modules", ["q_proj", "k_proj", "v_proj", "o_proj"]),
               "rloo-qv": ("planner.lora.target_modules", ["q_proj", "v_proj"]),
               "reinforce": ("rltf.baseline", "moving_average"), "grpo-group": ("rltf.baseline", "grpo"),
               "rloo-clip2": ("rltf.update_epochs", 2), "rloo-clip4": ("rltf.update_epochs", 4)}
    assert set(changed) | {"rloo-all"} == {a.name for a in suite.arms}

    def value(cfg, dotted):
        section, key = dotted.split(".", 1)
        obj = getattr(cfg, section)
        for part in key.split("."):
            obj = getattr(obj, part)
        return obj

    keys = {key for key, _ in changed.values()}
    for arm, (key, expected) in changed.items():
        cfg = loaded[arm]
        assert value(cfg, key) == expected, arm
        for other in keys - {key}:  # every other ablated setting is the shipped one
            assert value(cfg, other) == value(shipped, other), (arm, other)
        assert (cfg.rltf.steps, cfg.rltf.tasks_per_batch, cfg.rltf.k_samples, cfg.sft.epochs, cfg.seed) == (
            shipped.rltf.steps, shipped.rltf.tasks_per_batch, shipped.rltf.k_samples, shipped.sft.epochs, shipped.seed)
        assert cfg.eval.schemas == ["finetuned", "rltf"] and cfg.eval.splits == ["validation", "test"]
    assert {r.arm for r in suite.rows if r.schema == "finetuned"} == {"rloo-all", "rloo-attention", "rloo-qv"}
