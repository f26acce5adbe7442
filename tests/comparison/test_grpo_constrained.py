"""GRPO on a chat planner (issue #23 item 5): TRL sees the RLTF planner's prompt ids, and
``grpo.sampling=constrained`` samples only valid plans under rltf's plan grammar
(rltf/comparison/grpo_trainer.py). A tiny random LLaMA with a ChatML tokenizer stands in for SmolLM2."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import LogitsProcessorList

from constrained_decoding.prompts import encode_prompts, format_prompt
from rltf.config.loading import RunConfig
from rltf.planners.planner import Planner
from tests.planners.test_llm_prompts import chat_tokenizer
from tests.tiny_models import tiny_llama, with_lora
from tests.toy_env import toy_env

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture
def fresh_accelerate_state():
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    yield
    AcceleratorState._reset_state(True)


def _config(steps: int = 2, sampling: str = "free") -> RunConfig:
    cfg = RunConfig()
    cfg.seed, cfg.logging.progress_bar = 0, False
    cfg.rltf.steps, cfg.rltf.tasks_per_batch, cfg.rltf.k_samples, cfg.rltf.lr = steps, 2, 4, 1e-2
    cfg.planner.max_plan_tokens = 40
    cfg.grpo.sampling = sampling
    return cfg


def _plan_texts(env, tok, task) -> set[str]:
    g = env.grammar(tok, task)
    return {g.format(p) for p in g.enumerate()}


def test_the_grammar_processor_lets_generate_write_only_valid_plans():
    from rltf.comparison.grpo_trainer import GrammarLogitsProcessor, plan_text_language

    env, tok = toy_env(), chat_tokenizer()
    model, tasks = tiny_llama(tok), toy_env().tasks()
    grammars = [env.grammar(tok, t) for t in tasks]
    dfa, starts = plan_text_language(tok, grammars)
    prompts = encode_prompts(tok, [t.description for t in tasks for _ in range(6)], False)
    enc = tok.pad({"input_ids": prompts}, return_tensors="pt")
    processor = GrammarLogitsProcessor(dfa, [starts[id(grammars[i // 6])] for i in range(12)])
    torch.manual_seed(0)
    out = model.generate(**enc, do_sample=True, max_new_tokens=40, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id, logits_processor=LogitsProcessorList([processor]))
    texts = tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    for i, text in enumerate(texts):
        assert text.strip() in _plan_texts(env, tok, tasks[i // 6]), text
    assert len(set(texts)) > 2  # it samples, it does not always write one plan
    # unconstrained, the random model writes no plan at all
    free = model.generate(**enc, do_sample=True, max_new_tokens=40, pad_token_id=tok.pad_token_id)
    free_texts = tok.batch_decode(free[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    assert not any(t.strip() in _plan_texts(env, tok, tasks[i // 6]) for i, t in enumerate(free_texts))


def test_grpo_reads_the_rltf_planners_chat_prompt_ids(tmp_path, fresh_accelerate_state):
    from rltf.comparison.grpo import make_grpo_trainer

    env, tok = toy_env(samples_per_step=2), chat_tokenizer()
    tasks = env.tasks()
    planner = Planner(tiny_llama(tok), tok, False, source="tiny-chat-llama")
    trainer, _ = make_grpo_trainer(_config(), planner, env, tasks, tmp_path / "grpo")
    texts = trainer.train_dataset["prompt"]
    assert texts == [format_prompt(t.description, False, tok) for t in tasks]
    assert texts[0].startswith("<|im_start|>user\n") and texts[0].endswith("<|im_start|>assistant\n")
    ids, _, _ = trainer._tokenize_prompts(texts)
    assert ids == encode_prompts(tok, [t.description for t in tasks], False)  # what RLTF samples and scores from
    assert ids[0] != tok(texts[0])["input_ids"]  # TRL's own tokenisation would add the BOS this tokenizer has


def test_constrained_grpo_samples_only_valid_plans_and_trains_a_lora_adapter(tmp_path, fresh_accelerate_state):
    from rltf.comparison.grpo import make_grpo_trainer, reward_history

    env, tok = toy_env(samples_per_step=2), chat_tokenizer()
    tasks = env.tasks()
    planner = Planner(with_lora(tiny_llama(tok)), tok, False, source="tiny-chat-llama")
    assert planner.is_peft
    before = {k: v.clone() for k, v in planner.model.state_dict().items() if "lora" in k}
    cfg = _config(steps=2, sampling="constrained")
    trainer, reward = make_grpo_trainer(cfg, planner, env, tasks, tmp_path / "grpo")
    trainer.train()
    assert len(reward.calls) == 2
    for call in reward.calls:
        assert len(call.completions) == 8 and all(call.valid)
        assert all(c.strip() in _plan_texts(env, tok, env.get_task(t)) for t, c in zip(call.task_ids, call.completions))
    assert [row["valid"] for row in reward_history(trainer)] == [1.0, 1.0]
    rewards = [r for c in reward.calls for r in c.rewards]
    assert np.std(rewards) > 0  # valid plans of different quality: a learning signal
    after = planner.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # TRL's (unconstrained) loss moved the adapter


def test_the_text_warm_start_trains_a_lora_adapter_on_the_chat_prompt():
    from rltf.comparison.grpo import text_finetune
    from rltf.config.loading import ConfigError
    from train.grpo import check_run, parse_args

    env, tok = toy_env(), chat_tokenizer()
    planner = Planner(with_lora(tiny_llama(tok)), tok, False, source="tiny-chat-llama")
    before = {k: v.clone() for k, v in planner.model.state_dict().items()}
    history = text_finetune(planner, env.tasks(), epochs=4, lr=1e-2, batch_size=2, seed=0)
    assert history[-1]["sft/nll"] < history[0]["sft/nll"]
    after = planner.model.state_dict()
    assert all(torch.equal(before[k], after[k]) == ("lora" not in k) for k in before)  # only the adapter learns
    check_run(parse_args(["config=configs/smollm2-lora.yaml", "grpo.warm_start=text"]))  # beta 0: allowed
    with pytest.raises(ConfigError, match="KL reference would be the base model; beta=0.1"):
        check_run(parse_args(["config=configs/smollm2-lora.yaml", "grpo.warm_start=text", "grpo.beta=0.1"]))
