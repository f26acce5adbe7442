"""``Planner.prompt()`` reads the chat template as sampling and scoring do (issue #38 item 10).

A chat planner (a causal model whose tokenizer has a chat template, as SmolLM2-Instruct) is prompted
with the template around the task as the user message, the assistant turn opened; the plan is the
assistant's answer. ``Planner.prompt()`` is that text, the ids sampling and scoring read are its
tokens, and a sampled plan's log-probability is the one teacher-forced scoring gives it. Planners
without a template keep their prompt byte for byte."""

from __future__ import annotations

import copy

import pytest
import torch

import envs
from constrained_decoding.decode import sample_plans
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.prompts import PLAN_SEPARATOR, Conversation, encode_prompts
from constrained_decoding.runner import PlannerRunner
from rltf.planners.planner import Planner
from tests.planners.test_llm_prompts import chat_tokenizer
from tests.tiny_models import bpe_tokenizer, tiny_llama, tiny_t5

pytestmark = pytest.mark.usefixtures("one_torch_thread")

@pytest.fixture(scope="module")
def env():
    return envs.make({"name": "openagi", "n_samples": 2}, split="test")


@pytest.fixture(scope="module")
def chat_planner():
    torch.manual_seed(0)
    tok = chat_tokenizer()
    return Planner(tiny_llama(tok), tok, False, source="tiny-chat-llama")


def test_a_chat_planners_prompt_is_its_chat_template_around_the_task(chat_planner, env):
    task = env.tasks()[0].description
    tok = chat_planner.tokenizer
    expected = tok.apply_chat_template([{"role": "user", "content": task}], tokenize=False, add_generation_prompt=True)
    assert chat_planner.prompt(task) == expected == f"<|im_start|>user\n{task}<|im_end|>\n<|im_start|>assistant\n"
    conv = Conversation(task, "Use tools.", (("Q1", "A1"),))
    assert chat_planner.prompt(conv) == tok.apply_chat_template(conv.messages(), tokenize=False,
                                                                add_generation_prompt=True)
    # the text prompt() gives is what sampling, scoring and SFT read (the runner's ids: encode_prompts)
    ids = tok(chat_planner.prompt(task), add_special_tokens=False)["input_ids"]
    assert encode_prompts(tok, [task], False)[0] == ids
    assert PlannerRunner(chat_planner.model, tok, [task], pad_id=tok.pad_token_id).prompt_ids[0] == ids


def test_plain_planners_keep_their_prompt_byte_for_byte():
    tok = bpe_tokenizer()
    assert not getattr(tok, "chat_template", None)
    llama = Planner(tiny_llama(tok), tok, False, source="tiny-llama")
    assert llama.prompt("Given x, how to y?") == "Given x, how to y?" + PLAN_SEPARATOR == "Given x, how to y?\nPlan:"
    t5 = Planner(tiny_t5(tok), tok, True, source="tiny-t5")
    assert t5.prompt("Given x, how to y?") == "Given x, how to y?"
    # a seq2seq planner ignores a template (the task is the encoder's input)
    assert Planner(tiny_t5(tok), chat_tokenizer(), True, source="tiny-t5").prompt("Given x") == "Given x"


def test_sampled_log_probs_equal_the_scored_ones_under_the_chat_prompt(chat_planner, env):
    tok, model = chat_planner.tokenizer, chat_planner.model
    tasks = env.tasks()[:2]
    descriptions = [t.description for t in tasks]
    grammars = [env.grammar(tok, t) for t in tasks]
    with torch.no_grad():
        drawn = sample_plans(model, tok, descriptions, grammars, k=2, seed=3)
        flat = [(d, g, p) for d, g, plans in zip(descriptions, grammars, drawn) for p in plans]
        scored = plan_logprobs(model, tok, [d for d, _, _ in flat], [g for _, g, _ in flat],
                               [p.plan for _, _, p in flat])  # the actions, their rows rebuilt
        bare = copy.deepcopy(tok)  # the same tokenizer without its template reads the plain prompt
        bare.chat_template = None
        plain = plan_logprobs(model, bare, [d for d, _, _ in flat], [env.grammar(bare, t) for t in tasks
                                                                     for _ in range(2)], [p.plan for _, _, p in flat])
    sampled = torch.tensor([p.logprob for _, _, p in flat], dtype=scored.dtype)
    assert torch.allclose(sampled, scored, rtol=0, atol=1e-4), (sampled, scored)
    assert not torch.allclose(scored, plain, rtol=1e-3)  # the template changes what is scored
