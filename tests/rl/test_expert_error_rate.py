"""Issue 16: a tool failing on every call is a loud warning, and each training step logs the expert
error rate (zero when healthy)."""

import warnings

import pytest
from accelerate import Accelerator

from rltf.rl.trainer import RLTFTrainer
from tests.toy_env import toy_env, toy_tasks
from tests.toy_run import make_cfg, make_planner

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _env_with_broken_translation():
    from envs.openagi.env import OpenAGIEnv
    from envs.openagi.plans import PlanLimits
    from envs.openagi.registry import TEXT, ToolRegistry

    def broken(xs):
        raise RuntimeError("weights missing")

    reg = ToolRegistry()
    reg.register("Fill Mask", TEXT, TEXT, lambda xs: [x.replace("[MASK]", "cat") for x in xs])
    reg.register("Machine Translation", TEXT, TEXT, broken)
    reg.register("Question Answering", (TEXT, TEXT), TEXT, lambda ds, qs: [d.split()[-1] for d in ds])
    return OpenAGIEnv(registry=reg, tasks=toy_tasks()[:1], limits=PlanLimits(2, 1, 1),
                      metrics={"toy_equal": lambda p, t: [float(a == b) for a, b in zip(p, t)]})


def test_a_tool_failing_on_every_call_is_a_loud_warning_and_the_error_rate_is_logged(tmp_path):
    trainer = RLTFTrainer(make_cfg(tmp_path), make_planner(), _env_with_broken_translation(), Accelerator(cpu=True))
    with pytest.warns(RuntimeWarning, match="'Machine Translation' failed on every call"):
        stats = trainer.train_step()
    assert 0 < stats["train/expert_error_rate"] <= 1


def test_a_healthy_step_logs_a_zero_expert_error_rate(tmp_path):
    trainer = RLTFTrainer(make_cfg(tmp_path), make_planner(), toy_env(), Accelerator(cpu=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        stats = trainer.train_step()
    assert stats["train/expert_error_rate"] == 0.0
