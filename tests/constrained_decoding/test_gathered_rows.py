"""Scoring reads the token matrix's rows once per call (constrained_decoding/gathered_rows.py): the
same log-probabilities and bit for bit the same gradients as reading the whole matrix in every
length bucket, and only where that holds.

A tiny T5 trained in full (its tied token matrix takes gradients), plans of several lengths (so
scoring runs several buckets, each reading the matrix twice), a non-uniform loss; the reference is
the same call with the gathering switched off.
"""

from __future__ import annotations

import pytest
import torch

import constrained_decoding.teacher_forcing as teacher_forcing
from constrained_decoding.decode import sample_plans
from constrained_decoding.gathered_rows import gathered_rows
from constrained_decoding.logprobs import plan_logprobs
from envs.openagi.grammar import plan_grammars
from envs.openagi.plans import PlanLimits
from envs.openagi.registry import IMAGE, TEXT
from tests.tiny_models import small_registry, tiny_t5, unigram_tokenizer, with_lora

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TASKS = [
    (((IMAGE,), TEXT), "Given noisy blurry image, how to return the caption in English step by step?"),
    (((IMAGE, TEXT), TEXT), "Given noisy image and clozed English query, how to answer the question in German?"),
]


def scored(model, tok, gather: bool, monkeypatch) -> tuple[torch.Tensor, dict[str, torch.Tensor], list]:
    """log π_c of 6 sampled plans per task and the parameters' gradients of a weighted loss on them;
    the runners' gathered rows (None each when not gathering)."""
    limits = PlanLimits(max_tools=3, max_branch=2, max_tail=1)
    grammars = plan_grammars(tok, [s for s, _ in TASKS], small_registry(), limits)
    prompts = [p for _, p in TASKS]
    with torch.no_grad():
        decoded = sample_plans(model, tok, prompts, grammars, 6, 1.0, seed=3)
    plans = [d for ds in decoded for d in ds]
    seen = []
    def spy(*args, **kwargs):
        out = gathered_rows(*args, **kwargs) if gather else None
        seen.append(out)
        return out

    monkeypatch.setattr(teacher_forcing, "gathered_rows", spy)
    model.zero_grad(set_to_none=True)
    lp = plan_logprobs(model, tok, [p for p in prompts for _ in range(6)], [d.grammar for d in plans], plans)
    (lp * torch.linspace(-1.0, 2.0, len(lp))).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return lp.detach(), grads, seen


def test_gathered_rows_give_the_whole_matrix_gradients_bit_for_bit(monkeypatch):
    tok = unigram_tokenizer()
    model = tiny_t5(tok, seed=1)
    ref_lp, ref_grads, _ = scored(model, tok, False, monkeypatch)
    lp, grads, seen = scored(model, tok, True, monkeypatch)
    assert len(seen) == 1 and seen[0] is not None  # it applied: one gather for the call
    n_rows = len(seen[0].rows)
    assert 0 < n_rows < model.get_input_embeddings().weight.shape[0] // 2  # a few of the matrix's rows
    assert torch.equal(lp, ref_lp)
    assert grads.keys() == ref_grads.keys() and "shared.weight" in grads
    for name in grads:
        assert torch.equal(grads[name], ref_grads[name]), name


def test_not_gathered_where_it_would_not_hold():
    tok = unigram_tokenizer()
    model = tiny_t5(tok, seed=1)
    weight = model.get_output_embeddings().weight
    ids = [torch.tensor([1, 2, 3])]
    assert gathered_rows(model, weight, ids) is not None
    with torch.no_grad():  # decoding: no gradients to save
        assert gathered_rows(model, weight, ids) is None
    lora = with_lora(tiny_t5(tok, seed=1), seed=2)  # a frozen matrix takes no gradient
    assert gathered_rows(lora, lora.get_output_embeddings().weight, ids) is None
    untied = torch.nn.Parameter(weight.detach().clone())  # a head that is not the input embedding
    assert gathered_rows(model, untied, ids) is None
    assert gathered_rows(model, weight, [torch.tensor([1, weight.shape[0]])]) is None  # out of range: no gather
