"""Each distinct prompt is read once (share_prompt): the same log-probabilities and gradients as
reading it in every row, and the prompt really goes through the model once.

The K samples of a task and every row of their plans share one prompt. Sampling, scoring
(:func:`plan_logprobs`, with gradients: the RL loss and SFT) read it once — a T5 encoder row, or a
causal prefix whose cache the rows continue — instead of once per row (``share_prompt=False``, the
reference). Tiny random planners with LoRA (so the prompt positions carry trainable weights), a
LLaMA with grouped-query attention like SmolLM2's, K > 1 samples per prompt, prompts of different
lengths (left padding) and one prompt given twice.
"""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from constrained_decoding.decode import sample_plans
from constrained_decoding.encoder_memo import EncoderMemo
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.prompts import encode_prompts
from envs.openagi.grammar import plan_grammars
from envs.openagi.plans import PlanLimits
from envs.openagi.registry import IMAGE, TEXT
from tests.tiny_models import bpe_tokenizer, small_registry, tiny_t5, unigram_tokenizer, with_lora

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REG = small_registry()
LIMITS = PlanLimits(max_tools=3, max_branch=2, max_tail=1)
LINEAR = ((IMAGE,), TEXT)
NONLINEAR = ((IMAGE, TEXT), TEXT)
# one prompt twice (equal texts are one distinct prompt) and two of different lengths (left padding)
TASKS = [
    (LINEAR, "Given noisy blurry image, how to return the caption in English step by step?"),
    (NONLINEAR, "Given noisy image and clozed English query, how to answer the question in German?"),
    (LINEAR, "Given noisy blurry image, how to return the caption in English step by step?"),
]
K = 3
LOGPROB_TOL = dict(rtol=1e-5, atol=1e-5)


def gqa_llama(tokenizer, seed: int = 0) -> LlamaForCausalLM:
    """A random LLaMA with SmolLM2's attention layout in small: 4 query heads over 2 key-value heads."""
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      initializer_range=0.3, pad_token_id=tokenizer.pad_token_id,
                      bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                      tie_word_embeddings=True)
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval()


PLANNERS = {
    "lora-t5": lambda: (with_lora(tiny_t5(unigram_tokenizer(), seed=4), seed=5), unigram_tokenizer()),
    "lora-llama-gqa": lambda: (with_lora(gqa_llama(bpe_tokenizer(), seed=6), seed=7), bpe_tokenizer()),
}


@pytest.fixture(scope="module", params=list(PLANNERS))
def planner(request):
    return PLANNERS[request.param]()


def grammars(tok):
    return plan_grammars(tok, [sig for sig, _ in TASKS], REG, LIMITS)


def prompts():
    return [text for _, text in TASKS]


def sampled(model, tok, share_prompt=True):
    return sample_plans(model, tok, prompts(), grammars(tok), k=K, temperature=1.3, seed=3, share_prompt=share_prompt)


def scored(model, tok, decoded, **kw):
    plans = [d for ds in decoded for d in ds]
    return plan_logprobs(model, tok, [TASKS[i][1] for i, ds in enumerate(decoded) for _ in ds],
                         [d.grammar for d in plans], plans, 1.3, **kw)


def test_sampling_with_a_shared_prompt_draws_what_reading_it_per_sample_draws(planner):
    model, tok = planner
    shared, alone = sampled(model, tok), sampled(model, tok, share_prompt=False)
    assert [[d.rows for d in ds] for ds in shared] == [[d.rows for d in ds] for ds in alone]
    torch.testing.assert_close(torch.tensor([d.logprob for ds in shared for d in ds]),
                               torch.tensor([d.logprob for ds in alone for d in ds]), **LOGPROB_TOL)


def test_shared_prompt_log_probs_and_gradients_equal_the_unshared_ones(planner):
    """Scoring K samples per prompt with gradients: the log-probs (also the sampler's) and the
    gradient of every trainable (LoRA) parameter match reading the prompt in every row."""
    model, tok = planner
    decoded = sampled(model, tok)
    assert all(len({d.rows for d in ds}) > 1 for ds in decoded[:2])  # distinct samples share a prompt
    params = [p for p in model.parameters() if p.requires_grad]
    got = scored(model, tok, decoded)
    want = scored(model, tok, decoded, share_prompt=False)
    torch.testing.assert_close(got, want, **LOGPROB_TOL)
    torch.testing.assert_close(got.detach(), torch.tensor([d.logprob for ds in decoded for d in ds]), **LOGPROB_TOL)
    weights = torch.linspace(-1.0, 2.0, len(got))  # an RL-style loss: advantages of both signs
    g_got = torch.autograd.grad((weights * got).sum(), params)
    g_want = torch.autograd.grad((weights * want).sum(), params)
    assert any(float(g.abs().sum()) > 0 for g in g_got)
    for a, b in zip(g_got, g_want):  # near-0 entries (cancelling sums): atol relative to the gradient's norm
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6 * max(float(a.norm()), float(b.norm()), 1e-12))


