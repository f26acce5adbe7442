"""The pddl env: the env checker and Gymnasium's ``check_env``, the reward and its shaping, the syntax
grammar's exactness under the constrained decoder (the log-probs of all plans of a tiny problem sum to 1;
the sampler's log-probs are the scorer's) with a T5-style and a byte-level BPE tokenizer, and a config
through ``env.name=pddl``."""

from __future__ import annotations

import pytest
import torch
from gymnasium.utils.env_checker import check_env
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

import envs
from constrained_decoding.decode import sample_plans
from constrained_decoding.logprobs import plan_logprobs
from envs.checker import check_rltf_env
from envs.pddl.env import PddlEnv, Shaping
from envs.pddl.grammar import PlanOutsideGrammar, build_syntax_grammar
from envs.pddl.grounding import ground
from envs.pddl.instances import load_folder
from envs.pddl.parsing import read_problem
from envs.pddl.search import reference_plan
from rltf.planners.tokenizer import train_plan_tokenizer
from tests.tiny_models import tiny_llama, tiny_t5

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SMALL = {"name": "pddl", "pddl": {"train_size": 12, "validation_size": 3, "test_size": 3, "test_long_size": 2,
                                  "sizes": [3, 4], "long_sizes": [5, 5]}}
TWO_BLOCKS = """(define (problem two) (:domain blocksworld-4ops) (:objects a b)
  (:init (arm-empty) (on-table a) (on-table b) (clear a) (clear b)) (:goal (on a b)))"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:  # the tests' own cache (conftest.own_cache), for this module
        patch.setenv("RLTF_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "pddl_cache"))
        yield envs.make_train_and_held_out(SMALL)


@pytest.fixture(scope="module")
def t5_tok(small):
    return train_plan_tokenizer(small[0].tokenizer_texts(), vocab_size=300, required=[])


def byte_bpe(texts: list[str]) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")


def test_the_env_passes_the_checkers(small, t5_tok):
    train, held_out = small
    check_rltf_env(train, t5_tok)
    check_rltf_env(held_out, t5_tok)
    check_env(train, skip_render_check=True)
    assert envs.split_ids(SMALL)["test"] != envs.split_ids({**SMALL, "pddl": {**SMALL["pddl"],
                                                                               "test_split": "test-long"}})["test"]


def test_descriptions_render_the_initial_state_and_goal(small):
    task = small[0].tasks()[0]
    assert task.description.startswith("Objects: a, b, c")
    assert "As initial conditions I have that, the hand is empty, block " in task.description
    assert "My goal is to have that block " in task.description and "is on top of block" in task.description
    assert "(stack ?ob ?underob): needs (clear ?underob), (holding ?ob)" in small[0].plan_instructions()


def test_rewards_and_shaping(folder):
    problems = load_folder(folder)
    refs = {i.id: reference_plan(i.task) for i in problems.instances}
    plain = PddlEnv(problems, [1, 2, 3], refs)
    shaped = PddlEnv(problems, [1, 2, 3], refs, shaping=Shaping(goal_fraction=0.5, step_cost=0.25))
    optimal = "(unstack b a) (stack b c) (pick-up a) (stack a b)"
    detour = "(unstack b a) (put-down b) (pick-up b) (stack b c) (pick-up a) (stack a b)"
    half = "(unstack b a) (stack b c)"
    bad = "(unstack b a) (stack a b)"
    got = [(r.reward, r.valid) for r in plain.reward_plans([(1, optimal), (1, detour), (1, half), (1, bad)])]
    assert got == [(1.0, True), (1.0, True), (0.0, True), (0.0, False)]
    got = [r.reward for r in shaped.reward_plans([(1, optimal), (1, detour), (1, half), (1, bad)])]
    assert got == [1.0, 0.5, 0.25, 0.0]  # 2 steps over the optimum at 0.25; half the goal at 0.5
    columns = shaped.table_columns(shaped.tasks()[:1], {1: detour})
    assert columns == {"goal rate": 1.0, "executable": 1.0}  # the headline is the plain goal rate
    assert plain.reward_plans([(1, bad)])[0].error == ("action 2 (stack a b) is not applicable: its precondition "
                                                       "(clear b) is false")
    assert plain.oracle_plans([plain.get_task(1)]) == [(optimal, 1.0)]


@pytest.fixture(scope="module")
def planners(small, t5_tok):
    texts = small[0].tokenizer_texts() + [TWO_BLOCKS]
    llama_tok = byte_bpe(texts)
    return {"t5": (tiny_t5(t5_tok, seed=1), t5_tok), "llama": (tiny_llama(llama_tok, seed=2), llama_tok)}


def two_blocks(blocks):
    return ground(blocks, read_problem(blocks, text=TWO_BLOCKS))


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_rows_are_the_plan_texts_tokenised(blocks, planners, name):
    _, tok = planners[name]
    g = build_syntax_grammar(tok, two_blocks(blocks), 3)
    plan = ("(pick-up a)", "(stack a b)")
    (start, tokens), = g.rows_for(" ".join(plan))
    assert start == g.root and tokens[-1] == g.eos_id
    assert list(tokens[:-1]) == tok(" ".join(plan), add_special_tokens=False)["input_ids"]
    assert g.assemble(tokens) == plan
    with pytest.raises(PlanOutsideGrammar, match="the plan has 4 actions; the grammar's cap is 3"):
        g.rows_for(plan * 2)
    with pytest.raises(PlanOutsideGrammar, match="unknown action 'fly'"):
        g.rows_for("(fly a)")


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_probabilities_of_all_plans_sum_to_one(blocks, planners, name):
    model, tok = planners[name]
    g = build_syntax_grammar(tok, two_blocks(blocks), 2)
    plans = list(g.enumerate())
    assert len(plans) == 1 + 12 + 12 * 12  # the empty plan, 12 ground actions, every pair of them
    with torch.no_grad():
        p = plan_logprobs(model, tok, ["stack a on b"] * len(plans), [g] * len(plans), plans).exp()
    torch.testing.assert_close(float(p.sum()), 1.0, rtol=0.0, atol=1e-5 + len(plans) * 1.2e-7)
    assert float(p.min()) > 0 and float(p.max()) < 0.9


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_the_sampler_reports_the_scorers_log_probabilities(blocks, planners, name):
    model, tok = planners[name]
    task = two_blocks(blocks)
    g = build_syntax_grammar(tok, task, 4)
    for temperature in (1.0, 0.7):
        drawn = sample_plans(model, tok, ["stack a on b"], [g], k=6, temperature=temperature, seed=3)[0]
        got = torch.tensor([d.logprob for d in drawn])
        with torch.no_grad():
            want = plan_logprobs(model, tok, ["stack a on b"] * len(drawn), [g] * len(drawn),
                                 [d.plan for d in drawn], temperature)
        torch.testing.assert_close(got, want.float(), rtol=1e-5, atol=1e-5)
        for d in drawn:
            assert len(d.plan) <= 4 and all(a in task.by_text for a in d.plan)


def test_one_grammar_per_tokenizer_and_action_set(small, t5_tok):
    train = small[0]
    by_size = {}
    for t in train.tasks():
        by_size.setdefault(t.size, []).append(t)
    same = by_size[3][:2]
    assert train.grammar(t5_tok, same[0]) is train.grammar(t5_tok, same[1].id)
    assert train.grammar(t5_tok, by_size[4][0]) is not train.grammar(t5_tok, same[0])


def test_the_config_section(tmp_path):
    from rltf.config.loading import ConfigError, load_config

    cfg = load_config(["env.name=pddl", "env.pddl.sizes=[3,4]", "env.pddl.shaping.step_cost=0.1"])
    assert cfg.env.pddl.sizes == [3, 4] and cfg.env.pddl.shaping.step_cost == 0.1
    assert load_config(["env.name=pddl", "env.pddl.grammar=legal"]).env.pddl.grammar == "legal"
    with pytest.raises(ConfigError, match=r"'env.pddl.grammar': 'lawful'; expected one of syntax, legal"):
        load_config(["env.name=pddl", "env.pddl.grammar=lawful"])
    with pytest.raises(ConfigError, match=r"'env.pddl.long_sizes': \[4, 6\]; expected more objects than any "):
        load_config(["env.name=pddl", "env.pddl.long_sizes=[4,6]"])
    with pytest.raises(ConfigError, match=rf"^{tmp_path}: no instance-<k>.pddl problem in the folder$"):
        load_config(["env.name=pddl", f"env.pddl.problems={tmp_path}"])
