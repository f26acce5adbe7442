"""Encoder states of prompts computed once, with gradients, for decoding and then scoring them.

An RL step decodes its decisions (no gradients) and then scores the same decisions teacher-forced
with gradients, under the same weights: an encoder-decoder planner would read every prompt twice
(once per decoding call that holds it, once more when scoring). :class:`EncoderMemo` reads each
distinct prompt (its token ids) once, with gradients: decoding uses the states detached, the scorer
uses them as they are, so the loss back-propagates through the one encoder pass. The states are
those of the weights (and train/eval mode) at the time they were computed: the caller keeps the
memo for one step, before any update, and for one model.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["EncoderMemo"]


class EncoderMemo:
    """Per prompt (token ids), its encoder states under one model, with their autograd graph."""

    def __init__(self) -> None:
        self._reads: list[torch.Tensor] = []  # per encoder pass: [prompts, width, d_model] states
        self._where: dict[tuple[int, ...], tuple[int, int]] = {}  # prompt ids -> (pass, row)
        self._model: nn.Module | None = None

    def __len__(self) -> int:
        return len(self._where)

    def states(self, model: nn.Module, prompts: Sequence[Sequence[int]], pad_id: int, *,
               detach: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """``[n, T, d]`` encoder states of ``prompts`` (right-padded to the longest, ``T``; padding
        masked) and their ``[n, T]`` attention mask; prompts not read yet are read now, together,
        with gradients (whatever the caller's grad or inference mode). ``detach``: without the
        graph (what decoding needs). Rows are gathered per pass (one ``index_select`` each, whose
        backward is one scatter), not sliced row by row."""
        if self._model is None:
            self._model = model
        elif model is not self._model:
            raise ValueError(f"this EncoderMemo holds the states of {type(self._model).__name__} "
                             f"{id(self._model):#x}, not of {type(model).__name__} {id(model):#x}: one memo per model")
        keys = [tuple(int(t) for t in p) for p in prompts]
        device = next(model.parameters()).device
        missing = [k for k in dict.fromkeys(keys) if k not in self._where]
        if missing:
            with torch.inference_mode(False), torch.enable_grad():
                width = max(len(k) for k in missing)
                ids = torch.full((len(missing), width), pad_id, dtype=torch.long, device=device)
                mask = torch.zeros((len(missing), width), dtype=torch.long, device=device)
                for r, k in enumerate(missing):
                    ids[r, : len(k)] = torch.as_tensor(k, dtype=torch.long, device=device)
                    mask[r, : len(k)] = 1
                self._reads.append(model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state)
            self._where.update({k: (len(self._reads) - 1, r) for r, k in enumerate(missing)})
        width = max(len(k) for k in keys)
        by_pass: dict[int, list[int]] = {}  # pass -> positions in ``keys``
        for i, k in enumerate(keys):
            by_pass.setdefault(self._where[k][0], []).append(i)
        parts, order = [], []
        for read, positions in by_pass.items():
            h = self._reads[read].detach() if detach else self._reads[read]
            rows = torch.as_tensor([self._where[keys[i]][1] for i in positions], dtype=torch.long, device=device)
            h = h.index_select(0, rows)
            parts.append(F.pad(h, (0, 0, 0, width - h.shape[1])) if h.shape[1] < width else h[:, :width])
            order += positions
        hidden = torch.cat(parts) if len(parts) > 1 else parts[0]
        if order != sorted(order):
            back = torch.empty(len(order), dtype=torch.long)
            back[torch.as_tensor(order)] = torch.arange(len(order))
            hidden = hidden.index_select(0, back.to(device))
        mask = (torch.arange(width, device=device) < torch.as_tensor([len(k) for k in keys], device=device)[:, None])
        return hidden, mask.long()
