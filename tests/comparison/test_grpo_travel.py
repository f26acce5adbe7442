"""Constrained GRPO on the flat travel planner over the real tables (issue #37 item 6, the travel arm):
an itinerary cannot be enumerated, so TRL's sampler follows the query's grammar lazily, its rows
as one sequence (rltf/comparison/lazy_grammar.py). Every step allows exactly the continuations of
the row languages (checked against the rows' own token sequences, not the automaton), every sampled
completion parses back to the plan the env judges, and train/grpo.py runs on travel end to end.
Skipped without the real tables (the ``real_travel_db`` fixture names the setting)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json

import pytest
import torch
from transformers import LogitsProcessorList

from constrained_decoding.prompts import encode_prompts
from envs.travel.plans import parse_plan

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture(scope="module")
def travel(real_travel_db):
    """The train env over the real tables (3- and 5-day easy queries, 6 options per slot, 3 route
    cities), the embedded planner's tokenizer, and three queries with their grammars (one of 5 days,
    several routes)."""
    from envs.travel.config import TravelEnvConfig
    from envs.travel.factory import make_envs
    from rltf.planners.tokenizer import tokenizer_texts_for, train_plan_tokenizer

    cfg = TravelEnvConfig(database_dir=str(real_travel_db), queries_source="generated", days=[3, 5],
                          levels=["easy"], max_options=6, max_cities=3)
    train, _ = make_envs(cfg)
    tok = train_plan_tokenizer(tokenizer_texts_for(train), vocab_size=4000)
    by_days = {d: [t for t in train.tasks() if t.reference_plan and train.get_query(t.id).days == d] for d in (3, 5)}
    tasks = [*by_days[3][:2], by_days[5][0]]
    return train, tok, tasks, [train.grammar(tok, t) for t in tasks]


def _row_sets(g):
    """Each row language of a travel grammar as its token sequences, from the rows' meanings (not the DFA):
    the root's ``{head: tokens}`` and, per head, its branch rows' sets in order."""
    root = {h: g.rows.tokens(0, h) for h in range(len(g.routes))}
    branches = {h: [{g.rows.tokens(g.language[(d, g.routes[h][d - 1], f)], v)
                     for v in g.options[(d, g.routes[h][d - 1], f)]} for d, f in g.slots[h]] for h in root}
    return root, branches


def _expected_next(g, sets, sep, prefix):
    """The tokens the lazy sequence may write after ``prefix``, from the row languages' token sequences."""
    root, branches = sets
    eos = g.eos_id
    rows, cur = [], []
    for t in prefix:
        if t == sep:
            rows.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur and cur[-1] == eos:  # the plan is written
        return {g.pad_id}
    if not rows:
        fits = [(h, s) for h, s in root.items() if list(s[: len(cur)]) == cur]
        return {(sep if branches[h] else eos) if s[len(cur)] == eos else s[len(cur)] for h, s in fits}
    h = next(h for h, s in root.items() if list(s) == [*rows[0], eos])
    k = len(rows) - 1  # the branch row being written
    last = k == len(branches[h]) - 1
    nxt = {s[len(cur)] for s in branches[h][k] if list(s[: len(cur)]) == cur}
    return {(eos if last else sep) if t == eos else t for t in nxt}


