"""The flat RLTF step reads each task's prompt through the encoder once (an EncoderMemo shared by
sampling and scoring): the same plans, rewards and updated weights, bit for bit, as reading the
prompts again when scoring. A tiny T5 trained in full on the toy env, two steps."""

from __future__ import annotations

import pytest
import torch
from accelerate import Accelerator

from rltf.config.loading import load_config
from rltf.planners.planner import Planner
from rltf.rl import trainer as trainer_module
from rltf.rl.trainer import RLTFTrainer
from tests.tiny_models import tiny_t5, unigram_tokenizer
from tests.toy_env import toy_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MAKE_MEMO = trainer_module.RLTFTrainer._encoder_memo


def two_steps(tmp_path, share: bool, monkeypatch) -> tuple[list, dict[str, torch.Tensor], list]:
    memos = []

    def spy(self):
        memo = MAKE_MEMO(self) if share else None
        memos.append(memo)
        return memo

    monkeypatch.setattr(trainer_module.RLTFTrainer, "_encoder_memo", spy)
    cfg = load_config([f"output_dir={tmp_path}", f"run_name=memo-{share}", "rltf.steps=2", "rltf.tasks_per_batch=2",
                       "rltf.k_samples=3", "rltf.eval_every=0", "logging.progress_bar=false"])
    tok = unigram_tokenizer()
    trainer = RLTFTrainer(cfg, Planner(tiny_t5(tok, seed=0), tok, True, "tiny-t5"), toy_env(), Accelerator(cpu=True))
    batches = []
    for _ in range(2):
        trainer.train_step()
        batches.append((trainer.last_batch.plans, trainer.last_batch.rewards.tolist()))
    return batches, {n: p.detach().clone() for n, p in trainer.model.named_parameters()}, memos


def test_the_shared_encoder_pass_changes_nothing(tmp_path, monkeypatch):
    ref_batches, ref_weights, _ = two_steps(tmp_path, False, monkeypatch)
    batches, weights, memos = two_steps(tmp_path, True, monkeypatch)
    assert memos and all(m is not None and len(m) > 0 for m in memos)  # each step read its prompts via a memo
    assert batches == ref_batches
    for name, w in weights.items():
        assert torch.equal(w, ref_weights[name]), name
    initial = tiny_t5(unigram_tokenizer(), seed=0).state_dict()
    assert any(not torch.equal(w, initial[n]) for n, w in weights.items())  # the steps updated the weights
