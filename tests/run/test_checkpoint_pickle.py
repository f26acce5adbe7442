"""Issue 25: a pickle in a checkpoint's planner/ is never loaded; resume falls back to the previous
checkpoint."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from rltf.config.loading import load_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _Planted:
    marker = ""

    def __reduce__(self):
        return (Path.touch, (Path(_Planted.marker),))


def test_a_pickle_in_a_checkpoint_planner_falls_back_to_the_previous_checkpoint(tmp_path):
    from accelerate import Accelerator

    from rltf.planners.planner import Planner
    from rltf.rl.trainer import RLTFTrainer
    from tests.tiny_models import tiny_t5, unigram_tokenizer
    from tests.toy_env import toy_env

    def trainer():
        cfg = load_config([f"output_dir={tmp_path}", "run_name=pickled", "rltf.steps=4", "rltf.tasks_per_batch=2",
                           "rltf.k_samples=2", "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=2",
                           "rltf.save_total_limit=3", "logging.progress_bar=false"])
        tok = unigram_tokenizer()
        return RLTFTrainer(cfg, Planner(tiny_t5(tok, seed=0), tok, True, "tiny-t5"), toy_env(), Accelerator(cpu=True))

    trainer().train()  # checkpoints 2 and 4
    planner = tmp_path / "pickled" / "rltf" / "checkpoint-4" / "planner"
    (planner / "model.safetensors").unlink()
    _Planted.marker = str(tmp_path / "pwned")
    (planner / "pytorch_model.bin").write_bytes(pickle.dumps({"weight": _Planted()}))
    again = trainer()
    with pytest.warns(RuntimeWarning, match=r"checkpoint-4 is damaged \(planner/pytorch_model.bin: a pickle weights "
                                            r"file.*resuming from checkpoint-2"):
        assert again.resume()
    assert again.step == 2 and not (tmp_path / "pwned").exists()
