"""An encoder-decoder planner's cross-attention keys and values are computed once per prompt
(``PlannerRunner._cross_rows``), not once per row that reads the prompt: every row of a beam search
group, every sampled plan's rows and every joining row take its prompt's. The rows decode exactly as
when each computes its own (the model's code path before), on travel itineraries (the grammar whose
rows join most) by sampling, beam search and stochastic beam search."""

from __future__ import annotations

import pytest
import torch
from transformers.cache_utils import DynamicCache

from constrained_decoding import runner as runner_mod
from constrained_decoding.decode import beam_search_plans, sample_plans
from constrained_decoding.without_replacement import sample_distinct_plans
from tests.constrained_decoding.test_slot_rows import travel  # noqa: F401  (the module's travel planners)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _decode(model, tok, prompts, grammars):
    sampled = sample_plans(model, tok, prompts, grammars, k=3, seed=5)
    beams = beam_search_plans(model, tok, prompts, grammars, num_beams=3, num_return=2)
    distinct = sample_distinct_plans(model, tok, prompts, grammars, k=3, seed=6)
    return ([[(d.rows, d.logprob) for d in ds] for ds in sampled + beams],
            [[(d.rows, d.logprob) for d in ds.plans] for ds in distinct])


def test_cross_attention_once_per_prompt_same_plans(travel, monkeypatch):  # noqa: F811
    env, planners = travel
    model, tok = planners["t5"]
    queries = [[q for q in env.queries() if q.days == d][0] for d in (3, 5)]
    prompts, grammars = [q.query for q in queries], [env.grammar(tok, q) for q in queries]
    sample_plans(model, tok, prompts, grammars)  # the output head's one-off probe (per model) runs first
    projected: list[int] = []  # rows whose cross-attention keys a decoder layer projected
    hooks = [layer.layer[1].EncDecAttention.k.register_forward_hook(
        lambda _m, args, _out: projected.append(args[0].shape[0])) for layer in model.get_decoder().block]
    made: list[int] = []  # runners made (each one projects once)
    init = runner_mod.PlannerRunner.__init__
    monkeypatch.setattr(runner_mod.PlannerRunner, "__init__",
                        lambda self, *a, **kw: made.append(1) or init(self, *a, **kw))
    try:
        once = _decode(model, tok, prompts, grammars)
        calls_once, rows_once = len(projected), sum(projected)
        projected.clear()
        # the path before: each new row's cross-attention cache starts empty, so the model projects it
        monkeypatch.setattr(runner_mod.PlannerRunner, "_cross_rows", lambda self, prompt_idx: DynamicCache())
        per_row = _decode(model, tok, prompts, grammars)
    finally:
        for h in hooks:
            h.remove()
    assert once == per_row  # the same plans and log-probabilities, bit for bit
    layers = len(model.get_decoder().block)
    assert calls_once == len(made) // 2 * layers  # one projection per layer per runner, over its prompts
    assert rows_once == calls_once * len(prompts)
    assert sum(projected) > 10 * rows_once, (sum(projected), rows_once)  # per row: beams, samples, joins


def test_prompt_cross_attention_matches_the_models(travel):  # noqa: F811
    """The cache a row starts from holds what the model computes for that row's prompt."""
    env, planners = travel
    model, tok = planners["t5"]
    prompts = [q.query for q in env.queries()[:3]]
    r = runner_mod.PlannerRunner(model, tok, prompts, pad_id=tok.pad_token_id)
    rows = torch.tensor([2, 0, 2, 1])
    with torch.inference_mode():
        cache = r._cross_rows(rows)
        for block, layer in zip(model.get_decoder().block, cache.layers):
            att = block.layer[1].EncDecAttention
            enc = r.enc_hidden.index_select(0, rows)
            want = att.k(enc).view(*enc.shape[:2], -1, att.key_value_proj_dim).transpose(1, 2)
            torch.testing.assert_close(layer.keys, want, rtol=1e-6, atol=1e-6)
            assert layer.keys.shape[0] == len(rows)
