"""The token mask: the constrained, renormalised distribution over a grammar state's slots, written once.

The toolkit's core promise is that the log-probability a decoder reports for a choice equals the
one the teacher-forced scorer gives it: both are :func:`constrained_logprobs` of the same logits
of the allowed tokens (:meth:`PlannerRunner.allowed_logits`), the same ``valid`` slots and the
same temperature. Sampling and beam search read it through :func:`decoding_logprobs`, which also
keeps a row with unusable logits (NaN, +inf, or every allowed token at -inf) inside the grammar;
the scorer (:mod:`constrained_decoding.logprobs`) reads it as is, so a non-finite score surfaces.
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


def constrained_logprobs(logits_of_allowed: torch.Tensor, valid: torch.Tensor, temperature: float) -> torch.Tensor:
    """``log_softmax(z / temperature)`` over the slots ``valid`` marks, -inf at the others (``[..., D]``).

    ``logits_of_allowed``: the logits of each slot's token, ``[..., D]``; ``valid``: which slots are
    real (bool, same shape). At temperature 1 there is no division (``z / 1.0`` is ``z`` bit for
    bit, value and gradient alike). Differentiable; a NaN or +inf among the allowed logits gives
    NaN log-probabilities, which are returned as they are."""
    z = logits_of_allowed
    if temperature != 1.0:
        z = z / temperature
    return z.masked_fill(~valid, NEG_INF).log_softmax(-1)


def decoding_logprobs(logits_of_allowed: torch.Tensor, valid: torch.Tensor,
                      temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`constrained_logprobs` for choosing (sampling, beam search), and per row whether its
    logits were unusable (``bad``: NaN, +inf, or every allowed token at -inf).

    A bad row gets the uniform distribution over its allowed slots and every slot not allowed
    stays -inf whatever the logits, so no choice made from the result leaves the grammar (and
    ``torch.multinomial`` never sees a NaN); callers raise
    :func:`~constrained_decoding.search.nonfinite_logits_error` when any row is bad."""
    lp = constrained_logprobs(logits_of_allowed, valid, temperature)
    bad = (lp.isnan() & valid).any(-1)
    uniform = -valid.sum(-1, keepdim=True).clamp(min=1).to(lp.dtype).log()
    lp = torch.where(bad.unsqueeze(-1), uniform.expand_as(lp), lp).masked_fill(~valid, NEG_INF)
    return lp, bad
