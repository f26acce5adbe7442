"""The ``rule`` flow backend (rltf/flows/backends/rule.py, issue #51 item 2): the scaffolds' no-model
baseline answers every choice from its options alone -- the cheapest one its listing line shows, the
first when none shows a price -- free text with the empty answer, a grammar with its first action; and
an MTP pass on it delivers plans the env's evaluator scores (on the real tables: ``real_travel_db``,
skipped naming the setting when they are absent)."""

from __future__ import annotations

import typing

import pytest

import envs
from envs.travel.config import TravelEnvConfig
from envs.travel.registration import TravelSection
from rltf.config.flow import FlowBackendSettings, FlowSettings, MTPSettings
from rltf.flows.agents.dispatch import run_method
from rltf.flows.backends import KINDS, BackendError, Choices, make_backend
from rltf.flows.backends.rule import RuleBackend, cheapest_shown
from rltf.flows.engine.choice import ChoiceGrammar

LISTING = ("Plan a trip with a budget of $1 for 9 people.\n"
           "- Beta (from $734, budget $900)\n"
           "- Alpha (from $207, budget $900)\n"
           "- Gamma\n"
           "Answer with one option.")


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_a_choice_is_the_cheapest_option_its_line_shows_and_nothing_else_is_read():
    b = make_backend({"kind": "rule"})
    assert isinstance(b, RuleBackend) and b.supports_grammar
    options = Choices(["Beta", "Alpha", "Gamma"])
    [c] = b.generate([user(LISTING)], options)
    assert c.text == "Alpha" and c.logprob == 0.0 and (c.prompt_tokens, c.completion_tokens) == (0, 0)
    # only the option lines count: another query text, another system message, the same answer
    other = [{"role": "system", "content": "Pick Gamma, it costs $0."},
             {"role": "user", "content": LISTING.replace("$1 for 9", "$99999 for 1")}]
    assert b.generate([other], options)[0].text == "Alpha"
    # no price shown: the first option; a tie: the first listed of the cheapest
    assert b.generate([user("- Beta\n- Alpha")], Choices(["Beta", "Alpha"]))[0].text == "Beta"
    assert cheapest_shown(["a b", "a"], "- a ($5)\n- a b ($5)") == "a b"  # a line is its longest option's
    assert cheapest_shown(["x", "y"], "- y (total $1,200)\n- x (total $950.5)") == "x"
    # free text: the empty answer (each scaffold keeps its own text); a batch answers item by item
    texts = [c.text for c in b.generate([user("Rewrite the task."), user(LISTING)], [None, options])]
    assert texts == ["", "Alpha"]


def test_grammars_answer_with_their_options_or_first_action_and_the_kinds_are_one_registry():
    b = RuleBackend()
    grammar = ChoiceGrammar(b.tokenizer, ["stay", "go"])  # the byte tokenizer builds any grammar
    [c] = b.generate([user("- go ($3)\n- stay ($4)")], grammar)
    assert (c.text, c.value) == ("go", "go")

    class Listing:  # a grammar that lists its actions: the first one
        def enumerate(self):
            yield from ([1, 2], [3])

        def format(self, action):
            return "-".join(map(str, action))

    assert b.generate([user("x")], Listing())[0].value == [1, 2]
    with pytest.raises(BackendError, match="neither options nor enumerate"):
        b.generate([user("x")], object())
    # flow.backend.kind accepts exactly the registry's kinds
    kind = typing.get_type_hints(FlowBackendSettings)["kind"]
    assert set(typing.get_args(kind)) == set(KINDS.names()) and "rule" in KINDS
    assert FlowBackendSettings(kind="rule").backend_config() == {"kind": "rule"}


def _mtp_on(env, ids, flow: FlowSettings):
    backend = RecordingRule()
    runs = [run_method("mtp", env, i, backend, flow) for i in ids]
    results = env.reward_plans([(i, r.plan if r.plan is not None else "") for i, r in zip(ids, runs)])
    return runs, results, backend


class RecordingRule(RuleBackend):
    """The rule, keeping what it was asked (to check each answer again from the option lines alone)."""

    def __init__(self):
        super().__init__()
        self.asked: list[tuple[list, object, str]] = []

    def generate(self, messages_batch, grammar=None, *, sampling=None):
        out = super().generate(messages_batch, grammar, sampling=sampling)
        grammars = grammar if isinstance(grammar, (list, tuple)) else [grammar] * len(out)
        self.asked += [(list(m), g, c.text) for m, g, c in zip(messages_batch, grammars, out)]
        return out


def _check(runs, results, backend):
    assert all(r.plan is not None and r.error is None for r in runs)  # every pass delivers
    assert all(res.evaluation is not None for res in results)  # ... a plan the evaluator scored
    choices = [(m, g, text) for m, g, text in backend.asked if isinstance(g, Choices)]
    assert choices and all(text in g.options for _, g, text in choices)
    for messages, g, text in choices:  # the same answer from the option lines alone
        lines = "\n".join(ln for ln in messages[-1]["content"].splitlines() if ln.startswith("- "))
        assert cheapest_shown(g.options, lines) == text


def test_mtp_on_the_rule_delivers_plans_the_evaluator_scores_on_the_real_tables(real_travel_db):
    cfg = TravelSection(travel=TravelEnvConfig(database_dir=str(real_travel_db), queries_source="generated"))
    _, held = envs.make_train_and_held_out(cfg)
    test = envs.split_ids(cfg)["test"]
    ids = [test[0], test[len(test) // 2], test[-1]]  # 3 spread test queries (days and levels mixed)
    flow = FlowSettings(mtp=MTPSettings(max_options=4, manager_options=4))  # configs/travel-mtp-real.yaml's
    runs, results, backend = _mtp_on(held, ids, flow)
    _check(runs, results, backend)
    assert all(res.evaluation.final_pass for res in results)  # the scaffold alone passes them (1.000 on all 72)
