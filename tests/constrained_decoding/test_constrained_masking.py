"""The token mask is written once (issue 35 item 2): sampling, beam search and the teacher-forced
scorer all take π_c's log-probabilities from :mod:`constrained_decoding.masking`; the decoders'
variant keeps a bad row inside the grammar, the scorer's lets a NaN surface."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from constrained_decoding.masking import constrained_logprobs, decoding_logprobs

PACKAGE = Path(__file__).resolve().parents[2] / "constrained_decoding"
NAN, INF = float("nan"), float("inf")


def test_the_mask_maths_lives_in_one_module():
    texts = {p.name: p.read_text(encoding="utf-8") for p in PACKAGE.glob("*.py")}
    holders = sorted(name for name, text in texts.items() if "log_softmax" in text or "masked_fill(~valid" in text)
    assert holders == ["masking.py"]


@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.3])
def test_constrained_logprobs_is_the_masked_log_softmax_at_the_temperature(temperature):
    g = torch.Generator().manual_seed(0)
    z = torch.randn(3, 5, 6, generator=g)
    valid = torch.rand(3, 5, 6, generator=g) < 0.6
    valid[..., 0] = True
    lp = constrained_logprobs(z, valid, temperature)
    ref = (z / temperature).masked_fill(~valid, float("-inf")).log_softmax(-1)
    assert torch.equal(lp, ref)  # bit for bit, 1.0 included (no division there: z / 1.0 is z)
    assert torch.isneginf(lp[~valid]).all()
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(3, 5))


def test_the_decoders_variant_equals_the_scorers_on_good_rows():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(4, 7, generator=g)
    valid = torch.rand(4, 7, generator=g) < 0.5
    valid[:, 3] = True
    for temperature in (1.0, 0.5):
        lp, bad = decoding_logprobs(z, valid, temperature)
        assert not bad.any()
        assert torch.equal(lp, constrained_logprobs(z, valid, temperature))


def test_a_bad_row_is_uniform_when_decoding_and_non_finite_when_scoring():
    valid = torch.tensor([[True, True, False], [True, True, True], [True, False, True]])
    z = torch.tensor([[NAN, 0.0, 1.0], [0.0, INF, 1.0], [0.0, NAN, 1.0]])  # row 2: the NaN is not allowed
    lp, bad = decoding_logprobs(z, valid, 1.0)
    assert bad.tolist() == [True, True, False]
    assert torch.equal(lp[0], torch.tensor([-torch.log(torch.tensor(2.0)), -torch.log(torch.tensor(2.0)),
                                            float("-inf")]))
    assert torch.isfinite(lp[valid]).all() and torch.isneginf(lp[~valid]).all()
    scored = constrained_logprobs(z, valid, 1.0)
    assert scored[0].isnan().any() and scored[1].isnan().any()  # the scorer hides nothing
    assert torch.equal(scored[2], lp[2])


def test_the_scorers_mask_is_differentiable():
    z = torch.randn(2, 4, requires_grad=True)
    valid = torch.tensor([[True, False, True, True], [True, True, False, False]])
    constrained_logprobs(z, valid, 0.8)[valid].sum().backward()
    assert torch.isfinite(z.grad).all() and (z.grad[~valid] == 0).all()
