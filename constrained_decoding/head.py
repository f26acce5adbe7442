"""The planner's output layer: logits of the few allowed token ids per row, not the whole vocabulary.

For the common heads (a plain ``nn.Linear`` output layer, T5's optional ``d_model**-0.5``
rescale) the decoder's *features* are the final hidden states and only the allowed rows of the
output matrix are multiplied (``restricted``): a constrained step costs the transformer body,
not a ``[rows, vocab]`` projection. For any other head (logit soft-capping, LoRA on
``lm_head``) the features are the full logits from the model's own ``forward``. With
``mode="auto"`` which path a model takes is decided once per model by comparing both on a probe;
``"full"`` forces the full-logits path (an ablation, or a head the probe cannot judge) and
``"restricted"`` skips the probe.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import BaseModelOutput

if TYPE_CHECKING:
    from constrained_decoding.gathered_rows import GatheredRows
    from constrained_decoding.tables import StateTables

HeadMode = Literal["auto", "restricted", "full"]
HEAD_MODES = ("auto", "restricted", "full")

_PROBED: "weakref.WeakKeyDictionary[nn.Module, bool]" = weakref.WeakKeyDictionary()
"""Memo of the ``auto`` probe per model (a model's head does not change)."""


class OutputHead:
    """The output layer of ``model`` (unwrapped) and whether features are hidden states (``restricted``)."""

    def __init__(self, model: nn.Module, encoder_decoder: bool, mode: HeadMode = "auto"):
        if mode not in HEAD_MODES:
            raise ValueError(f"head={mode!r}: expected one of {', '.join(HEAD_MODES)}")
        cfg = model.config
        self.scale = 1.0
        if encoder_decoder and getattr(cfg, "scale_decoder_outputs", getattr(cfg, "tie_word_embeddings", False)):
            self.scale = cfg.d_model ** -0.5
        head = model.get_output_embeddings()
        self.weight = head.weight if isinstance(head, nn.Linear) else None
        self.bias = head.bias if isinstance(head, nn.Linear) else None
        if mode == "full" or self.weight is None:
            self.restricted = False
        elif mode == "restricted":
            self.restricted = True
        else:
            if model not in _PROBED:
                _PROBED[model] = self._probe(model, encoder_decoder)
            self.restricted = _PROBED[model]

    def allowed_logits(self, feats: torch.Tensor, tables: StateTables, state: torch.Tensor,
                       rows: GatheredRows | None = None) -> torch.Tensor:
        """Logits (float32) ``[..., D]`` of the tokens grammar states ``state[...]`` allow, from features
        ``feats[..., F]``.

        Restricted heads multiply the features by the output rows of ``tables.vocab`` only (the
        few hundred ids the grammars can emit), then gather each state's slots; ``rows``: those
        rows are read from a call's gathered rows (:mod:`constrained_decoding.gathered_rows`)."""
        if not self.restricted:
            return feats.gather(-1, tables.allowed[state]).float()
        w = self.weight.index_select(0, tables.vocab) if rows is None else rows.output_rows(tables.vocab)
        z = torch.matmul(feats.to(w.dtype), w.t())
        if self.bias is not None:
            z = z + self.bias.index_select(0, tables.vocab)
        return z.gather(-1, tables.allowed_local[state]).float()

    def _probe(self, model: nn.Module, encoder_decoder: bool) -> bool:
        """Do body features times the output matrix reproduce the model's logits?"""
        device = self.weight.device
        ids = (torch.arange(2, 8, device=device) % self.weight.shape[0]).unsqueeze(0)
        was_training = model.training
        if was_training:
            model.eval()
        try:
            with torch.no_grad():
                if encoder_decoder:
                    enc = model.get_encoder()(input_ids=ids).last_hidden_state
                    dec = ids[:, :3]
                    full = model(encoder_outputs=BaseModelOutput(last_hidden_state=enc), decoder_input_ids=dec).logits
                    h = model.get_decoder()(input_ids=dec, encoder_hidden_states=enc).last_hidden_state
                    h = h * self.scale
                else:
                    full = model(input_ids=ids).logits
                    h = model.base_model(input_ids=ids).last_hidden_state
                mine = F.linear(h.to(self.weight.dtype), self.weight, self.bias)
                tol = 1e-3 * max(1.0, float(full.abs().max()))
                ok = full.shape == mine.shape and bool((full.float() - mine.float()).abs().max() <= tol)
        except (AttributeError, TypeError, RuntimeError):  # an architecture this shortcut does not know
            ok = False
        finally:
            if was_training:
                model.train(True)
        return ok