def test_the_lazy_processor_allows_exactly_the_row_languages_and_every_sample_parses(travel):
    from rltf.comparison.lazy_grammar import (
        LazyGrammarLogitsProcessor,
        completion_plan_text,
        longest_sequence,
        parse_completion,
        separator_id,
    )
    from tests.tiny_models import tiny_llama

    env, tok, tasks, grammars = travel
    assert len(grammars[2].routes) > 1  # the 5-day query: the branch rows depend on the sampled route
    sep = separator_id(tok, grammars)
    model = tiny_llama(tok)
    rows = [i for i in range(len(tasks)) for _ in range(4)]
    prompts = encode_prompts(tok, [tasks[i].description for i in rows], False)
    tok.padding_side = "left"
    enc = tok.pad({"input_ids": prompts}, return_tensors="pt")
    seen: list[list[set[int]]] = []

    class Recording(LazyGrammarLogitsProcessor):
        def __call__(self, input_ids, scores):
            out = super().__call__(input_ids, scores)
            seen.append([set(torch.isfinite(r).nonzero().flatten().tolist()) for r in out])
            return out

    longest = max(longest_sequence(g) for g in grammars)
    torch.manual_seed(0)
    out = model.generate(**enc, do_sample=True, max_new_tokens=longest, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id,
                         logits_processor=LogitsProcessorList([Recording([grammars[i] for i in rows], sep)]))
    completions = out[:, enc["input_ids"].shape[1]:].tolist()
    sets = {id(g): _row_sets(g) for g in grammars}
    texts = set()
    for b, ids in enumerate(completions):
        g = grammars[rows[b]]
        end = ids.index(g.eos_id)  # every row finished within the grammar's longest sequence
        for i in range(end + 1):  # what the processor allowed at each step = the row languages' continuations
            assert seen[i][b] == _expected_next(g, sets[id(g)], sep, ids[:i]), (b, i)
        plan = parse_completion(g, sep, ids)
        text = completion_plan_text(g, sep, ids)
        assert parse_plan(text) == plan  # the canonical text the env parses is the sampled plan
        result = env.reward_plans([(tasks[rows[b]].id, text)])[0]
        assert result.valid and 0 < result.reward <= 1
        assert [list(r) for _, r in g.rows_for(plan)] == _rows_of(ids[: end + 1], sep, g.eos_id)  # as written
        texts.add(text)
    assert len(texts) > len(tasks)  # it samples: several plans per query


def _rows_of(ids, sep, eos):
    """A completion's rows (each ending in EOS, as the grammar's rows do)."""
    rows, cur = [], []
    for t in ids:
        if t == sep:
            rows.append([*cur, eos])
            cur = []
        else:
            cur.append(t)
    return [*rows, cur]


def test_the_solver_plan_round_trips_and_a_wrong_row_end_is_refused(travel):
    from rltf.comparison.lazy_grammar import LazyGrammarError, parse_completion, separator_id

    env, tok, tasks, grammars = travel
    sep = separator_id(tok, grammars)
    for task, g in zip(tasks, grammars):
        plan = parse_plan(task.reference_plan)
        rows = [list(r) for _, r in g.rows_for(plan)]
        seq = [t for r in rows[:-1] for t in (*r[:-1], sep)] + rows[-1]
        assert parse_completion(g, sep, seq + [g.pad_id] * 3) == g.assemble(rows[0], rows[1:])
        assert env.reward_plans([(task.id, g.format(parse_completion(g, sep, seq)))])[0].valid
        first_end = len(rows[0]) - 1
        with pytest.raises(LazyGrammarError, match="another row follows"):  # EOS where a branch row follows
            parse_completion(g, sep, [*seq[:first_end], g.eos_id, *seq[first_end + 1:]])
        with pytest.raises(LazyGrammarError, match="the plan ends"):  # a separator after the last row
            parse_completion(g, sep, [*seq[:-1], sep])
        with pytest.raises(LazyGrammarError, match="unfinished"):
            parse_completion(g, sep, seq[:-1])
        with pytest.raises(LazyGrammarError, match="not allowed"):
            parse_completion(g, sep, [g.eos_id])


TINY = ["env.travel.days=[3]", "env.travel.levels=[easy]", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "sft.epochs=1", "rltf.steps=2",
        "rltf.tasks_per_batch=2", "rltf.k_samples=2", "eval.num_beams=1", "eval.schemas=[finetuned]",
        "planner.max_plan_tokens=16", "logging.progress_bar=false"]


