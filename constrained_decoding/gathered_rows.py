"""The rows of a tied token-embedding / output matrix that one scoring call reads, gathered once.

Teacher-forced scoring with gradients (:func:`constrained_decoding.logprobs.plan_logprobs`) reads
the planner's token matrix in every length bucket twice: the decoder looks up its input tokens,
the restricted head (:mod:`constrained_decoding.head`) takes the rows of the tokens the grammars can
emit. Each read's backward builds a gradient the size of the whole matrix (30522 x 128 for the
default planner: a 15.6 MB zero fill, page faults included, and a dense add per read), although a
call touches a few hundred rows. :class:`GatheredRows` reads the rows a call needs once
(``weight.index_select``), and every lookup of the call reads that small matrix: one whole-matrix
gradient per call.

The numbers do not change: the forward reads the same values, and a row's gradient sums the same
terms in the same order (a lookup's backward adds its positions in order, the reads' gradients
are summed in the order autograd meets them, and the one scatter back adds each row to zero), so
the gradients are bit for bit those of reading the whole matrix (``tests/constrained_decoding/test_gathered_rows.py``).

Used only where that holds: an encoder-decoder planner whose decoder input embedding is a plain
``nn.Embedding`` (no ``max_norm``, no ``scale_grad_by_freq``, dense) sharing its trained weight
with a restricted output head, gradients on, not through an FSDP forward.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["GatheredRows", "gathered_rows"]


class GatheredRows:
    """Rows ``ids`` (sorted, distinct) of ``embedding.weight``, read once, with gradients."""

    def __init__(self, embedding: nn.Embedding, ids: torch.Tensor):
        weight = embedding.weight
        self.rows = weight.index_select(0, ids)  # [n, d]: its backward is the one whole-matrix gradient
        self.local = torch.full((weight.shape[0],), -1, dtype=torch.long, device=weight.device)
        self.local[ids] = torch.arange(len(ids), device=weight.device)  # increasing: lookups keep their order
        pad = embedding.padding_idx
        self.padding_idx = None if pad is None else int(self.local[pad])

    def embed(self, token_ids: torch.Tensor) -> torch.Tensor:
        """What ``embedding(token_ids)`` returns, read from the gathered rows."""
        return F.embedding(self.local[token_ids], self.rows, padding_idx=self.padding_idx)

    def output_rows(self, vocab: torch.Tensor) -> torch.Tensor:
        """``weight[vocab]`` (the restricted head's rows), read from the gathered rows."""
        return self.rows.index_select(0, self.local[vocab])


def gathered_rows(model: nn.Module, head_weight: torch.Tensor | None, token_ids: Iterable[torch.Tensor]
                  ) -> GatheredRows | None:
    """:class:`GatheredRows` of ``model``'s input embedding over the ids in ``token_ids`` (with its
    padding row), or None where it does not apply (see the module docstring)."""
    if not torch.is_grad_enabled() or head_weight is None or not head_weight.requires_grad:
        return None
    embedding = model.get_input_embeddings()
    if type(embedding) is not nn.Embedding or embedding.weight is not head_weight or embedding.sparse \
            or embedding.max_norm is not None or embedding.scale_grad_by_freq:
        return None
    device = head_weight.device
    parts = [t.reshape(-1).to(device=device, dtype=torch.long) for t in token_ids]
    if embedding.padding_idx is not None:
        parts.append(torch.tensor([embedding.padding_idx], dtype=torch.long, device=device))
    ids = torch.unique(torch.cat(parts))  # sorted
    if len(ids) and (int(ids[0]) < 0 or int(ids[-1]) >= head_weight.shape[0]):
        return None  # an id the matrix does not hold: the lookup raises as it always did
    return GatheredRows(embedding, ids)
