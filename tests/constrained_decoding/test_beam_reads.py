"""Beam search reads the device only at steps where a row can end (constrained_decoding/beam.py,
``BeamSearch._skips``): on travel itineraries (long rows) most steps are not read, and the search
returns exactly what reading every step returns -- stochastic beam search included, whose threshold κ
takes the running nodes left out at unread steps from a maximum kept on the device; unusable logits
at an unread step are still raised, naming that step."""

from __future__ import annotations

import pytest
import torch

from constrained_decoding import beam as beam_mod
from constrained_decoding.decode import beam_search_plans, greedy_plans
from constrained_decoding.search import NonFiniteLogitsError
from constrained_decoding.without_replacement import sample_distinct_plans
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


def _skipping_and_reading_every_step(monkeypatch, decode) -> dict[bool, tuple]:
    """``decode()`` and its reads, first as it runs, then with the bound saying "read at the next
    step" every time (the search before skipping): ``{every_step: (result, reads, last read)}``."""
    reads = _reads(monkeypatch)
    found = {}
    for every_step in (False, True):
        if every_step:
            monkeypatch.setattr(beam_mod.BeamSearch, "_skips", lambda self, step: torch.tensor(1))
        reads.clear()
        found[every_step] = (decode(), len(reads), max(reads))
    return found


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_unread_steps_change_nothing(travel, name, monkeypatch):  # noqa: F811
    env, planners = travel
    model, tok = planners[name]
    prompts, grammars = _queries(env, tok)

    def decode():
        beams = beam_search_plans(model, tok, prompts, grammars, num_beams=4, num_return=2)
        greedy = greedy_plans(model, tok, prompts, grammars)
        return [[(d.rows, d.logprob) for d in ds] for ds in beams], [(d.rows, d.logprob) for d in greedy]

    found = _skipping_and_reading_every_step(monkeypatch, decode)
    skipped, every = found[False], found[True]
    assert skipped[0] == every[0]  # the same rows and log-probabilities, bit for bit
    assert skipped[1] < 0.8 * every[1], (skipped[1], every[1])  # long rows: most steps are not read


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_stochastic_beam_search_unread_steps_change_nothing(travel, name, monkeypatch):  # noqa: F811
    env, planners = travel
    model, tok = planners[name]
    prompts, grammars = _queries(env, tok)

    def decode():
        drawn = sample_distinct_plans(model, tok, prompts, grammars, 3, seed=7)
        return [([(d.rows, d.logprob) for d in x.plans], x.keys, x.threshold) for x in drawn]

    found = _skipping_and_reading_every_step(monkeypatch, decode)
    assert found[False][0] == found[True][0]  # the same plans, log-probabilities, keys and κ, bit for bit
    assert any(t > float("-inf") for _, _, t in found[False][0])  # κ is a left-out key, not only "none left"
    assert found[False][1] < 0.8 * found[True][1], (found[False][1], found[True][1])


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


def test_stochastic_beam_search_reads_no_boolean_masks(travel, monkeypatch):  # noqa: F811
    """Groups of several widths are laid on their grid by index (``BeamSearch._grid``, made when the
    running groups change): no boolean mask, whose ``nonzero`` reads the device, at any step."""
    from benchmarks.decode_syncs import counting

    env, planners = travel
    model, tok = planners["t5"]
    prompts, grammars = _queries(env, tok)
    grids = []
    real = beam_mod.BeamSearch._grid
    monkeypatch.setattr(beam_mod.BeamSearch, "_grid", lambda self, widths: grids.append(1) or real(self, widths))
    sample_distinct_plans(model, tok, prompts, grammars, 3, seed=7)  # warm: tables, the head probe
    grids.clear()
    with counting() as c:
        sample_distinct_plans(model, tok, prompts, grammars, 3, seed=7)
    assert grids, "expected groups of several widths"
    assert set(c.sync_kinds) <= {"tolist"}, c.sync_kinds