def test_grpo_on_travel_runs_two_constrained_steps_end_to_end(tmp_path, real_travel_db):
    from accelerate.state import AcceleratorState

    from envs.travel.config import TravelEnvConfig
    from envs.travel.factory import make_envs
    from train.grpo import parse_args, run

    args = ["config=configs/grpo-travel-real.yaml", f"env.travel.database_dir={real_travel_db}",
            f"output_dir={tmp_path}", "run_name=g", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY]
    cfg = parse_args(args)
    assert (cfg.planner.arch, cfg.grpo.warm_start, cfg.grpo.sampling) == ("causal", "constrained", "constrained")
    AcceleratorState._reset_state(True)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            run(cfg)
    finally:
        AcceleratorState._reset_state(True)
    assert out.getvalue().strip().splitlines()[-1].startswith("held-out reward: finetuned=")
    history = json.loads((tmp_path / "g" / "grpo_history.json").read_text())
    calls = history["reward_calls"]
    assert len(calls) == 2 and all(len(c["completions"]) == 4 and all(c["valid"]) for c in calls)
    train, _ = make_envs(TravelEnvConfig(database_dir=str(real_travel_db), queries_source="generated", days=[3],
                                         levels=["easy"], max_options=24, max_cities=4))
    for c in calls:  # each sampled itinerary, judged as the JSON plan the env parses
        for t, plan in zip(c["task_ids"], c["plans"]):
            assert parse_plan(plan) and train.reward_plans([(t, plan)])[0].valid
    results = json.loads((tmp_path / "g" / "results.json").read_text())
    rows = results["table"]["rows"]
    assert {"finetuned", "grpo", "grpo_free", "finetuned_seq", "grpo_seq"} <= set(rows)
    assert rows["grpo_seq"]["delivery"] == 1.0  # greedy under the lazy grammar: every plan delivered
    assert (tmp_path / "g" / "grpo" / "planner").is_dir()
    from benchmarks.final_diversity import planner_folders  # what a verdict's diversity table measures of the run

    run_dir = tmp_path / "g"
    assert planner_folders(run_dir) == {"start": run_dir / "sft", "final": run_dir / "grpo" / "planner"}


def test_grpo_on_travel_refuses_agent_flows():
    from rltf.config.loading import ConfigError
    from train.grpo import check_run, parse_args

    with pytest.raises(ConfigError, match="flow.enabled=true"):
        check_run(parse_args(["config=configs/grpo-travel-real.yaml", "flow.enabled=true"]))
    check_run(parse_args(["config=configs/grpo-travel-real.yaml", "grpo.warm_start=text", "grpo.sampling=free"]))


def test_the_travel_verdict_suite_loads_and_every_arm_parses():
    from rltf.comparison.suites import check_arms, load_suite

    suite = load_suite("verdict-travel")
    assert suite.reference_arm().name == "grpo-constrained" and suite.seeds == 5  # the best RLTF arm and GRPO: 5
    assert {a.name: a.seeds for a in suite.arms} == {"rltf": None, "grpo-constrained": None, "rltf-rloo": 3,
                                                     "rltf-unordered-set": 3, "rltf-100-steps": 3, "rltf-equal-cpu": 3,
                                                     "grpo-text": 3, "bounds": 1}
    assert suite.common[-1] == "eval.splits=[test]"  # held out: the test queries
    loaded = check_arms(suite)
    longer_arms = {"rltf-100-steps": 100, "rltf-equal-cpu": 340}
    trained = {a: c for a, c in loaded.items() if a != "bounds" and a not in longer_arms}
    assert {(c.planner.arch, c.rltf.steps, c.rltf.tasks_per_batch * c.rltf.k_samples, c.sft.epochs)
            for c in trained.values()} == {("causal", 40, 32, 10)}  # same start, budget and plans per step
    # the longer arms: the default RLTF arm with 2.5x the steps and plans, and at constrained GRPO's CPU; nothing else
    for arm, steps in longer_arms.items():
        longer = loaded[arm]
        assert longer.rltf.steps == steps and dataclasses.replace(longer.rltf, steps=40) == loaded["rltf"].rltf
    assert loaded["grpo-constrained"].grpo.sampling == "constrained" and loaded["grpo-text"].grpo.sampling == "free"
    assert [loaded[a].rltf.baseline for a in ("rltf", "rltf-rloo", "rltf-unordered-set")] == \
        ["per_task", "rloo", "unordered_set"]
