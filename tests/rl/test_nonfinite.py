"""A diverging run stops with the step named (or skips the step when configured), in RLTF and SFT;
a NaN never reaches the weights. The fault is injected into the real loss: the planner, env,
decoder and scorer are the real tiny ones, and the log-probabilities are multiplied by NaN."""

import warnings

import pytest
import torch
from accelerate import Accelerator

import rltf.rl.sft as sft_module
import rltf.rl.trainer as trainer_module
from rltf.config.loading import ConfigError, load_config
from rltf.planners.planner import Planner
from rltf.rl.sft import NonFiniteSFTLossError, supervised_finetune
from rltf.rl.trainer import RLTFTrainer
from rltf.rl.update import NonFiniteLossError
from tests.tiny_models import tiny_t5, unigram_tokenizer
from tests.toy_env import toy_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _planner() -> Planner:
    tok = unigram_tokenizer()
    return Planner(tiny_t5(tok, seed=0), tok, True, "tiny-t5")


def _poisoned(real, at_call: int):
    """``plan_logprobs`` whose ``at_call``-th call (1-based) returns NaN log-probabilities."""
    calls = {"n": 0}

    def wrapped(*args, **kwargs):
        calls["n"] += 1
        lp = real(*args, **kwargs)
        return lp * float("nan") if calls["n"] == at_call else lp

    return wrapped


def _weights(planner) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in planner.model.state_dict().items()}


def _cfg(tmp_path, *overrides):
    return load_config([f"output_dir={tmp_path}", "run_name=nan", "rltf.tasks_per_batch=2", "rltf.k_samples=2",
                        "rltf.eval_every=0", "rltf.checkpoint_every=0", "logging.progress_bar=false", *overrides])


def test_rltf_stops_at_a_non_finite_loss_naming_the_step(tmp_path, monkeypatch):
    planner, env = _planner(), toy_env()
    monkeypatch.setattr(trainer_module, "plan_logprobs", _poisoned(trainer_module.plan_logprobs, at_call=2))
    trainer = RLTFTrainer(_cfg(tmp_path, "rltf.steps=3"), planner, env, Accelerator(cpu=True))
    trainer.train_step()  # step 1 is fine
    before = _weights(planner)
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss at RLTF step 2 .*rltf\.on_nonfinite=skip"):
        trainer.train_step()
    assert all(torch.equal(before[k], v) for k, v in planner.model.state_dict().items())


def test_rltf_skips_a_non_finite_step_when_configured(tmp_path, monkeypatch):
    planner, env = _planner(), toy_env()
    monkeypatch.setattr(trainer_module, "plan_logprobs", _poisoned(trainer_module.plan_logprobs, at_call=1))
    trainer = RLTFTrainer(_cfg(tmp_path, "rltf.steps=2", "rltf.on_nonfinite=skip"), planner, env,
                          Accelerator(cpu=True))
    before = _weights(planner)
    with pytest.warns(RuntimeWarning, match="non-finite loss at RLTF step 1"):
        row = trainer.train_step()
    assert row["train/skipped"] == 1.0
    assert all(torch.equal(before[k], v) for k, v in planner.model.state_dict().items())
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        row = trainer.train_step()  # the next step trains again
    assert row["train/skipped"] == 0.0 and trainer.step == 2
    assert any(not torch.equal(before[k], v) for k, v in planner.model.state_dict().items())


@pytest.mark.parametrize("mode", ["stop", "skip"])
def test_sft_non_finite_loss(mode, monkeypatch):
    planner, env = _planner(), toy_env()
    monkeypatch.setattr(sft_module, "plan_logprobs", _poisoned(sft_module.plan_logprobs, at_call=1))
    before = _weights(planner)
    kwargs = dict(epochs=1, lr=1e-3, batch_size=len(env.tasks()), seed=0, accelerator=Accelerator(cpu=True),
                  progress=False, on_nonfinite=mode)
    if mode == "stop":
        with pytest.raises(NonFiniteSFTLossError, match=r"non-finite loss at SFT step 1 .*sft\.lr"):
            supervised_finetune(planner, env, env.tasks(), **kwargs)
    else:
        with pytest.warns(RuntimeWarning, match=r"non-finite loss at SFT step 1 \(nan\): step skipped"):
            history = supervised_finetune(planner, env, env.tasks(), **kwargs)
        assert history[0]["sft/skipped_steps"] == 1 and history[0]["sft/nll"] is None
    assert all(torch.equal(before[k], v) for k, v in planner.model.state_dict().items())


def test_on_nonfinite_is_checked():
    with pytest.raises(ConfigError, match="rltf.on_nonfinite"):
        load_config(["rltf.on_nonfinite=ignore"])
