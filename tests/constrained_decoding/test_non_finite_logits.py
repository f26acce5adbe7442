"""Issue 16, non-finite logits: a clear decoding error naming the decoding step; disallowed slots
stay masked whatever the logits."""


import pytest
import torch

from tests.tiny_models import tiny_t5, unigram_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


_NONLINEAR_PROMPT = "Given noisy image and clozed English query, how to answer the question in German step by step?"


def _nan_decoding_setup():
    from envs.openagi.grammar import plan_grammars
    from envs.openagi.plans import PlanLimits
    from envs.openagi.registry import IMAGE, TEXT
    from tests.tiny_models import small_registry

    tok = unigram_tokenizer()
    grammars = plan_grammars(tok, [((IMAGE, TEXT), TEXT)], small_registry(), PlanLimits(3, 2, 1))
    return tok, grammars


@pytest.mark.parametrize("decode", ["sample", "beam", "greedy"])
def test_a_planner_with_nan_weights_is_a_clear_decoding_error(decode):
    from constrained_decoding.decode import beam_search_plans, greedy_plans, sample_plans
    from constrained_decoding.search import NonFiniteLogitsError

    tok, grammars = _nan_decoding_setup()
    model = tiny_t5(tok, seed=1)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(float("nan"))
    call = {"sample": lambda: sample_plans(model, tok, [_NONLINEAR_PROMPT], grammars, k=4, seed=1),
            "beam": lambda: beam_search_plans(model, tok, [_NONLINEAR_PROMPT], grammars, num_beams=4),
            "greedy": lambda: greedy_plans(model, tok, [_NONLINEAR_PROMPT], grammars)}[decode]
    with pytest.raises(NonFiniteLogitsError, match="non-finite logits from the planner at decoding step 1"):
        call()


@pytest.mark.parametrize("decode", ["sample", "beam"])
def test_an_infinite_logit_later_on_names_its_decoding_step(monkeypatch, decode):
    from constrained_decoding.decode import beam_search_plans, sample_plans
    from constrained_decoding.runner import PlannerRunner
    from constrained_decoding.search import NonFiniteLogitsError

    tok, grammars = _nan_decoding_setup()
    model = tiny_t5(tok, seed=1)
    real, calls = PlannerRunner.allowed_logits, []

    def poisoned(self, feats, tables, state):
        z = real(self, feats, tables, state)
        calls.append(1)
        return z.index_fill(-1, torch.tensor([0]), float("inf")) if len(calls) == 3 else z

    monkeypatch.setattr(PlannerRunner, "allowed_logits", poisoned)
    with pytest.raises(NonFiniteLogitsError, match="at decoding step 3"):
        if decode == "sample":
            sample_plans(model, tok, [_NONLINEAR_PROMPT], grammars, k=3, seed=0)
        else:
            beam_search_plans(model, tok, [_NONLINEAR_PROMPT], grammars, num_beams=3)


def test_disallowed_slots_stay_masked_whatever_the_logits():
    from types import SimpleNamespace

    from constrained_decoding.search import slot_logprobs

    valid = torch.tensor([[True, True, False, False], [True, False, True, False]])
    tables = SimpleNamespace(allowed=torch.arange(8).view(2, 4), valid=valid)
    state = torch.tensor([0, 1])
    for logits, bad in ((torch.full((2, 4), float("nan")), [True, True]),
                        (torch.tensor([[0.0, float("inf"), 1.0, 1.0], [-float("inf"), 0.0, -float("inf"), 0.0]]),
                         [True, True]),
                        (torch.tensor([[0.0, 1.0, float("nan"), float("inf")], [2.0, float("nan"), 0.0, 0.0]]),
                         [False, False])):  # non-finite logits of disallowed tokens do not matter
        runner = SimpleNamespace(allowed_logits=lambda f, t, s, z=logits: z)
        lp, idx, flagged = slot_logprobs(runner, tables, None, state, 1.0)
        assert flagged.tolist() == bad
        assert torch.isneginf(lp[~valid]).all() and torch.isfinite(lp[valid]).all()
        torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2))
