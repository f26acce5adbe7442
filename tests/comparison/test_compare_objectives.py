"""The objective comparison suites (issue #26 item 4): ``configs/compare/objectives.yaml`` (the
embedded OpenAGI default) and ``configs/compare/objectives-travel.yaml`` (the travel MTP flow) run the
same five objectives, and their arms differ only in the objective (baseline, update epochs)."""

from __future__ import annotations

import dataclasses

import pytest

from rltf.comparison.suites import check_arms, load_suite
from rltf.config.loading import config_to_yaml

OBJECTIVES = {"reinforce": ("moving_average", 1), "rloo": ("rloo", 1), "grpo-group": ("grpo", 1),
              "rloo-clip2": ("rloo", 2), "rloo-clip4": ("rloo", 4)}


@pytest.mark.parametrize("name", ["objectives", "objectives-travel"])
def test_the_objective_suites_arms_differ_only_in_the_objective(name):
    suite = load_suite(name)
    assert [a.name for a in suite.arms] == list(OBJECTIVES) and suite.seeds == 3
    loaded = check_arms(suite)
    assert {n: (c.rltf.baseline, c.rltf.update_epochs) for n, c in loaded.items()} == OBJECTIVES
    reference = loaded["reinforce"]
    for arm_name, cfg in loaded.items():  # the objective set to the reference's: the same run config
        same = dataclasses.replace(cfg, rltf=dataclasses.replace(cfg.rltf, baseline=reference.rltf.baseline,
                                                                 update_epochs=reference.rltf.update_epochs))
        assert config_to_yaml(same) == config_to_yaml(reference), arm_name
        assert cfg.rltf.minibatches == 1 and cfg.rltf.select == "last", arm_name
    # the arms read and count alike; every arm is one trained row of the table
    assert len({(a.script, a.results, a.reader, a.history, a.plans_per_step) for a in suite.arms}) == 1
    assert sorted(r.arm for r in suite.rows if r.trained) == sorted(OBJECTIVES)


def test_the_travel_suite_trains_the_mtp_flow_on_one_budget():
    suite = load_suite("objectives-travel")
    cfg = check_arms(suite, arms=["reinforce"])["reinforce"]
    assert cfg.flow.enabled and cfg.flow.methods == ["mtp"] and cfg.flow.credit == "global"
    assert (cfg.rltf.steps, cfg.rltf.tasks_per_batch, cfg.rltf.k_samples) == (12, 4, 4)
    assert cfg.flow.splits == ["test"] and cfg.flow.limit == 18 and cfg.flow.warm_start_queries == 54
    arm = suite.arm("reinforce")
    assert arm.results == "flow_results.json" and arm.reader == "rltf.stages.flow_job:read_flow_results"
    assert {r.column for r in suite.rows} == {"final pass"} and "reward" in suite.metrics
