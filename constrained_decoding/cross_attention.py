"""An encoder-decoder planner's cross-attention keys and values, once per prompt.

They depend on the prompt alone, so :class:`constrained_decoding.runner.PlannerRunner` computes them
once per prompt (:func:`prompt_cross_attention`: one decoder pass over the prompts, the model's own
code) and every row it opens reads its prompt's where they lie (:mod:`constrained_decoding.prompt_attention`),
instead of the model projecting the encoder states again for each row of a beam search group, each
sampled plan's rows and each joining row. A cross-attention cache that holds keys is one the model
reuses (``EncoderDecoderCache.is_updated``; tests/constrained_decoding/test_cross_attention_once.py).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.cache_utils import DynamicCache, DynamicLayer, EncoderDecoderCache

__all__ = ["filled_layer", "prompt_cross_attention"]

CrossKV = list[tuple[torch.Tensor, torch.Tensor]]  # per decoder layer: keys and values [prompts, heads, positions, dim]


def prompt_cross_attention(decoder: nn.Module, enc_hidden: torch.Tensor, enc_mask: torch.Tensor, start_id: int,
                           cache_keyword: str) -> CrossKV:
    """Per decoder layer, the cross-attention keys and values of each prompt (row ``i``: prompt ``i``
    of ``enc_hidden``), from one pass of ``decoder`` reading the decoder start token."""
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    start = torch.full((enc_hidden.shape[0], 1), start_id, dtype=torch.long, device=enc_hidden.device)
    decoder(input_ids=start, encoder_hidden_states=enc_hidden, encoder_attention_mask=enc_mask,
            **{cache_keyword: cache, "use_cache": True})
    return [(x.keys, x.values) for x in cache.cross_attention_cache.layers]


def filled_layer(keys: torch.Tensor, values: torch.Tensor) -> DynamicLayer:
    """A cache layer holding ``keys`` and ``values`` (``DynamicLayer.lazy_initialization`` would first
    make empty tensors on their device: an upload each, on an accelerator)."""
    layer = DynamicLayer()
    layer.device, layer.is_initialized = keys.device, True
    layer.keys, layer.values = keys, values
    return layer
