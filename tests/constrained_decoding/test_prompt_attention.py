"""Rows reading their prompts' cross-attention keys and values where they lie
(:mod:`constrained_decoding.prompt_attention`): each layout computes what per-row attention over a
copy of each row's prompt's keys and values computes, and the model's attention setting is left as
it was."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import transformers
from torch import nn
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from constrained_decoding import prompt_attention
from constrained_decoding.prompt_attention import (
    ATTENTION,
    PromptKV,
    RowsLayout,
    prompt_rows_attention,
    reading_prompts,
)

HEADS, POSITIONS, DIM, LAYERS = 2, 7, 4, 2


def _kv(prompts: int, seed: int = 0) -> PromptKV:
    g = torch.Generator().manual_seed(seed)
    shape = (prompts, HEADS, POSITIONS, DIM)
    cross = [(torch.randn(shape, generator=g), torch.randn(shape, generator=g)) for _ in range(LAYERS)]
    mask = torch.ones(prompts, POSITIONS, dtype=torch.long)
    mask[1::2, -3:] = 0  # every other prompt padded
    return PromptKV.of(cross, mask, width=8)


def _per_row(kv: PromptKV, layer: int, prompts: list[int], query: torch.Tensor) -> torch.Tensor:
    idx = torch.tensor(prompts)
    out = F.scaled_dot_product_attention(query, kv.keys[layer][idx], kv.values[layer][idx],
                                         attn_mask=kv.bias[idx], scale=1.0)
    return out.transpose(1, 2)


@pytest.mark.parametrize(("prompts", "grouped"), [
    ([0, 1, 2, 3], True),  # one row per prompt, in order: the prompts' own tensors
    ([2, 0, 3, 0, 2, 2, 1, 3], True),  # groups of 1-3 rows, shuffled
    ([3, 2, 3, 2], True),  # the prompts spanned are 2-3
    ([0, 3, 3, 3, 3, 3, 3, 3], False),  # one large group and a far prompt: gathered per row
])
@pytest.mark.parametrize("q", [1, 3])
def test_layouts_attend_as_per_row_copies(prompts, grouped, q):
    kv = _kv(4)
    layout = RowsLayout(kv, prompts)
    assert layout.grouped == grouped
    assert layout.cells() <= 2 * len(prompts)
    query = torch.randn(len(prompts), HEADS, q, DIM, generator=torch.Generator().manual_seed(q))
    for layer in range(LAYERS):
        torch.testing.assert_close(layout.attend(layer, query, 1.0), _per_row(kv, layer, prompts, query),
                                   rtol=1e-5, atol=1e-6)


class _Config:
    _attn_implementation = "sdpa"


def test_attention_function_reads_prompt_keys_and_passes_the_rest_on():
    kv = _kv(3)
    prompts = [2, 2, 0]
    layout = RowsLayout(kv, prompts)
    module = nn.Module()
    query = torch.randn(3, HEADS, 1, DIM)
    out, _ = prompt_rows_attention(module, query, kv.keys[1], kv.values[1], None, scaling=1.0, prompt_rows=layout)
    torch.testing.assert_close(out, _per_row(kv, 1, prompts, query), rtol=1e-5, atol=1e-6)
    # a self-attention call (keys of the rows) goes to the model's own implementation
    keys, values = torch.randn(3, HEADS, 5, DIM), torch.randn(3, HEADS, 5, DIM)
    out, _ = prompt_rows_attention(module, query, keys, values, None, scaling=1.0, prompt_rows=layout)
    want = F.scaled_dot_product_attention(query, keys, values, scale=1.0).transpose(1, 2)
    torch.testing.assert_close(out, want)
    # keys of the prompts that are not the cache's own tensors: refused, not read as the rows'
    with pytest.raises(RuntimeError, match="keys of 3 rows for 2 query rows"):
        prompt_rows_attention(module, query[:2], kv.keys[1].clone(), kv.values[1], None, prompt_rows=layout)


def test_reading_prompts_restores_the_models_setting():
    configs = [_Config(), _Config()]
    configs[1]._attn_implementation = "eager"
    with pytest.raises(ValueError, match="boom"):
        with reading_prompts(configs) as own:
            assert own == "sdpa"
            assert {c._attn_implementation for c in configs} == {"rltf_prompt_rows"}
            raise ValueError("boom")
    assert [c._attn_implementation for c in configs] == ["sdpa", "eager"]
    # nested (or another thread's) use sees the model's own setting; the outer exit restores it
    with reading_prompts(configs[:1]) as outer:
        with reading_prompts(configs[:1]) as inner:
            assert outer == inner == "sdpa"
        assert configs[0]._attn_implementation == "rltf_prompt_rows"
    assert configs[0]._attn_implementation == "sdpa"


def test_the_attention_is_registered_once_under_its_own_name():
    """Reading prompts registers the function (and the model's own masks) under ``ATTENTION`` in
    transformers' interfaces, once; the model's own entries stay as they were."""
    own = dict(ALL_ATTENTION_FUNCTIONS.items())
    with reading_prompts([_Config()]):
        pass
    assert ALL_ATTENTION_FUNCTIONS[ATTENTION] is prompt_rows_attention
    assert ATTENTION in ALL_MASK_ATTENTION_FUNCTIONS
    assert {k: v for k, v in ALL_ATTENTION_FUNCTIONS.items() if k != ATTENTION} == \
        {k: v for k, v in own.items() if k != ATTENTION}


def test_a_transformers_without_the_interfaces_is_named(monkeypatch):
    """Where transformers lacks the attention interfaces, reading prompts fails with one line naming the
    installed version, and leaves the config as it was."""
    monkeypatch.setattr(prompt_attention, "_REGISTERED", False)
    monkeypatch.setattr(prompt_attention, "AttentionMaskInterface", None)
    config = _Config()
    with pytest.raises(RuntimeError, match=f"transformers {transformers.__version__} has no AttentionInterface") as e:
        with reading_prompts([config]):
            pass
    assert "\n" not in str(e.value) and config._attn_implementation == "sdpa"


def test_stand_in_encoder_states_are_not_numbers():
    """Were the model to project the stand-in states again it would decode NaN (caught as non-finite
    logits), never plausible values; the view costs no memory per row."""
    states = _kv(2).states(5)
    assert states.shape == (5, POSITIONS, 8) and states.stride()[0] == 0
    assert torch.isnan(states).all()
