"""``benchmarks/pddl_failures.py`` sorts a held-out plan into the kind of miss it is, by executing it on a real
generated Blocksworld problem: the optimal plan reaches the goal; cut short it stops short; with a move and its
undo after the goal it passes the goal; an inapplicable action is not executable; and the table reads a
comparison folder as the suites write it (``<arm>/seed<k>/results.json`` beside ``config.yaml``)."""

from __future__ import annotations

import json

import pytest
import yaml

import envs
from benchmarks.pddl_failures import classify, main, table

ENV = {"name": "pddl", "pddl": {"domain": "blocksworld", "sizes": [3, 3], "long_sizes": [4, 4], "train_size": 4,
                                "validation_size": 1, "test_size": 3, "test_long_size": 2, "seed": 4,
                                "grammar": "legal", "max_plan_length": 12}}


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("RLTF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield {s: envs.make(ENV, s) for s in ("test", "test-long")}
    mp.undo()


def _undo_pair(env, task, plan):
    """Two actions from ``plan``'s end: one that breaks the goal (a block lifted), one that undoes it."""
    ground = env.instances[task.id].task
    state = ground.init
    for text in plan:
        a = next(a for a in ground.actions if a.text == text)
        state = (state & ~a.delete) | a.add
    texts = {a.text for a in ground.actions}
    for a in ground.actions:
        name, *args = a.text.strip("()").split()
        after = (state & ~a.delete) | a.add
        if name in ("pick-up", "unstack") and state & a.pre == a.pre and not state & a.neg \
                and not ground.goal_reached(after):  # a move that breaks the goal
            undo = f"(put-down {args[0]})" if name == "pick-up" else f"(stack {args[0]} {args[1]})"
            assert undo in texts
            return [a.text, undo]
    raise AssertionError("no block to move")


def test_every_kind_of_plan(held):
    env = held["test"]
    task = next(t for t in env.tasks() if len(t.reference.actions) >= 2)
    best = list(task.reference.actions)
    assert classify(env, task, " ".join(best)) == ("goal", len(best))
    assert classify(env, task, " ".join(best[:-1]))[0] == "stopped short"
    # the goal reached, then a block picked up: the end state is not the goal's any more
    assert classify(env, task, " ".join(best + _undo_pair(env, task, best)[:1]))[0] == "passed the goal"
    assert classify(env, task, " ".join(best + _undo_pair(env, task, best)))[0] == "goal"  # back at the goal
    assert classify(env, task, best[1:2] + best[:1])[0] == "not executable"  # a put-down/stack before its lift
    assert classify(env, task, "(fly a b)")[0] == "not executable"


def test_the_table_reads_a_comparison_folder(held, tmp_path, capsys):
    for seed in (0, 1):
        run = tmp_path / "cmp" / "arm" / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "config.yaml").write_text(yaml.safe_dump({"seed": seed, "env": ENV}))
        plans = {str(t.id): t.reference_plan if seed == 0 else "" for e in held.values() for t in e.tasks()}
        (run / "results.json").write_text(json.dumps({"plans": {"rltf": plans}}))
    text = table(tmp_path / "cmp", None, ["rltf"])
    rows = [line for line in text.splitlines() if line.startswith("| arm |") and "rltf" in line]
    assert len(rows) == 2 and all("| 2 |" in r for r in rows)  # both splits, both seeds
    assert "0.500 ± 0.707" in rows[0]  # goal: every plan in seed 0, none in seed 1 (the empty plan stops short)
    with pytest.raises(SystemExit) as e:
        main([str(tmp_path / "missing")])
    assert e.value.code == 2 and "comparison=" in capsys.readouterr().err
