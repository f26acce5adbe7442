"""Flow backends on a chat model (issue 23, item 6): a node's messages reach the model wrapped in its
chat template exactly once, for constrained choices and free text alike, retries included.

A tiny random LLaMA whose tokenizer carries a ChatML template stands in for SmolLM2-135M-Instruct
(``configs/travel-mtp-smollm2.yaml``)."""

from __future__ import annotations

import pytest
import torch

from constrained_decoding.prompts import Conversation, encode_prompts
from rltf.flows import Choices, Sampling
from rltf.flows.backends.local import LocalModelBackend, as_conversation
from rltf.flows.backends.planner import PlannerBackend, rescore
from rltf.planners.planner import Planner
from tests.planners.test_llm_prompts import chat_tokenizer
from tests.tiny_models import tiny_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SYSTEM = {"role": "system", "content": "You are the manager."}
ASK = {"role": "user", "content": "Choose the route: A or B."}
RETRY = [SYSTEM, ASK, {"role": "assistant", "content": "C"}, {"role": "user", "content": "C is not an option."}]


@pytest.fixture(scope="module")
def chat_model():
    tok = chat_tokenizer()
    torch.manual_seed(0)
    return tiny_llama(tok), tok


def test_messages_become_the_conversation_the_template_renders_the_same():
    assert as_conversation([ASK]) == Conversation(ASK["content"])
    assert as_conversation([SYSTEM, ASK]) == Conversation(ASK["content"], instructions=SYSTEM["content"])
    assert as_conversation(RETRY) == Conversation("C is not an option.", SYSTEM["content"], ((ASK["content"], "C"),))
    assert as_conversation([SYSTEM, ASK, {"role": "assistant", "content": "A"}]) is None  # ends with the answer
    assert as_conversation([SYSTEM, SYSTEM, ASK]) is None
    assert as_conversation([ASK, ASK]) is None


@pytest.mark.parametrize("messages", [[ASK], [SYSTEM, ASK], RETRY], ids=["user", "system+user", "retry"])
def test_choices_and_free_text_read_the_messages_in_the_chat_template_once(chat_model, messages):
    model, tok = chat_model
    b = LocalModelBackend(model, tok, False, sampling=Sampling(max_new_tokens=4))  # chat_template "auto"
    assert b.use_chat_template
    templated = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    expected = tok(templated, add_special_tokens=False)["input_ids"]
    c = b.generate([messages], Choices(["A", "B"]))[0]
    assert c.text in ("A", "B")
    assert encode_prompts(tok, [c.prompt], False)[0] == expected  # not a template inside the template
    assert tok.decode(expected).count("<|im_start|>") == len(messages) + 1  # + the assistant turn
    assert b.free_prompt_ids(messages) == expected
    assert rescore(model, tok, [c]).item() == pytest.approx(c.logprob, rel=1e-4, abs=1e-5)
    free = b.generate([messages])[0]
    assert free.prompt_tokens == len(expected) and 1 <= free.completion_tokens <= 4


def test_a_chat_planner_conditions_free_text_on_the_prompt_its_choices_read(chat_model):
    model, tok = chat_model
    planner = Planner(model, tok, False, source="tiny-chat-llama")
    templated = PlannerBackend(planner, chat_template=True)
    ids = encode_prompts(tok, [templated.describe([SYSTEM, ASK])], False)[0]
    assert templated.free_prompt_ids([SYSTEM, ASK]) == ids
    assert tok.decode(ids).startswith("<|im_start|>system\nYou are the manager.<|im_end|>")
    plain = PlannerBackend(planner)  # the default: the task text in the template's user turn, as in training
    ids = encode_prompts(tok, [plain.describe([ASK])], False)[0]
    assert plain.free_prompt_ids([ASK]) == ids
    assert tok.decode(ids) == "<|im_start|>user\nChoose the route: A or B.<|im_end|>\n<|im_start|>assistant\n"
