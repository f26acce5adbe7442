"""LoRA's dropout without its no-op aten op (:mod:`rltf.planners.idle_dropout`): π_c, gradients,
samples and training-mode draws unchanged. Tolerance: none -- compared bit for bit."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from constrained_decoding.decode import sample_plans
from constrained_decoding.logprobs import plan_logprobs
from envs.openagi.grammar import plan_grammars
from envs.openagi.registry import IMAGE, TEXT
from rltf.config.sections import LoraSettings
from rltf.planners.idle_dropout import IdleDropout, skip_idle_dropout
from rltf.planners.loading import apply_lora
from tests.tiny_models import bpe_tokenizer, small_registry, tiny_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROMPTS = ["Given noisy blurry image, how to return the caption in English step by step?",
           "Given clozed English text, how to translate the text in German step by step?"]
SIGS = [((IMAGE,), TEXT), ((TEXT,), TEXT)]


class _DropoutOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += func in (torch.ops.aten.dropout.default, torch.ops.aten.native_dropout.default)
        return func(*args, **(kwargs or {}))


def _pair():
    """The project's LoRA planner (dropout 0.1, adapters made non-zero) and a copy with plain nn.Dropout."""
    tok = bpe_tokenizer()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        idle = apply_lora(tiny_llama(tok, seed=2), LoraSettings(enabled=True, r=4, dropout=0.1), False).eval()
        for name, p in idle.named_parameters():
            if "lora_B" in name:
                nn.init.normal_(p, std=0.3)
    plain = copy.deepcopy(idle)
    for m in plain.modules():
        if type(m) is IdleDropout:
            m.__class__ = nn.Dropout
    return idle, plain, tok


def test_lora_dropouts_become_idle_and_issue_no_op_in_eval_mode():
    idle, plain, tok = _pair()
    n = sum(type(m) is IdleDropout for m in idle.modules())
    assert n == 4 and not any(type(m) is nn.Dropout for m in idle.modules())  # q, v of 2 layers
    assert skip_idle_dropout(idle) == 0  # idempotent
    ids = tok(PROMPTS[0], return_tensors="pt").input_ids
    counts = []
    for model in (idle, plain):
        with torch.inference_mode(), _DropoutOps() as ops:  # as the sampler runs it
            model(input_ids=ids)
        counts.append(ops.n)
    assert counts == [0, 4]


def test_pi_c_its_gradients_and_samples_are_unchanged_bit_for_bit():
    idle, plain, tok = _pair()
    grammars = plan_grammars(tok, SIGS, small_registry())
    drawn = [sample_plans(m, tok, PROMPTS, grammars, k=6, temperature=0.9, seed=1) for m in (idle, plain)]
    assert [[(d.rows, d.logprob) for d in ds] for ds in drawn[0]] == [[(d.rows, d.logprob) for d in ds]
                                                                       for ds in drawn[1]]
    plans = [d for ds in drawn[0] for d in ds]
    prompts = [p for p, ds in zip(PROMPTS, drawn[0]) for _ in ds]
    got = []
    for m in (idle, plain):
        lp = plan_logprobs(m, tok, prompts, [d.grammar for d in plans], plans, 0.9)
        lp.sum().backward()
        got.append((lp.detach(), [p.grad.clone() for n, p in m.named_parameters() if p.requires_grad]))
    assert torch.equal(got[0][0], got[1][0])
    # what the sampler reported (another pass shape: the decoder-vs-scorer tolerance of the other tests)
    torch.testing.assert_close(got[0][0].float(), torch.tensor([d.logprob for d in plans]), rtol=1e-5, atol=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(got[0][1], got[1][1]))


def test_training_mode_draws_the_same_dropout_masks():
    idle, plain, tok = _pair()
    ids = tok(PROMPTS, return_tensors="pt", padding=True).input_ids
    outs = []
    for m in (idle.train(), plain.train()):
        torch.manual_seed(7)
        outs.append((m(input_ids=ids).logits, torch.get_rng_state()))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    with torch.no_grad():
        torch.manual_seed(7)
        assert not torch.equal(idle(input_ids=ids).logits, idle.eval()(input_ids=ids).logits)  # dropout did act
