"""TRL's GRPO baseline on the pddl env (issue #50 item 5): constrained GRPO follows grammars built lazily (the
``legal`` grammar: states expanded as the sampler reaches them, never enumerated) and eager ones unchanged;
train/grpo.py trains pddl planners (constrained and free text) end to end; the verdict suite lists every arm."""

from __future__ import annotations

import contextlib
import io
import json
import random

import pytest
import torch
from transformers import LogitsProcessorList

from envs.pddl.generators import blocksworld
from envs.pddl.grammar import build_legal_grammar, build_syntax_grammar
from envs.pddl.grounding import ground
from envs.pddl.instances import shipped_domain
from envs.pddl.parsing import read_domain, read_problem
from envs.pddl.simulator import simulate
from envs.pddl.writing import problem_text
from rltf.comparison.lazy_grammar import (
    LazyGrammarError,
    LazyGrammarLogitsProcessor,
    completion_plan_text,
    longest_sequence,
    separator_id,
)
from tests.envs.pddl.conftest import BW_PROBLEM, own_cache  # noqa: F401  (autouse: the tests' own pddl cache)
from tests.envs.pddl.test_pddl_env import byte_bpe
from tests.tiny_models import tiny_llama

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture(scope="module")
def problems():
    """bw-tiny (3 blocks) and a problem of 8 blocks (~10^6 simulator states: the legal grammar's cannot be walked)."""
    blocks = read_domain(shipped_domain("blocksworld"))
    eight = problem_text(blocksworld(blocks, 8, random.Random(5), "p8"), False)
    return ground(blocks, read_problem(blocks, text=BW_PROBLEM)), ground(blocks, read_problem(blocks, text=eight))


@pytest.fixture(scope="module")
def tok(problems):
    return byte_bpe([BW_PROBLEM, " ".join(a.text for t in problems for a in t.actions)])


def test_a_lazy_grammar_is_sampled_without_walking_its_states(problems, tok):
    _, eight = problems
    g = build_legal_grammar(tok, eight, 32)
    sep = separator_id(tok, [g])  # from the tokens the grammar declares, not its states
    assert g.expansions == 0 and sep not in g.dfa.alphabet
    with pytest.raises(LazyGrammarError, match="lazy_limit"):
        longest_sequence(g)  # its longest plan is unknown without walking every state
    assert longest_sequence(g, 200) == 200 and g.expansions == 0
    model = tiny_llama(tok, seed=3)
    torch.manual_seed(0)
    prompt = torch.tensor([[tok.bos_token_id or 0] * 3] * 4)
    processor = LazyGrammarLogitsProcessor([g] * 4, sep)
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True, max_new_tokens=400,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                         logits_processor=LogitsProcessorList([processor]))
    for row in out[:, 3:].tolist():
        text = completion_plan_text(g, sep, row)
        assert text is not None and simulate(eight, text).valid  # every sampled plan executable
    assert 0 < g.expansions < 2_000  # the states the rows reached, no more


def test_an_eager_grammar_without_branches_gets_its_longest_row_without_enumerating_plans(problems, tok):
    three, _ = problems
    small = build_syntax_grammar(tok, three, 2)  # 30 actions, at most 2: 931 plans, enumerated to check
    longest = max(len(small.rows_for(p)[0][1]) for p in small.enumerate())
    assert longest_sequence(small) == longest
    big = build_syntax_grammar(tok, three, 24)  # 30^24 plans: only its states are walked
    assert longest_sequence(big) == max(map(len, big.first)) + 23 * max(map(len, big.later)) + 1  # + the end


def test_free_text_that_is_no_plan_scores_zero_naming_why(problems):
    """What free-text GRPO's sampler may write: empty groups, stray words; each an invalid plan, never an error."""
    three, _ = problems
    for text in ("()", "(unstack b a) ()", "( )", "(unstack b a) (fly)"):
        out = simulate(three, text)
        assert not out.valid and out.error and out.error.startswith("action "), (text, out.error)
    assert "an empty action ()" in simulate(three, "(unstack b a) ()").error


TINY = ["planner.embedded.d_model=32", "planner.embedded.d_ff=64", "planner.embedded.num_layers=1",
        "planner.embedded.num_heads=2", "planner.embedded.vocab_size=300", "sft.epochs=2", "sft.batch_size=8",
        "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=0", "eval.num_beams=2",
        "eval.splits=[test]", "eval.schemas=[finetuned]", "logging.progress_bar=false", "env.name=pddl",
        "env.pddl.train_size=8", "env.pddl.validation_size=2", "env.pddl.test_size=3", "env.pddl.test_long_size=0",
        "env.pddl.max_plan_length=12", "planner.max_plan_tokens=64"]


def _grpo(tmp_path, *args: str) -> tuple[str, dict, dict]:
    from accelerate.state import AcceleratorState

    from train.grpo import parse_args, run

    cfg = parse_args([f"output_dir={tmp_path}", "run_name=g", f"planner.embedded.dir={tmp_path / 'embedded'}",
                      *TINY, *args])
    AcceleratorState._reset_state(True)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            run(cfg)
    finally:
        AcceleratorState._reset_state(True)
    run_dir = tmp_path / "g"
    return (out.getvalue().strip().splitlines()[-1], json.loads((run_dir / "results.json").read_text()),
            json.loads((run_dir / "grpo_history.json").read_text()))