class PromptReads:
    """Counts how often each prompt goes through the model: the rows of every call's input ids
    (a causal model's embedding input, a T5 encoder's input) that hold the prompt's tokens (a
    causal prefix: all but the last token, which the rows themselves read)."""

    def __init__(self, model, tok):
        self.causal = not model.config.is_encoder_decoder
        self.ids = [tuple(x[:-1] if self.causal else x)
                    for x in encode_prompts(tok, list(dict.fromkeys(prompts())), not self.causal)]
        base = model.get_base_model()
        module = base.get_input_embeddings() if self.causal else base.get_encoder()
        self.seen: list[list[int]] = []
        self.handle = module.register_forward_pre_hook(self.record, with_kwargs=True)

    def record(self, module, args, kwargs):
        ids = args[0] if args else kwargs["input_ids"]
        self.seen += ids.tolist()

    def counts(self) -> list[int]:
        def holds(row, p):
            return any(tuple(row[i : i + len(p)]) == p for i in range(len(row) - len(p) + 1))

        return [sum(holds(row, p) for row in self.seen) for p in self.ids]

    def close(self):
        self.handle.remove()


@pytest.mark.parametrize("share_prompt", [True, False])
def test_each_distinct_prompt_is_read_once(planner, share_prompt):
    """Sampling K plans for three prompts (two equal) and scoring them with gradients read each of
    the two distinct prompts once per call when sharing; the reference reads it once per row."""
    model, tok = planner
    causal = not model.config.is_encoder_decoder
    reads = PromptReads(model, tok)
    try:
        decoded = sampled(model, tok, share_prompt=share_prompt)
        sampling = reads.counts()
        reads.seen.clear()
        plans = [d for ds in decoded for d in ds]
        scored(model, tok, decoded, share_prompt=share_prompt).sum().backward()
        scoring = reads.counts()
    finally:
        reads.close()
        model.zero_grad(set_to_none=True)
    if share_prompt:
        assert sampling == [1, 1] and scoring == [1, 1]
        return
    samples = [2 * K, K]  # per distinct prompt: the samples that read it
    texts = [text for _, text in TASKS for _ in range(K)]
    distinct_rows = {(text, pair) for d, text in zip(plans, texts) for pair in d.row_pairs()}
    rows = [sum(text == p for text, _ in distinct_rows) for p in dict.fromkeys(prompts())]
    # unshared sampling reads the prompt once per sample (branch rows continue their root row's
    # cache); scoring: once per distinct row of the plans (a causal row), the encoder once per text
    assert sampling == samples
    assert scoring == (rows if causal else [1, 1])


def test_an_encoder_memo_reads_each_prompt_once_for_sampling_and_scoring_with_the_same_numbers():
    """An RL step's sampler fills an EncoderMemo (each distinct prompt read once, with gradients)
    and the scorer back-propagates through those states: the samples, log-probs and gradients
    (the encoder's included) of reading the prompts again."""
    tok = unigram_tokenizer()
    model = tiny_t5(tok, seed=4)  # every weight trainable, the encoder's included
    reference = sampled(model, tok)  # (also probes the model's output head, once per model)
    calls: list[int] = []
    handle = model.get_encoder().register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(len(kwargs["input_ids"])), with_kwargs=True)
    memo = EncoderMemo()
    try:
        decoded = sample_plans(model, tok, prompts(), grammars(tok), k=K, temperature=1.3, seed=3, encoder_memo=memo)
        got = scored(model, tok, decoded, encoder_memo=memo)
        assert calls == [2] and len(memo) == 2  # two distinct prompts, read once for both
        want = scored(model, tok, decoded)
    finally:
        handle.remove()
    assert [[d.rows for d in ds] for ds in decoded] == [[d.rows for d in ds] for ds in reference]
    torch.testing.assert_close(got, want, **LOGPROB_TOL)
    weights = torch.linspace(-1.0, 2.0, len(got))
    params = list(model.parameters())
    g_got = torch.autograd.grad((weights * got).sum(), params, allow_unused=True)
    g_want = torch.autograd.grad((weights * want).sum(), params, allow_unused=True)
    encoder = {id(p) for p in model.get_encoder().parameters()}
    assert any(g is not None and float(g.abs().sum()) > 0 for p, g in zip(params, g_got) if id(p) in encoder)
    for a, b in zip(g_got, g_want):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6 * max(float(a.norm()), float(b.norm()), 1e-12))
    with pytest.raises(ValueError, match="one memo per model"):
        memo.states(tiny_t5(tok, seed=5), [[1, 2]], pad_id=0, detach=True)
