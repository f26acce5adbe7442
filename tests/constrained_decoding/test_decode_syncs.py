"""The sampler's host reads (issue #39 item 3): the same draws with fewer syncs.

* :func:`multinomial_one` is ``torch.multinomial(p, 1)`` bit for bit, without its host-side check;
* the sampler reads the device only after steps at which a row may finish
  (:mod:`constrained_decoding.finish_bounds`), and samples exactly what it samples reading after
  every step (rows, log-probabilities, branch rows joining mid-batch, per-row streams);
* :func:`decoding_mode` walks no module tree for a model already in eval mode.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from constrained_decoding import search
from constrained_decoding.decode import decoding_mode, sample_plans
from constrained_decoding.dfa import build_dfa
from constrained_decoding.finish_bounds import steps_to_final, table_bounds
from constrained_decoding.row_draws import multinomial_one
from envs.openagi.grammar import plan_grammars
from tests.flows.test_flow_batched import LIMITS, REG, TASKS  # the branching OpenAGI tasks those tests sample
from tests.tiny_models import bpe_tokenizer, tiny_llama, tiny_t5, unigram_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PLANNERS = {
    "t5": lambda: (tiny_t5(unigram_tokenizer(), seed=1), unigram_tokenizer()),
    "llama": lambda: (tiny_llama(bpe_tokenizer(), seed=2), bpe_tokenizer()),
}


def test_multinomial_one_draws_what_torch_multinomial_draws():
    """Same indices and the same generator state after, over widths, batch sizes and zeroed slots."""
    for seed in range(60):
        g = torch.Generator().manual_seed(seed)
        rows, width = 1 + seed % 13, 1 + seed % 7
        lp = torch.randn(rows, width, generator=g) * 4
        lp[torch.rand(rows, width, generator=g) < 0.4] = float("-inf")
        lp[:, 0] = 0.0  # every row keeps some mass
        p = lp.log_softmax(-1).exp()
        a, b = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        for _ in range(3):
            assert torch.equal(multinomial_one(p, a), torch.multinomial(p, 1, generator=b))
        assert torch.equal(a.get_state(), b.get_state())


def test_steps_to_final_is_the_shortest_path_to_the_sink():
    dfa, (s0, s1) = build_dfa([[[1, 2, 3], [1, 4]], [[5, 6, 7, 8]]], pad_id=0)
    dist = steps_to_final(dfa)
    assert dist[dfa.final] == 0
    assert dist[s0] == 2 and dist[dfa.transitions[s0][1]] == 1  # "1 4" ends sooner than "1 2 3"
    assert dist[dfa.transitions[dfa.transitions[s0][1]][2]] == 1
    assert dist[s1] == 4
    assert steps_to_final(dfa) is dist  # memoized per DFA


def _read_every_step(tables):
    """``table_bounds`` telling the sampler that any running row may finish at the next step."""
    dist, final = table_bounds(tables)
    return np.where(final, 0, 1), final


def _sample(model, tok, k, **kw):
    prompts, sigs = [p for p, _ in TASKS], [s for _, s in TASKS]
    drawn = sample_plans(model, tok, prompts, plan_grammars(tok, sigs, REG, LIMITS), k=k, temperature=0.8, **kw)
    return [(d.rows, d.logprob) for ds in drawn for d in ds]


@pytest.mark.parametrize("name", PLANNERS)
@pytest.mark.parametrize("streams", [False, True])
def test_reading_when_a_row_may_finish_samples_what_reading_every_step_samples(name, streams, monkeypatch):
    """Branch rows join mid-batch and finished rows leave at the same steps: the same rows and
    log-probabilities bit for bit, with the batch's generator and with per-row streams; and fewer
    reads than steps."""
    model, tok = PLANNERS[name]()
    kw = dict(sample_seeds=list(range(100, 100 + 3 * 5))) if streams else dict(seed=3)
    reads, steps = [], []
    real_read, real_step = search._read, search.PlannerRunner.step
    monkeypatch.setattr(search, "_read", lambda *a: reads.append(1) or real_read(*a))
    monkeypatch.setattr(search.PlannerRunner, "step", lambda self, t: steps.append(1) or real_step(self, t))
    windowed = _sample(model, tok, 5, **kw)
    n_reads, n_steps = len(reads), len(steps)
    monkeypatch.setattr(search, "table_bounds", _read_every_step)
    every = _sample(model, tok, 5, **kw)
    assert windowed == every  # float log-probabilities compared exactly
    assert len(reads) - n_reads == len(steps) - n_steps + 1  # the reference reads after every step
    assert 0 < n_reads < n_steps


def test_a_lone_row_is_read_exactly_where_it_may_end(monkeypatch):
    """One row: a read after the first step, then after each step at which the grammar lets the
    row end at the earliest (tool names span several tokens): fewer reads than steps."""
    model, tok = PLANNERS["llama"]()
    (g,) = plan_grammars(tok, [TASKS[2][1]], REG, LIMITS)
    reads = []
    real_read = search._read
    monkeypatch.setattr(search, "_read", lambda *a: reads.append(1) or real_read(*a))
    (d,), = sample_plans(model, tok, [TASKS[2][0]], [g], k=1, seed=0)
    dist = steps_to_final(g.dfa)
    states, _ = g.dfa.walk(g.root, d.rows[0])
    states = states[len(g.dfa.forced_prefix(g.root)[0]):] + [g.dfa.final]  # before each sampled step, then the end
    want, due = 0, dist[states[0]]
    for step in range(1, len(states)):
        if step >= due:
            want += 1
            due = step + dist[states[step]]
    assert len(reads) == want < len(states) - 1


class _Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(2, 2) for _ in range(3))


def test_decoding_mode_walks_no_tree_for_an_eval_model(monkeypatch):
    calls = []
    real = nn.Module.train
    monkeypatch.setattr(nn.Module, "train", lambda self, mode=True: calls.append(mode) or real(self, mode))
    model = _Tree()
    real(model, False)
    calls.clear()
    with decoding_mode(model):
        assert torch.is_inference_mode_enabled()
    assert calls == [] and not model.training
    real(model, True)
    with decoding_mode(model):
        assert not any(m.training for m in model.modules())
    assert all(m.training for m in model.modules())  # restored


def test_upload_is_as_tensor_off_cuda():
    from constrained_decoding.uploads import upload

    for data, dtype in (([3, 1, 2], torch.long), ([0.5, -1.0], torch.float64), ([], torch.long)):
        got = upload(data, "cpu", dtype)
        assert got.dtype == dtype and got.device.type == "cpu" and torch.equal(got, torch.as_tensor(data, dtype=dtype))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the pinned, non-blocking path)")
def test_upload_to_cuda_gives_the_values_behind_queued_work():
    from constrained_decoding.uploads import upload

    busy = torch.randn(2048, 2048, device="cuda")
    busy = busy @ busy  # kernels queued ahead of the copy
    got = upload(list(range(1000)), "cuda")
    assert got.device.type == "cuda" and got.dtype == torch.long and torch.equal(got.cpu(), torch.arange(1000))
    assert torch.isfinite(busy).all()
