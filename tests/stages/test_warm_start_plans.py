"""``sft.max_plans`` (issue #50's "warm start on k optimal plans"): SFT fits the reference plans of k train
tasks, a seeded choice, while RLTF keeps every train task; 0 fits them all."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rltf.config.loading import ConfigError, load_config
from rltf.rl.sft import warm_start_tasks


@dataclass(frozen=True)
class _Task:
    id: int
    reference_plan: str | None


TRAIN = [_Task(i, None if i % 5 == 0 else f"plan {i}") for i in range(1, 31)]  # 6 without a plan


def _ids(overrides: list[str]) -> list[int]:
    cfg = load_config(overrides)
    return [t.id for t in warm_start_tasks(TRAIN, cfg.sft.max_plans, cfg.seed)]


def test_max_plans_picks_k_solved_train_tasks_seeded_in_the_splits_order():
    every = _ids([])
    assert every == [t.id for t in TRAIN if t.reference_plan is not None] and len(every) == 24
    k8 = _ids(["sft.max_plans=8"])
    assert len(k8) == 8 and set(k8) < set(every) and k8 == sorted(k8)
    assert _ids(["sft.max_plans=8"]) == k8  # the same seed: the same plans
    assert _ids(["sft.max_plans=8", "seed=1"]) != k8  # another seed: (almost surely) others
    assert _ids(["sft.max_plans=100"]) == every  # more than there are: all of them


def test_a_dry_run_names_k(tmp_path):
    from rltf.stages.describe import describe_run

    k64 = describe_run(load_config([f"output_dir={tmp_path}", "sft.max_plans=64"]))
    assert "20 epochs on at most 64 of the train tasks' reference plans" in k64
    assert "20 epochs on the train tasks' reference plans" in describe_run(load_config([f"output_dir={tmp_path}"]))


def test_max_plans_takes_no_negative_count():
    with pytest.raises(ConfigError, match=r"sft\.max_plans.*-1"):
        load_config(["sft.max_plans=-1"])
