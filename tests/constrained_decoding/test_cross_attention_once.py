"""An encoder-decoder planner's cross-attention keys and values are computed once per prompt
(``PlannerRunner._prompt_cross``), not once per row that reads the prompt, and rows read them where
they lie (:mod:`constrained_decoding.prompt_attention`): no row holds a copy. The rows decode as when
each holds its own copy and the model's own attention reads it (the path before), on travel
itineraries (the grammar whose rows join most) by sampling, beam search and stochastic beam search."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from constrained_decoding import runner as runner_mod
from constrained_decoding.cross_attention import filled_layer
from constrained_decoding.decode import beam_search_plans, sample_plans
from constrained_decoding.slot_rows import SlotBatch
from constrained_decoding.without_replacement import sample_distinct_plans
from tests.constrained_decoding.test_slot_rows import travel  # noqa: F401  (the module's travel planners)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _decode(model, tok, prompts, grammars):
    sampled = sample_plans(model, tok, prompts, grammars, k=3, seed=5)
    beams = beam_search_plans(model, tok, prompts, grammars, num_beams=3, num_return=2)
    distinct = sample_distinct_plans(model, tok, prompts, grammars, k=3, seed=6)
    return ([[(d.rows, d.logprob) for d in ds] for ds in sampled + beams],
            [[(d.rows, d.logprob) for d in ds.plans] for ds in distinct])


def _dec_rows_copied(self, b, ids):
    """The path before: every row holds a copy of its prompt's cross-attention keys and values and its
    encoder states, which the model's own attention reads."""
    prompts = b.prompt[: b.window.n] if isinstance(b, SlotBatch) else b.prompts
    idx = torch.as_tensor(prompts, device=ids.device)
    kv = self._prompt_kv
    cross = DynamicCache()
    cross.layers = [filled_layer(k.index_select(0, idx), v.index_select(0, idx)) for k, v in zip(kv.keys, kv.values)]
    decoder = self.model.get_decoder()
    out = decoder(input_ids=ids, attention_mask=b.mask, encoder_hidden_states=self.enc_hidden.index_select(0, idx),
                  encoder_attention_mask=self.enc_mask.index_select(0, idx),
                  **self._with_cache(decoder, EncoderDecoderCache(b.cache.self_attention_cache, cross)))
    return out.last_hidden_state[:, -1] * self.head.scale


def _flat(results):
    plans = [[rows for rows, _ in ds] for part in results for ds in part]
    logprobs = torch.tensor([lp for part in results for ds in part for _, lp in ds], dtype=torch.float64)
    return plans, logprobs


def test_rows_read_their_prompts_cross_attention_as_copies_would(travel, monkeypatch):  # noqa: F811
    env, planners = travel
    model, tok = planners["t5"]
    queries = [[q for q in env.queries() if q.days == d][0] for d in (3, 5)]
    prompts, grammars = [q.query for q in queries], [env.grammar(tok, q) for q in queries]
    sample_plans(model, tok, prompts, grammars)  # the output head's one-off probe (per model) runs first
    projected: list[int] = []  # rows whose cross-attention keys a decoder layer projected
    hooks = [layer.layer[1].EncDecAttention.k.register_forward_hook(
        lambda _m, args, _out: projected.append(args[0].shape[0])) for layer in model.get_decoder().block]
    runners: list = []
    init = runner_mod.PlannerRunner.__init__
    monkeypatch.setattr(runner_mod.PlannerRunner, "__init__",
                        lambda self, *a, **kw: runners.append(self) or init(self, *a, **kw))
    batches: list = []  # (batch, runner) after each step of the prompt-reading path
    step = runner_mod.PlannerRunner.step
    monkeypatch.setattr(runner_mod.PlannerRunner, "step",
                        lambda self, tok_: batches.append((self.batch, self)) or step(self, tok_))
    implementation = model.get_decoder().config._attn_implementation
    try:
        reading = _decode(model, tok, prompts, grammars)
        calls, rows = len(projected), sum(projected)
        monkeypatch.setattr(runner_mod.PlannerRunner, "step", step)
        monkeypatch.setattr(runner_mod.PlannerRunner, "_dec_rows", _dec_rows_copied)
        copied = _decode(model, tok, prompts, grammars)
    finally:
        for h in hooks:
            h.remove()
    plans, logprobs = _flat(reading)
    want_plans, want = _flat(copied)
    assert plans == want_plans  # the same plans
    torch.testing.assert_close(logprobs, want, rtol=0, atol=5e-5)  # to float reduction order (sums of ~600 tokens)
    layers = len(model.get_decoder().block)
    made = len([r for r in runners if r._prompt_kv is not None]) // 2  # (each path made as many)
    assert calls == made * layers and rows == calls * len(prompts)  # one projection per layer per runner
    # no batch holds a per-row copy: every one reads its runner's prompts' cache, one row per prompt
    assert any(isinstance(b, SlotBatch) for b, _ in batches) and len(batches) > 100
    for b, r in batches:
        assert b.cache.cross_attention_cache is r._cross
        assert r._cross.layers[0].keys.shape[0] == len(prompts)
    assert not any(hasattr(b, "enc") or hasattr(b, "ebuf") for b, _ in batches)
    assert model.get_decoder().config._attn_implementation == implementation  # restored after every forward


def test_prompt_cross_attention_matches_the_models(travel):  # noqa: F811
    """The prompts' cache holds what the model computes for each prompt."""
    env, planners = travel
    model, tok = planners["t5"]
    prompts = [q.query for q in env.queries()[:3]]
    r = runner_mod.PlannerRunner(model, tok, prompts, pad_id=tok.pad_token_id)
    with torch.inference_mode():
        cache = r._prompt_cross()
        for block, layer in zip(model.get_decoder().block, cache.layers):
            att = block.layer[1].EncDecAttention
            enc = r.enc_hidden
            want = att.k(enc).view(*enc.shape[:2], -1, att.key_value_proj_dim).transpose(1, 2)
            torch.testing.assert_close(layer.keys, want, rtol=1e-6, atol=1e-6)
            assert layer.keys.shape[0] == len(prompts)


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_the_models_own_attention_and_masks_serve_the_rest(travel, monkeypatch, attention):  # noqa: F811
    """Self-attention and the masks the model builds stay those of the model's own implementation
    (eager builds additive masks, sdpa boolean ones or none): travel rows, padded by their joins, decode
    as when every row holds a copy of its prompt's keys and values."""
    env, planners = travel
    model, tok = planners["t5"]
    model = copy.deepcopy(model)
    model.set_attn_implementation(attention)
    queries = [[q for q in env.queries() if q.days == d][0] for d in (3, 5)]
    prompts, grammars = [q.query for q in queries], [env.grammar(tok, q) for q in queries]

    def decode():
        found = sample_plans(model, tok, prompts, grammars, k=3, seed=2)
        found += beam_search_plans(model, tok, prompts, grammars, num_beams=3)
        return _flat([[[(d.rows, d.logprob) for d in ds] for ds in found]])

    reading = decode()
    assert model.get_decoder().config._attn_implementation == attention
    monkeypatch.setattr(runner_mod.PlannerRunner, "_dec_rows", _dec_rows_copied)
    copied = decode()
    assert reading[0] == copied[0]
    torch.testing.assert_close(reading[1], copied[1], rtol=0, atol=5e-5)
