"""The benchmark track (env.travel.track: benchmark; issue 51) and the held-out leak of the option caps.

On the benchmark's own 27 real train queries (../shared/data/travelplanner-queries, re-split by seed
into train / validation / test parts), sole-planning: a validation or test query's grammar is built
without reading any plan (in every track); in the benchmark track a planner reads the query's text,
level, days and own reference information only, a scaffold is refused, and the scored plan is the
model's first answer, parsed, with nothing repairing it."""

from __future__ import annotations

import json

import pytest

from envs.travel.candidates import query_candidates
from envs.travel.config import TravelConfigError, TravelEnvConfig
from envs.travel.factory import make_envs
from envs.travel.flows.domain import TRAVEL_FLOWS
from envs.travel.hub import load_split
from envs.travel.index import SandboxIndex
from envs.travel.plans import parse_plan
from envs.travel.query import QueryView
from envs.travel.query_view import view_index
from envs.travel.reference_info import reference_database
from envs.travel.registration import TravelSection, provenance
from envs.travel.text import entity
from envs.travel.tracks import TrackError
from rltf.config.flow import FlowSettings
from rltf.flows.backends.scripted import ScriptedBackend
from rltf.planners.tokenizer import tokenizer_texts_for, train_plan_tokenizer


def _config(queries, **kw) -> TravelEnvConfig:
    return TravelEnvConfig(database_dir="reference_information", queries_source=str(queries), queries_split="train",
                           **kw)


CAPS = {"max_options": 3, "max_cities": 2}  # configs/travel-flat-real.yaml's kind of caps (24 / 4 there)
# (max_cities 2 is below a 7-day trip's 3 cities: the cap keeps as many as the trip visits)


@pytest.fixture(scope="module", params=["sandbox", "benchmark"])
def capped_envs(request, real_travel_queries):
    keep = {"cap_keep": "sample"} if request.param == "benchmark" else {}
    return make_envs(_config(real_travel_queries, track=request.param, **CAPS, **keep))


def _no_plan_of_held_out(monkeypatch, env, train_ids):
    """Reading the solver's plan of a query outside ``train_ids`` fails the test."""
    solver_plan = env.reference_plan

    def guarded(query):
        q = env.get_query(query)
        if q.id not in train_ids:
            raise AssertionError(f"the plan of held-out query {q.id} was read")
        return solver_plan(query)

    monkeypatch.setattr(env, "reference_plan", guarded)


def test_a_held_out_querys_capped_grammar_reads_no_plan(capped_envs, monkeypatch):
    train, held_out = capped_envs
    train_ids = set(train.query_ids)
    held = [i for i in held_out.query_ids if i not in train_ids]
    assert held and held_out.max_options == 3
    _no_plan_of_held_out(monkeypatch, held_out, train_ids)
    tok = train_plan_tokenizer(tokenizer_texts_for(train), vocab_size=2000)
    for qid in held:
        g = held_out.grammar(tok, qid)
        for options in g.candidates.restaurants.values():
            assert len(options) <= 3
        # the same grammar whatever the solver's plan: a seeded sample of the query's own options
        assert held_out.grammar_candidates(qid) == held_out.grammar_candidates(qid)


def test_a_train_querys_cap_keeps_its_plan_outside_the_benchmark_track(real_travel_queries):
    train, _ = make_envs(_config(real_travel_queries, **CAPS))  # cap_keep: train_plans (the default)
    for t in [t for t in train.tasks() if t.reference_plan][:3]:
        c = train.grammar_candidates(t.id)
        for day in parse_plan(t.reference_plan):
            if day.get("accommodation", "-") != "-":
                assert any(day["accommodation"] in v for v in c.accommodations.values())


def test_the_benchmark_track_refuses_caps_that_read_plans_and_needs_reference_information(real_travel_queries):
    with pytest.raises(TravelConfigError, match=r"^'env.travel.cap_keep: train_plans' makes the option caps") as e:
        _config(real_travel_queries, track="benchmark", **CAPS).validate()
    assert "\n" not in str(e.value)
    with pytest.raises(TravelConfigError, match="needs the benchmark's queries"):  # travel-flat-real.yaml's queries
        TravelEnvConfig(database_dir="../shared/data/travelplanner-db", queries_source="generated",
                        track="benchmark", cap_keep="sample").validate()
    with pytest.raises(TravelConfigError, match=r"'env.travel.track': 'official'; expected one of"):
        TravelEnvConfig(track="official").validate()


@pytest.fixture(scope="module")
def benchmark_envs(real_travel_queries):
    return make_envs(_config(real_travel_queries, track="benchmark"))


