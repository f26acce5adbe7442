"""Prompts a real LLM can answer (issue 23, item 2): the chat template in the one place prompts become
ids, the tool list in zero-/few-shot prompts, stop strings and valid rates of free text.

A tiny random LLaMA whose tokenizer carries a ChatML template stands in for an instruct model; the
slow test runs every schema on the real SmolLM2-135M-Instruct (``planner.model: smollm2``)."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import envs
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.prompts import PLAN_SEPARATOR, Conversation, encode_prompts, format_prompt, uses_chat_template
from constrained_decoding.runner import PlannerRunner
from rltf.evaluation import schemas as ev
from rltf.planners.planner import Planner
from tests.tiny_models import bpe_tokenizer, tiny_llama

CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def chat_tokenizer():
    """The tiny BPE tokenizer (a copy: the shared one stays plain) with a ChatML template."""
    tok = copy.deepcopy(bpe_tokenizer())
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token = "<|im_end|>"
    tok.chat_template = CHATML
    return tok


@pytest.fixture(scope="module")
def env():
    return envs.make({"name": "openagi", "n_samples": 2}, split="test")


@pytest.fixture(scope="module")
def chat_planner():
    tok = chat_tokenizer()
    return Planner(tiny_llama(tok), tok, False, source="tiny-llama")


def test_a_chat_tokenizer_wraps_the_prompt_in_its_template_and_a_plain_one_keeps_the_old_format():
    tok, plain = chat_tokenizer(), bpe_tokenizer()
    assert uses_chat_template(tok, False) and not uses_chat_template(tok, True) and not uses_chat_template(plain, False)
    assert format_prompt("Given x, how to y?", False, tok) == "<|im_start|>user\nGiven x, how to y?<|im_end|>\n" \
                                                             "<|im_start|>assistant\n"
    conv = Conversation("Q3", "Use tools.", (("Q1", "A1"), ("Q2", "A2")))
    assert format_prompt(conv, False, tok) == ("<|im_start|>system\nUse tools.<|im_end|>\n"
                                               "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
                                               "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\nA2<|im_end|>\n"
                                               "<|im_start|>user\nQ3<|im_end|>\n<|im_start|>assistant\n")
    # no template (or no tokenizer): the plain format of before, without the instructions
    assert format_prompt(conv, False, plain) == "Task: Q1\nPlan: A1\n\nTask: Q2\nPlan: A2\n\nTask: Q3" + PLAN_SEPARATOR
    assert (format_prompt(conv, True, tok) == format_prompt(conv, True)
            == "Task: Q1\nPlan: A1\n\nTask: Q2\nPlan: A2\n\nTask: Q3")
    assert format_prompt("Given x", False, plain) == "Given x" + PLAN_SEPARATOR
    with pytest.raises(TypeError, match="got int"):
        format_prompt(3, False, tok)


def test_chat_prompts_become_ids_without_extra_special_tokens_and_are_cut_inside_the_template():
    tok = chat_tokenizer()
    text = format_prompt("Given image", False, tok)
    assert encode_prompts(tok, ["Given image"], False)[0] == tok(text, add_special_tokens=False)["input_ids"]
    assert encode_prompts(bpe_tokenizer(), ["Given image"], False)[0][0] == bpe_tokenizer().bos_token_id
    tok.model_max_length = 20
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cut = encode_prompts(tok, ["word " * 40], False)[0]
    assert len(cut) == 20 and any("truncated from the left" in str(w.message) for w in caught)
    frame = tok(format_prompt("", False, tok), add_special_tokens=False)["input_ids"]
    assert tok.decode(cut).startswith("<|im_start|>user\n") and tok.decode(cut).endswith("<|im_start|>assistant\n")
    assert cut[-4:] == frame[-4:]


def test_sampling_scoring_and_sft_read_the_chat_prompt(chat_planner, env):
    """The runner (decoding, teacher forcing, SFT: all go through it) reads the chat-formatted ids,
    and a plan's log-probability is that of its tokens after the chat prompt."""
    tok, model = chat_planner.tokenizer, chat_planner.model
    task = env.tasks()[0]
    runner = PlannerRunner(model, tok, [task.description], pad_id=tok.pad_token_id)
    assert runner.prompt_ids[0] == tok(format_prompt(task.description, False, tok),
                                       add_special_tokens=False)["input_ids"]
    grammar = env.grammar(tok, task)
    with torch.no_grad():
        chat = plan_logprobs(model, tok, [task.description], [grammar], [task.reference_plan])
        bare = copy.deepcopy(tok)  # the same tokenizer without its template: the plain prompt
        bare.chat_template = None
        plain = plan_logprobs(model, bare, [task.description], [env.grammar(bare, task)], [task.reference_plan])
    assert torch.isfinite(chat).all() and chat.item() < 0
    assert not torch.allclose(chat, plain, rtol=1e-3)  # scoring reads the chat prompt, not the plain one


