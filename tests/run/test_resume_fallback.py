"""A resumed run whose newest checkpoint is damaged (a kill mid-write, a truncated disk copy)
falls back to the newest intact one, says so, and still ends exactly where the uninterrupted run
ends (the trainer replays the lost steps deterministically)."""

import pytest
import torch
from accelerate import Accelerator

from rltf.config.loading import load_config
from rltf.planners.planner import Planner
from rltf.rl.trainer import RLTFTrainer
from tests.tiny_models import tiny_t5, unigram_tokenizer
from tests.toy_env import toy_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _trainer(tmp_path, steps: int) -> RLTFTrainer:
    cfg = load_config([f"output_dir={tmp_path}", "run_name=fallback", f"rltf.steps={steps}", "rltf.tasks_per_batch=2",
                       "rltf.k_samples=2", "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=2",
                       "rltf.save_total_limit=3", "logging.progress_bar=false"])
    tok = unigram_tokenizer()
    return RLTFTrainer(cfg, Planner(tiny_t5(tok, seed=0), tok, True, "tiny-t5"), toy_env(), Accelerator(cpu=True))


def test_resume_skips_a_damaged_newest_checkpoint_and_ends_where_the_uninterrupted_run_ends(tmp_path):
    straight = _trainer(tmp_path / "straight", 4)
    straight.train()
    expected = {k: v.clone() for k, v in straight.model.state_dict().items()}

    first = _trainer(tmp_path / "killed", 4)
    first.train()  # checkpoints 2 and 4
    weights = next((tmp_path / "killed" / "fallback" / "rltf" / "checkpoint-4").rglob("model.safetensors"))
    weights.write_bytes(weights.read_bytes()[:100])  # truncated

    again = _trainer(tmp_path / "killed", 4)
    with pytest.warns(RuntimeWarning, match=r"checkpoint-4 is damaged .*resuming from checkpoint-2"):
        assert again.resume()
    assert again.step == 2
    again.train()
    assert again.step == 4
    for k, v in again.model.state_dict().items():
        torch.testing.assert_close(v, expected[k], rtol=1e-5, atol=1e-7)