def test_a_benchmark_planner_reads_the_querys_text_level_days_only(benchmark_envs):
    _, held_out = benchmark_envs
    qid = held_out.query_ids[-1]
    text, info = held_out.reset(options={"query": qid})
    assert info == {"query_id": qid, "query": text, "level": held_out.get_query(qid).level,
                    "days": held_out.get_query(qid).days}
    task = held_out.get_task(qid)
    assert isinstance(task.query, QueryView) and task.description.endswith(f"\nQuery: {text}")
    assert task.description.startswith("Given information: [{")  # its own notes: test_benchmark_prompt.py
    assert not hasattr(task.query, "budget") and not hasattr(task.query, "local_constraint")
    assert task.reference_plan is None  # a held-out query holds no plan


def test_benchmark_options_are_the_querys_own_reference_information(benchmark_envs, real_travel_queries):
    _, held_out = benchmark_envs
    queries, rows = load_split(real_travel_queries, "train")
    merged_differs = False
    for q, row in zip(queries, rows):
        own = query_candidates(SandboxIndex(reference_database(q, row["reference_information"])), q).as_json()
        assert held_out.candidates(q.id).as_json() == own  # no other query's rows
        merged_differs |= query_candidates(held_out.index, q).as_json() != own
    assert merged_differs  # the merged database (the evaluator's) would have offered other queries' rows


def test_the_train_plans_the_warm_start_teaches_are_inside_the_benchmark_grammars(benchmark_envs):
    train, _ = benchmark_envs
    tok = train_plan_tokenizer(tokenizer_texts_for(train), vocab_size=2000)
    taught = [t for t in train.tasks() if t.reference_plan]
    assert len(taught) >= len(train.query_ids) - 1
    for t in taught[:4]:  # solved over the query's own rows: the options its grammar offers
        assert train.grammar(tok, t).rows_for(parse_plan(t.reference_plan))


def _over_budget(env, qid) -> str | None:
    """The solver's plan of ``qid`` with every night in the dearest accommodation of the query's own
    options, when that is over the query's budget (None otherwise)."""
    plan = parse_plan(env.oracle(qid)[0])
    own = view_index(env.view(qid))
    for day in plan:
        if day["accommodation"] != "-":
            city = day["accommodation"].rsplit(", ", 1)[1]
            dearest = max(own.hotels.in_city(city), key=lambda h: h.price)
            day["accommodation"] = entity(dearest.name, city)
    text = json.dumps(plan)
    return text if "budget" in env.reward_plans([(qid, text)])[0].evaluation.violations() else None


def test_an_over_budget_plan_is_scored_as_the_model_wrote_it(benchmark_envs):
    _, held_out = benchmark_envs
    qid, expensive = next((i, t) for i in held_out.query_ids if (t := _over_budget(held_out, i)) is not None)
    flat = TRAVEL_FLOWS.methods.lookup("flat")
    backend = ScriptedBackend([expensive])
    run = flat.run(held_out, qid, backend, FlowSettings())
    assert run.plan == parse_plan(expensive)  # the model's plan, parsed: no repair, filter or re-ranking
    scored = held_out.reward_plans([(qid, run.plan)])[0].evaluation
    assert scored.delivered and not scored.final_pass and "budget" in scored.violations()


def test_the_first_answer_is_the_plan_no_retry_with_a_hint(benchmark_envs):
    _, held_out = benchmark_envs
    qid = held_out.query_ids[0]
    flat = TRAVEL_FLOWS.methods.lookup("flat")
    not_a_plan = ScriptedBackend(["I cannot plan this.", held_out.oracle(qid)[0]])
    assert flat.run(held_out, qid, not_a_plan, FlowSettings()).plan is None
    assert not_a_plan.remaining == 1 and len(not_a_plan.calls) == 1  # asked once: no "That is not a plan" hint


def test_a_scaffold_is_refused_in_the_benchmark_track(benchmark_envs):
    _, held_out = benchmark_envs
    for method in ("mtp", "okr", "react"):
        with pytest.raises(TrackError, match=rf"^flow method '{method}' runs .* 'env.travel.track: benchmark' forbids"):
            TRAVEL_FLOWS.methods.lookup(method).run(held_out, held_out.query_ids[0], ScriptedBackend([]),
                                                    FlowSettings())


def test_every_result_names_its_track(real_travel_queries):
    data, line = provenance(TravelSection(travel=_config(real_travel_queries, track="benchmark")))
    assert data["track"] == "benchmark" and line.endswith("; track: benchmark")