def test_constrained_grpo_trains_a_pddl_planner_under_the_legal_grammar(tmp_path):
    last, results, history = _grpo(tmp_path, "env.pddl.grammar=legal", "grpo.warm_start=constrained",
                                   "grpo.sampling=constrained")
    assert last.startswith("held-out reward: finetuned=")
    calls = history["reward_calls"]
    assert len(calls) == 2 and all(len(c["completions"]) == 4 and all(c["valid"]) for c in calls)  # all executable
    rows = results["table"]["rows"]
    assert {"finetuned", "grpo", "finetuned_seq", "grpo_seq", "grpo_free"} <= set(rows)
    assert rows["grpo_seq"]["executable"] == 1.0 and 0 <= rows["grpo"]["goal rate"] <= 1


def test_free_text_grpo_trains_a_pddl_planner_its_text_simulated(tmp_path):
    last, results, history = _grpo(tmp_path, "grpo.warm_start=text", "grpo.sampling=free", "sft.max_plans=4")
    assert last.startswith("held-out reward: finetuned=")
    calls = history["reward_calls"]
    assert len(calls) == 2 and all(len(c["completions"]) == 4 for c in calls)
    rows = results["table"]["rows"]
    assert "finetuned_seq" not in rows and {"goal rate", "executable", "valid"} <= set(rows["grpo_free"])
    sft = json.loads((tmp_path / "g" / "sft_history.json").read_text())
    assert len(sft) == 2  # the text warm start ran (on sft.max_plans = 4 plans)


def test_the_pddl_verdict_dry_run_lists_every_arm(tmp_path, capsys):
    from rltf.comparison.suites import load_suite
    from train.compare import main

    assert main(["suite=pddl-verdict", "dry_run=true", "seeds=1", f"output_dir={tmp_path}"]) == {}
    lines = capsys.readouterr().out.strip().splitlines()
    arms = [a.name for a in load_suite("pddl-verdict").arms]
    assert len(lines) == len(arms) == 18
    for arm, line in zip(arms, lines):  # seed 0 of every arm, in the suite's order
        assert line.endswith(f"seed=0 output_dir={tmp_path}/pddl-verdict/{arm} run_name=seed0 overwrite=true"), line


def test_the_pddl_verdict_suites_hold_every_arm_at_equal_plans():
    from rltf.comparison.suites import check_arms, load_suite

    suite, mystery = load_suite("pddl-verdict"), load_suite("pddl-verdict-mystery")
    cells = ["syntax-k64", "syntax-k300", "legal-k0", "legal-k64", "legal-k300"]
    assert [a.name for a in suite.arms] == [f"{c}-{m}" for c in cells for m in ("rltf", "rltf-uset", "grpo-constrained")
                                            ] + ["text-k64-grpo-free", "text-k300-grpo-free", "bounds"]
    assert suite.seeds == 5 and suite.common[-1] == "eval.splits=[non_train]" and suite.splits == ("test", "test-long")
    # Mystery: the same arms, rows and seeds on the renamed domain (and room for its longer action names)
    assert mystery.arms == suite.arms and [r.arm for r in mystery.rows] == [r.arm for r in suite.rows]
    assert set(mystery.common) ^ set(suite.common) == {"env.pddl.obfuscation_seed=1", "planner.max_plan_tokens=96",
                                                       "planner.max_plan_tokens=160"}
    loaded = check_arms(suite)
    trained = {a: c for a, c in loaded.items() if a != "bounds"}
    # equal executed plans (150 steps x 8 tasks x 4 plans), the same planner and held-out set in every arm
    assert {(c.planner.arch, c.rltf.steps * c.rltf.tasks_per_batch * c.rltf.k_samples, c.env.pddl.test_size)
            for c in trained.values()} == {("causal", 4800, 500)}
    assert {(a.split("-")[1], c.env.pddl.grammar, c.sft.enabled, c.sft.max_plans if c.sft.enabled else None)
            for a, c in trained.items()} == {("k0", "legal", False, None), *(
                (k, g, True, n) for k, n in (("k64", 64), ("k300", 300)) for g in ("syntax", "legal"))}
    # the rows read the env's headline (the plain goal rate, whatever the shaping: test_pddl_verdict_table.py)
    assert {(c.env.pddl.shaping.goal_fraction, c.env.pddl.shaping.step_cost) for c in trained.values()} == {(0, 0)}
    assert {r.column for r in suite.rows} == {"headline"}
    assert {c.env.pddl.test_long_size for c in loaded.values()} == {100}
    # a cell's arms share its warm start: the RLTF arm's SFT (grpo.warm_start=constrained is that same stage)
    starts = {a.name: a.start_from for a in suite.arms if a.start_from}
    assert starts == {f"{c}-{m}": f"{c}-rltf" for c in cells if c != "legal-k0"
                      for m in ("rltf-uset", "grpo-constrained")}
    assert all(loaded[a].grpo.warm_start == "constrained" for a in starts if "grpo" in a)
    assert loaded["syntax-k64-rltf-uset"].rltf.objective == "unordered_set"
    assert loaded["text-k64-grpo-free"].grpo.sampling == "free"
