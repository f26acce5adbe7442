"""Issue 16: resume with a changed config is refused, listing the differences, before config.yaml is
overwritten; safe keys may change."""


import pytest
from accelerate import Accelerator

from rltf.config.loading import ConfigError
from rltf.rl.trainer import RLTFTrainer
from tests.toy_env import toy_env
from tests.toy_run import make_cfg, make_planner

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_resume_with_a_changed_training_key_is_refused_listing_the_differences(tmp_path):
    cfg = make_cfg(tmp_path, "rltf.steps=1")
    RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True)).train()
    changed = make_cfg(tmp_path, "rltf.steps=1", "rltf.lr=0.5", "seed=3", "resume=true")
    with pytest.raises(ConfigError, match=r"rltf.lr: 0.01 -> 0.5.*seed: 0 -> 3"):
        RLTFTrainer(changed, make_planner(), toy_env(), Accelerator(cpu=True)).resume()
    # safe keys (logging, evaluation, checkpointing cadence, resume itself) may change
    same = make_cfg(tmp_path, "rltf.steps=1", "resume=true", "logging.log_every=1", "eval.num_beams=3",
                    "rltf.eval_every=5")
    assert RLTFTrainer(same, make_planner(), toy_env(), Accelerator(cpu=True)).resume()


def test_resume_with_a_changed_config_is_refused_before_config_yaml_is_overwritten(tmp_path):
    from rltf.stages import plan_job as stages

    stages.start(make_cfg(tmp_path))
    saved = (tmp_path / "toy" / "config.yaml").read_text()
    with pytest.raises(ConfigError, match=r"rltf.lr: 0.01 -> 0.5"):
        stages.start(make_cfg(tmp_path, "rltf.lr=0.5", "resume=true"))
    assert (tmp_path / "toy" / "config.yaml").read_text() == saved
