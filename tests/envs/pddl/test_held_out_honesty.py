"""Held-out honesty of the pddl env (issue #50): nothing known only from a held-out problem's solution -- the
planner's optimal plan, its disk cache, the oracle row -- reaches what decodes, ranks or selects for it.

The check poisons the plan cache: every test and test-long problem's cached plan is replaced by a wrong plan
(or by "no plan found"), and the envs are built again through the env interface, as a run builds them. The
poison must show where it may (the oracle row's plans), and nowhere else: the train env (the warm start's
plans, the tokenizer's texts), every held-out task's prompt, its ``syntax`` and ``legal`` grammars (the
automata, token for token), its goal rate and executable columns, and the validation split the model
selection reads must be identical. A leak of a held-out solution into any of them fails here. The suites of
the verdict evaluate the oracle in one arm only, never as a trained arm's input or the paired reference.
"""

from __future__ import annotations

import json
import random

import pytest

import envs
from constrained_decoding.lazy_dfa import is_lazy
from envs.pddl.grammar import GRAMMAR_KINDS
from envs.pddl.search import cache_key
from rltf.comparison.suites import load_suite
from rltf.rl.sft import warm_start_tasks
from tests.envs.pddl.test_pddl_env import byte_bpe

SETTINGS = {"domain": "blocksworld", "sizes": [3, 3], "long_sizes": [4, 4], "train_size": 6, "validation_size": 2,
            "test_size": 3, "test_long_size": 2, "max_plan_length": 3, "seed": 7}
HELD_OUT = ("test", "test-long")
POISON = {"actions": ["(pick-up zz-poison)"], "optimal": True, "planner": "poison", "seconds": 0.0, "expanded": 0}


def section(grammar: str) -> dict:
    return {"name": "pddl", "pddl": {**SETTINGS, "grammar": grammar}}


def held_out_ids() -> set[int]:
    sets = {s: {t.id for t in envs.make(section("syntax"), s).tasks()} for s in HELD_OUT}
    return sets["test"] | sets["test-long"]


def poison(ids: set[int], value) -> int:
    """Overwrite the cached plan of every problem in ``ids`` with ``value``; returns how many."""
    from common.cache_dir import rltf_cache_dir

    held = envs.make(section("syntax"), "all")
    folder = rltf_cache_dir("pddl", "plans")
    for i in ids:  # (the key the planner's cache uses: the problem's domain, text and search budgets)
        path = folder / f"{cache_key(held.instances[i].task, 50_000, 50_000)}.json"
        assert path.is_file(), f"no cached plan for held-out problem {i}"
        path.write_text(json.dumps(value))
    return len(ids)


def automaton(grammar, max_rows: int = 20_000) -> list:
    """The grammar's automaton: an eager one's every edge; a lazy one's every row (token ids), walked through
    its edges (its language, exactly)."""
    if not is_lazy(grammar.dfa):
        return [grammar.root, grammar.dfa.final, [dict(t) for t in grammar.dfa.transitions]]
    out, stack = [], [(grammar.root, ())]
    while stack:
        state, prefix = stack.pop()
        if state == grammar.dfa.final:
            out.append(prefix)
            continue
        for tok, nxt in sorted(grammar.dfa.transitions[state].items()):
            stack.append((nxt, (*prefix, tok)))
        assert len(out) < max_rows
    return sorted(out)


def snapshot(tok) -> dict:
    """What decodes, ranks or selects, as a run builds it; and the oracle's plans (allowed to differ)."""
    out: dict = {}
    for kind in GRAMMAR_KINDS:
        train, held = envs.make_train_and_held_out(section(kind))
        ids = envs.split_ids(section(kind))
        tasks = {t.id: t for t in held.tasks()}
        long_ids = [t.id for t in envs.make(section(kind), "test-long").tasks()]
        held_ids = [*ids["test"], *long_ids]
        out[kind] = {
            "train": [(t.id, t.description, t.reference_plan) for t in train.tasks()],
            "tokenizer texts": train.tokenizer_texts(),
            "warm start": [(t.id, t.reference_plan) for t in warm_start_tasks(train.tasks(), 0, 0)],
            "validation": [(i, tasks[i].description, tasks[i].reference_plan) for i in ids["validation"]],
            "prompts": [tasks[i].description for i in held_ids],
            "grammars": [automaton(held.grammar(tok, tasks[i])) for i in held_ids],
            "oracle": [p for p, _ in held.oracle_plans([tasks[i] for i in held_ids])],
            "held": held, "held ids": held_ids, "train ids": [t.id for t in train.tasks()]}
    return out


@pytest.fixture(scope="module")
def tok():
    rng = random.Random(0)
    words = [f"(unstack {a} {b}) (stack {a} {b}) (pick-up {a}) (put-down {a})" for a in "abcd" for b in "abcd"]
    return byte_bpe([" ".join(rng.sample(words, len(words))) for _ in range(4)])


def test_no_held_out_solution_reaches_what_decodes_ranks_or_selects(tok, tmp_path, monkeypatch):
    monkeypatch.setenv("RLTF_CACHE_DIR", str(tmp_path / "cache"))  # its own cache: the poison stays here
    clean = snapshot(tok)
    held_ids = set(clean["syntax"]["held ids"])
    assert held_ids == held_out_ids() and not held_ids & set(clean["syntax"]["train ids"])
    assert all(p for p in clean["syntax"]["oracle"])  # the planner solved every held-out problem
    # the plans the goal rate is measured on: the clean oracle's and the empty plan, per held-out task
    held = clean["legal"]["held"]
    probe = {i: p for i, p in zip(clean["legal"]["held ids"], clean["legal"]["oracle"])}
    columns = {i: held.table_columns([held.get_task(i)], {i: probe[i]}) for i in probe}
    assert all(c["goal rate"] == 1.0 for c in columns.values())

    for value in (POISON, None):  # a wrong plan; "no plan found"
        assert poison(held_ids, value) == len(held_ids)
        bad = snapshot(tok)
        for kind in GRAMMAR_KINDS:
            want, got = clean[kind], bad[kind]
            for what in ("train", "tokenizer texts", "warm start", "validation", "prompts", "grammars"):
                assert got[what] == want[what], f"{kind}: a held-out solution reached the {what}"
            assert got["oracle"] != want["oracle"]  # the poison took: the oracle row reads the cache...
            bad_held = got["held"]  # ...and the goal rate, read by the env's simulator, does not
            assert {i: bad_held.table_columns([bad_held.get_task(i)], {i: probe[i]}) for i in probe} == columns
        assert all(w[1] is not None and "zz-poison" not in str(w[1]) for w in bad["syntax"]["warm start"])


@pytest.mark.parametrize("suite", ["pddl-verdict", "pddl-verdict-mystery"])
def test_the_verdict_uses_the_oracle_only_as_a_reported_row(suite):
    s = load_suite(suite)
    oracle_arms = {r.arm for r in s.rows if r.schema == "oracle"}
    assert oracle_arms == {"bounds"}
    assert not any(r.trained for r in s.rows if r.arm in oracle_arms)  # no curve, never trained
    assert s.reference_arm().name not in oracle_arms  # never the paired reference
    for arm in s.arms:  # no trained arm computes the oracle (its plans are the held-out problems' solutions)
        schemas = [o for o in (*s.common, *arm.overrides) if o.startswith("eval.schemas=")]
        assert arm.name in oracle_arms or not any("oracle" in o for o in schemas), arm.name
    assert "eval.splits=[non_train]" in s.common and s.splits == HELD_OUT  # validation selects; tables: test splits