def test_a_chat_planner_answers_the_untrained_schemas_under_the_grammar_with_the_tool_list(chat_planner, env):
    tasks, shots = env.tasks()[:2], env.tasks()[2:4]
    prompt = ev.task_prompt(env, tasks[0], shots)
    assert prompt.instructions == env.plan_instructions() and all(t.name in prompt.instructions for t in env.registry)
    assert prompt.examples == tuple((s.description, env.format_plan(s.reference_plan)) for s in shots)
    few = ev.untrained_schema("few", chat_planner, env, tasks, shots, num_beams=2, max_new_tokens=8)
    assert few.valid_rate == 1.0 and set(few.scores) == {t.id for t in tasks} and not few.texts
    free = ev.free_form_schema("zero", chat_planner, env, tasks, [], max_new_tokens=8)
    assert set(free.texts) == {t.id for t in tasks} and 0.0 <= free.valid_rate <= 1.0
    assert all(ev.FREE_TEXT_STOP not in text for text in free.texts.values())


def test_a_plain_planner_keeps_free_text_and_its_text_is_cut_at_the_first_blank_line(env):
    tok = bpe_tokenizer()
    planner = Planner(tiny_llama(tok), tok, False, source="tiny-llama")
    tasks = env.tasks()[:2]
    zero = ev.untrained_schema("zero", planner, env, tasks, [], num_beams=2, max_new_tokens=6)
    assert set(zero.texts) == {t.id for t in tasks} and zero.valid_rate is not None
    assert ev.cut_free_text("Image Denoising\n\nTask: next") == "Image Denoising"
    assert ev.cut_free_text("a\nb", ("\n\n", "\n")) == "a" and ev.cut_free_text("abc") == "abc"


def test_the_table_shows_each_schemas_valid_rate():
    from types import SimpleNamespace

    tasks = [SimpleNamespace(id=i, metric="m") for i in range(4)]
    free = ev.SchemaResult("zero", scores={i: 0.1 * i for i in range(4)}, valid={0: True, 1: False, 2: False, 3: True})
    old = ev.SchemaResult("rltf", scores={i: 0.5 for i in range(4)})  # validity not recorded
    table = ev.results_table([free, old], tasks)
    assert table["valid_rate"] == {"zero": 0.5, "rltf": None} and table["columns"] == ["m", "overall"]
    md = ev.table_markdown(table, "t")
    assert "| valid |" in md and " | 50% |" in md and " | n/a |" in md
    assert ev.markdown_columns(table) == ["m", "overall", "valid"]


def test_dtype_auto_is_float32_without_a_gpu():
    from rltf.config.sections import PlannerSettings

    expected = "bfloat16" if torch.cuda.is_available() else "float32"
    assert PlannerSettings(dtype="auto").dtype == expected and PlannerSettings(dtype="float16").dtype == "float16"


@pytest.mark.slow
@pytest.mark.usefixtures("one_torch_thread")
def test_every_schema_on_smollm2_once(smollm2_folder):
    """SmolLM2-135M-Instruct, untrained: each schema on 2 test tasks (zero / few: constrained from the
    chat prompt with the tool list; free text as OpenAGI; finetuned / rltf: constrained from the
    description in the chat template)."""
    from rltf.config.sections import PlannerSettings
    from rltf.planners.loading import load_planner

    planner = load_planner(PlannerSettings(model="smollm2", max_prompt_tokens=512))
    assert uses_chat_template(planner.tokenizer, planner.is_encoder_decoder)
    env_ = envs.make({"name": "openagi", "n_samples": 2}, split="test")
    tasks, shots = env_.tasks()[:2], envs.make({"name": "openagi"}, split="train").tasks()[:3]
    for name, examples in (("zero", []), ("few", shots)):
        r = ev.untrained_schema(name, planner, env_, tasks, examples, num_beams=2, max_new_tokens=24)
        assert r.valid_rate == 1.0 and all(0 <= s <= 1 for s in r.scores.values())
        free = ev.free_form_schema(name, planner, env_, tasks, examples, max_new_tokens=24)
        assert set(free.texts) == {t.id for t in tasks} and 0 <= free.valid_rate <= 1
    tuned = ev.constrained_schema("finetuned", planner, env_, tasks, num_beams=2)
    assert tuned.valid_rate == 1.0 and len(tuned.plans) == 2
