"""The embedded causal planner (LLaMA) and the GRPO baseline (TRL's GRPOTrainer, rltf/comparison/grpo.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers as tf

from rltf.config.loading import EmbeddedSettings, PlannerSettings, RunConfig, load_config
from rltf.planners.embedded import build_embedded_planner, embedded_fingerprint, ensure_embedded_planner
from rltf.planners.loading import load_planner
from rltf.planners.planner import PLANNER_FILE, Planner
from tests.tiny_models import tokenizer_corpus
from tests.toy_env import toy_env

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),  # transformers v6 renames, TRL's
              pytest.mark.filterwarnings("ignore::UserWarning")]

SMALL = dict(d_model=32, num_layers=2, num_heads=2, d_ff=64, vocab_size=500)
PROMPT = "Given noisy blurry image, how to return the class label in English step by step?\nPlan:"


def _logits(planner: Planner) -> torch.Tensor:
    enc = planner.tokenizer([PROMPT, "Given English text, how to return the sentiment?\nPlan:"],
                            return_tensors="pt", padding=True)
    with torch.no_grad():
        return planner.model(**enc).logits


# ------------------------------------------------------------------------------ embedded causal planner
def test_embedded_causal_planner_is_deterministic_from_its_seed():
    texts = tokenizer_corpus()
    a = build_embedded_planner(EmbeddedSettings(**SMALL), texts, arch="causal")
    torch.manual_seed(123)  # the global RNG must not matter
    b = build_embedded_planner(EmbeddedSettings(**SMALL), texts, arch="causal")
    c = build_embedded_planner(EmbeddedSettings(**SMALL, seed=1), texts, arch="causal")
    assert isinstance(a.model, tf.LlamaForCausalLM) and not a.is_encoder_decoder and a.arch == "causal"
    cfg = a.model.config
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.intermediate_size) == (32, 2, 2, 64)
    sa, sb, sc = (p.model.state_dict() for p in (a, b, c))
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa if k.endswith("weight"))
    assert a.tokenizer.get_vocab() == c.tokenizer.get_vocab()
    # LLaMA conventions on the same BPE: BOS first, no EOS appended, "\n" its own token, left padding
    tok = a.tokenizer
    assert tok.padding_side == "left" and (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    ids = tok(PROMPT).input_ids
    assert ids[0] == tok.bos_token_id and tok.eos_token_id not in ids and tok.unk_token_id not in ids
    plan = "Image Denoising, Image Deblurring, Image Classification"
    assert tok.decode(tok(plan, add_special_tokens=False).input_ids + [tok.eos_token_id],
                      skip_special_tokens=True) == plan
    assert cfg.vocab_size == len(tok) and cfg.bos_token_id == tok.bos_token_id and cfg.pad_token_id == 0


def test_embedded_causal_planner_built_once_and_round_trips(tmp_path):
    emb = EmbeddedSettings(**SMALL, dir=str(tmp_path / "embedded"))
    settings = PlannerSettings(arch="causal", embedded=emb)
    first = load_planner(settings, tokenizer_corpus())
    (built,) = (tmp_path / "embedded").iterdir()
    assert built.name.startswith("llama-d32-l2-s0-") and first.source == str(built)
    assert isinstance(first.model, tf.LlamaForCausalLM) and first.tokenizer.padding_side == "left"
    meta = json.loads((built / PLANNER_FILE).read_text())
    assert meta["arch"] == "causal" and meta["embedded"]["arch"] == "causal" and meta["embedded"]["d_model"] == 32
    mtime = (built / "model.safetensors").stat().st_mtime_ns

    second = load_planner(settings, tokenizer_corpus())
    assert (built / "model.safetensors").stat().st_mtime_ns == mtime  # reloaded, not rebuilt
    assert torch.equal(_logits(first), _logits(second))
    fresh = build_embedded_planner(emb, tokenizer_corpus(), arch="causal")
    assert torch.equal(_logits(fresh), _logits(second))

    with torch.no_grad():
        second.model.model.layers[0].mlp.up_proj.weight.add_(0.1)  # trained weights survive the round trip
    out = second.save_pretrained(tmp_path / "saved")
    again = Planner.from_pretrained(out)
    assert again.arch == "causal" and again.tokenizer.padding_side == "left"
    assert torch.equal(_logits(again), _logits(second))
    assert again.tokenizer(PROMPT).input_ids == second.tokenizer(PROMPT).input_ids
    # the T5 of the same settings is another planner in another folder; auto means the T5
    t5 = ensure_embedded_planner(emb, tokenizer_corpus())
    assert t5.name.startswith("t5-") and t5 != built
    assert embedded_fingerprint(emb, tokenizer_corpus(), "auto") == t5.name
    assert load_config(["planner.arch=causal"]).planner.arch == "causal"  # no longer refused


# ------------------------------------------------------------------------------ GRPO
@pytest.fixture
def fresh_accelerate_state():
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    yield
    AcceleratorState._reset_state(True)


def test_two_grpo_steps_reward_reaches_trl_and_weights_move(tmp_path, fresh_accelerate_state):
    from rltf.comparison.grpo import make_grpo_trainer, prompt_dataset, reward_history, text_finetune

    env = toy_env(samples_per_step=2)
    tasks = env.tasks()
    planner = Planner.from_pretrained(ensure_embedded_planner(
        EmbeddedSettings(**SMALL, dir=str(tmp_path / "embedded")), tokenizer_corpus(), arch="causal"))
    # an unconstrained warm start, so some sampled texts are valid plans and rewards differ in a group
    text_finetune(planner, tasks, epochs=25, lr=1e-2, batch_size=2, seed=0)

    cfg = RunConfig()
    cfg.seed, cfg.logging.progress_bar = 0, False
    cfg.rltf.steps, cfg.rltf.tasks_per_batch, cfg.rltf.k_samples, cfg.rltf.lr = 2, 2, 6, 1e-3
    cfg.planner.max_plan_tokens = 16
    before = {k: v.clone() for k, v in planner.model.state_dict().items()}
    trainer, reward = make_grpo_trainer(cfg, planner, env, tasks, tmp_path / "grpo", cfg.grpo)
    assert trainer.args.per_device_train_batch_size == 12 and trainer.num_generations == 6
    assert not trainer.args.bf16 and trainer.args.report_to in ([], "none", ["none"])
    assert prompt_dataset(tasks)["prompt"][0] == tasks[0].description + "\nPlan:"
    trainer.train()

    # the reward function saw every completion TRL sampled, K per prompt, and TRL logged its mean
    assert len(reward.calls) == 2
    logged = reward_history(trainer)
    assert len(logged) == 2
    for call, row in zip(reward.calls, logged):
        assert len(call.completions) == 12 and all(isinstance(c, str) for c in call.completions)
        assert [call.task_ids[i] for i in range(0, 12, 6)] == [call.task_ids[i + 5] for i in range(0, 12, 6)]
        # the env's own score of each text
        direct = env.reward_plans([(t, c.strip()) for t, c in zip(call.task_ids, call.completions)],
                                  rng=np.random.default_rng([cfg.seed, reward.calls.index(call), 0, 1]))
        assert call.rewards == [r.reward for r in direct]
        assert row["reward"] == pytest.approx(float(np.mean(call.rewards)), abs=1e-6)
        assert row["valid"] == pytest.approx(float(np.mean(call.valid)), abs=1e-6)
    valid = [v for c in reward.calls for v in c.valid]
    rewards = [r for c in reward.calls for r in c.rewards]
    assert any(valid) and all(r == 0 for r, v in zip(rewards, valid) if not v)  # text that is no plan: 0
    groups = [np.std(c.rewards[i : i + 6]) for c in reward.calls for i in (0, 6)]
    assert max(groups) > 0  # a learning signal

    after = planner.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
