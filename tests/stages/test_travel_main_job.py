"""The travel sandbox in the main job: ``env.name=travel`` builds it from the run config, every
stage (SFT on the solver's plans, RLTF on the evaluator's reward, held-out evaluation) runs on it,
and the table has the benchmark's columns with the solver as the oracle row."""

import contextlib
import io
import json

import pytest

import envs
from envs.travel.config import TravelEnvConfig
from envs.travel.env import TravelPlannerEnv
from envs.travel.registration import TravelSection
from rltf.config.loading import ConfigError, load_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_env_section_builds_the_travel_envs_with_the_split_filtered():
    cfg = TravelSection(travel=TravelEnvConfig(days=[3], levels=["easy", "hard"]))
    train, held_out = envs.make_train_and_held_out(cfg)
    assert isinstance(train, TravelPlannerEnv) and train.index is held_out.index  # one sandbox, shared
    parts = envs.split_ids(cfg)
    assert set(parts["train"]).isdisjoint(parts["test"]) and set(parts["validation"]).isdisjoint(parts["test"])
    assert [t.id for t in train.tasks()] == parts["train"]
    for i in parts["train"] + parts["test"]:
        q = held_out.get_query(i)
        assert q.days == 3 and q.level in ("easy", "hard")
    # the persisted split, filtered: every 3-day easy/hard query of each part is kept
    from envs.travel.split import load_split

    full = load_split(0)
    assert parts["test"] == [i for i in full["test"] if held_out.get_query(i).days == 3
                             and held_out.get_query(i).level in ("easy", "hard")]
    # a task is the query's text with the solver's plan as its reference, and scores 1
    task = train.tasks()[0]
    assert task.description == task.query.query and train.oracle(task)[1] == 1.0
    assert envs.make(cfg, split="test").query_ids == parts["test"]
    assert "travel" in envs.describe(cfg)[0]


@pytest.mark.parametrize("override, message", [
    ("env.travel.days=[4]", "'env.travel.days'"),
    ("env.travel.levels=[extreme]", "'env.travel.levels'"),
    ("env.travel.max_attractions=0", "'env.travel.max_attractions'"),
    ("env.name=webshop", "'env.name'"),
])
def test_bad_travel_settings_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(["env.name=travel", override])


def test_the_embedded_tokenizer_learns_the_sandbox_but_no_held_out_query():
    train, held_out = envs.make_train_and_held_out(TravelSection(travel=TravelEnvConfig(days=[3])))
    texts = set(train.tokenizer_texts())
    assert all(t.description in texts for t in train.tasks())
    parts = envs.split_ids(TravelSection(travel=TravelEnvConfig(days=[3])))
    assert not any(held_out.get_query(i).query in texts for i in parts["test"] + parts["validation"])
    # every entity a held-out plan may name is in the corpus (the action space, not the task)
    c = held_out.candidates(parts["test"][0])
    assert all(name in texts for names in c.restaurants.values() for name in names)


TINY = ["env.name=travel", "env.travel.days=[3]", "env.travel.levels=[easy]",
        "planner.embedded.d_model=32", "planner.embedded.d_ff=64", "planner.embedded.num_layers=1",
        "planner.embedded.num_heads=2", "sft.epochs=1", "sft.batch_size=8", "rltf.steps=2",
        "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=2", "rltf.checkpoint_every=1",
        "eval.num_beams=2", "eval.splits=[test]", "logging.progress_bar=false",
        "eval.schemas=[finetuned,rltf,oracle]"]


@pytest.mark.slow
def test_travel_main_job_end_to_end(tmp_path):
    from train.rltf import run

    args = [f"output_dir={tmp_path}", "run_name=travel", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        summary = run(load_config(args))
    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith("held-out final pass: finetuned=") and " rltf=" in last and last.endswith("solver=1.0000")
    table = json.loads((tmp_path / "travel" / "results.json").read_text())["table"]
    assert table["columns"] == ["delivery", "commonsense micro", "commonsense macro", "hard micro", "hard macro",
                                "final pass", "reward"]
    # constrained decoding: every plan is delivered (the official JSON, every field filled)
    assert table["rows"]["finetuned"]["delivery"] == 1.0 and table["rows"]["rltf"]["delivery"] == 1.0
    assert table["rows"]["oracle"]["final pass"] == 1.0
    assert "| solver |" in (tmp_path / "travel" / "results.md").read_text()
    hist = json.loads((tmp_path / "travel" / "rltf_history.json").read_text())
    assert [h["step"] for h in hist] == [1, 2] and all(h["train/valid"] == 1.0 for h in hist)
    assert summary["table"] == table


def test_evaluate_recipe_runs_the_flows_of_a_flow_config(capsys):
    """``train/evaluate.py config=configs/travel-mtp.yaml`` is the flow evaluation (dry run here:
    every node and backend listed, nothing loaded)."""
    from train.evaluate import main as evaluate_main

    assert evaluate_main(["config=configs/travel-mtp.yaml", "dry_run=true"]) is None
    out = capsys.readouterr().out
    assert "nothing was loaded" in out and "manager.route" in out and "deliverer" in out
