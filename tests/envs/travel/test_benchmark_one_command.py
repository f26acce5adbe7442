"""The benchmark track's one command (configs/travel-benchmark.yaml; issue 51): SFT on the train part's
plans -> RLTF, the planner picked on the validation part -> the official metrics on the held-out test
part in results.json / results.md, the data line naming the track, the evaluator mode and the queries;
no plan of a validation or test query is made on the way.

At tiny sizes (the 3-day queries: 3 per part of the 9 / 9 / 9 re-split, a 1-layer planner, one RLTF
step) on the benchmark's own 27 real train queries; skipped without them (RLTF_TRAVELPLANNER_QUERIES)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from constrained_decoding.prompts import PromptTruncationWarning
from envs.travel.env import TravelPlannerEnv
from envs.travel.factory import split_ids
from envs.travel.official_metrics import METRICS
from rltf.config.loading import load_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

COLUMNS = ["delivery", "commonsense micro", "commonsense macro", "hard micro", "hard macro", "final pass"]
TINY = ["env.travel.days=[3]", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "planner.embedded.vocab_size=600",
        "planner.max_prompt_tokens=48", "sft.epochs=1", "rltf.steps=1", "rltf.tasks_per_batch=2", "rltf.k_samples=2",
        "rltf.eval_every=1", "eval.num_beams=1"]



def test_the_one_command_runs_sft_rltf_and_reports_the_official_metrics(real_travel_queries, tmp_path, monkeypatch):
    from train.rltf import run  # the recipe's entry (a script folder, not a package of the layers)

    cfg = load_config(["config=configs/travel-benchmark.yaml", f"env.travel.queries_source={real_travel_queries}",
                       f"output_dir={tmp_path}", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY])
    train_ids, validation_ids, test_ids = split_ids(cfg.env.travel).values()
    assert len(train_ids) == len(validation_ids) == len(test_ids) == 3
    solved, plain = [], TravelPlannerEnv.reference_plan

    def recorded(env, query):
        solved.append(env.get_query(query).id)
        return plain(env, query)

    monkeypatch.setattr(TravelPlannerEnv, "reference_plan", recorded)
    # the prompt (the query's own reference information, then the query) is longer than the planner's 48 tokens
    with contextlib.redirect_stdout(io.StringIO()) as out, pytest.warns(PromptTruncationWarning):
        run(cfg)
    run_dir = tmp_path / "travel-benchmark"
    results = json.loads((run_dir / "results.json").read_text())
    # the headline: the six official metrics per row, in the official evaluator mode, on the held-out test part
    table = results["table"]
    assert table["columns"][:6] == COLUMNS and set(table["rows"]) == {"finetuned", "rltf"}
    assert all(0 <= row[c] <= 1 for row in table["rows"].values() for c in COLUMNS)
    assert table["rows"]["finetuned"]["delivery"] == 1.0  # the grammar delivers every plan
    assert table["n_tasks"]["final pass"] == 3 and sorted(map(int, results["scores"]["rltf"])) == sorted(test_ids)
    data = results["data"]
    assert (data["track"], data["evaluator"], data["evaluated"]) == ("benchmark", "official", ["train:re-split:test"])
    assert data["queries"] == real_travel_queries.name and data["database"] == "reference_information"
    md = (run_dir / "results.md").read_text()
    assert "evaluator: official mode" in md and md.count("; track: benchmark") == 1
    # RLTF's planner is picked on the validation part (steps 0 and 1), SFT ran on the train part's plans
    assert results["rltf_selection"]["select"] == "best_validation"
    assert (run_dir / "sft").is_dir()
    assert out.getvalue().rstrip().splitlines()[-1].startswith("held-out final pass: finetuned=")
    # no plan of a validation or test query was made (the solver ran on the train part only)
    assert solved and set(solved) <= set(train_ids)
    assert len(METRICS) == len(COLUMNS)
