"""Beam search reads the device only at steps where a row can end (constrained_decoding/beam.py,
``BeamSearch._skips``): on travel itineraries (long rows) most steps are not read, and the search
returns exactly what reading every step returns; unusable logits at an unread step are still raised,
naming that step."""

from __future__ import annotations

import pytest
import torch

from constrained_decoding import beam as beam_mod
from constrained_decoding.decode import beam_search_plans, greedy_plans
from constrained_decoding.search import NonFiniteLogitsError
from tests.constrained_decoding.test_slot_rows import travel  # noqa: F401  (the module's travel planners)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _queries(env, tok):
    queries = [[q for q in env.queries() if q.days == d][0] for d in (3, 5, 7)]
    return [q.query for q in queries], [env.grammar(tok, q) for q in queries]


def _reads(monkeypatch) -> list[int]:
    """The steps at which beam search reads the device (one _finishing call per read)."""
    steps: list[int] = []
    real = beam_mod.BeamSearch._finishing
    monkeypatch.setattr(beam_mod.BeamSearch, "_finishing", lambda self, step: steps.append(self.steps) or
                        real(self, step))
    return steps


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_unread_steps_change_nothing(travel, name, monkeypatch):  # noqa: F811
    env, planners = travel
    model, tok = planners[name]
    prompts, grammars = _queries(env, tok)
    reads = _reads(monkeypatch)
    found = {}
    for every_step in (False, True):
        if every_step:  # the bound says "read at the next step" every time: the search before skipping
            monkeypatch.setattr(beam_mod.BeamSearch, "_skips", lambda self, step: torch.tensor(1))
        reads.clear()
        beams = beam_search_plans(model, tok, prompts, grammars, num_beams=4, num_return=2)
        greedy = greedy_plans(model, tok, prompts, grammars)
        found[every_step] = ([[(d.rows, d.logprob) for d in ds] for ds in beams],
                             [(d.rows, d.logprob) for d in greedy], len(reads), max(reads))
    skipped, every = found[False], found[True]
    assert skipped[:2] == every[:2]  # the same rows and log-probabilities, bit for bit
    assert skipped[2] < 0.8 * every[2], (skipped[2], every[2])  # long rows: most steps are not read


def test_unusable_logits_at_an_unread_step_name_that_step(travel, monkeypatch):  # noqa: F811
    env, planners = travel
    model, tok = planners["t5"]
    prompts, grammars = _queries(env, tok)
    reads = _reads(monkeypatch)
    beam_search_plans(model, tok, prompts, grammars, num_beams=3)
    unread = sorted(set(range(1, max(reads) + 1)) - set(reads))
    assert unread, "expected steps without a read"
    target = unread[len(unread) // 2]
    real, calls = beam_mod.slot_logprobs, []

    def poisoned(runner, tables, feats, state, temperature):  # one call per decoding step
        calls.append(1)
        lp, idx, bad = real(runner, tables, feats, state, temperature)
        return lp, idx, bad | (len(calls) == target)

    monkeypatch.setattr(beam_mod, "slot_logprobs", poisoned)
    with pytest.raises(NonFiniteLogitsError, match=f"at decoding step {target}"):
        beam_search_plans(model, tok, prompts, grammars, num_beams=3)
