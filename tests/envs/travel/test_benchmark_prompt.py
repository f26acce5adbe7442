"""What a planner of the benchmark track reads (env.travel.track: benchmark; issue 51): the official
sole-planning prompt of the query's text and ITS OWN reference information -- in the main job's tasks
(every planner: embedded, SmolLM2, TRL's GRPO) and in the flat flow's free-text prompt -- and what the
embedded planner's tokenizer learns: the train queries' texts and own options, no held-out query's
text, notes or plan (solver's or annotated).

On the benchmark's own 27 real train queries (../shared/data/travelplanner-queries, re-split by seed
9 / 9 / 9); skipped without them (RLTF_TRAVELPLANNER_QUERIES)."""

from __future__ import annotations

import pytest

from envs.travel.config import TravelEnvConfig
from envs.travel.factory import make_envs, split_ids
from envs.travel.flows.domain import TRAVEL_FLOWS
from envs.travel.hub import annotated_plans
from envs.travel.query import given_information, sole_planning_prompt
from envs.travel.reference_info import reference_notes
from rltf.config.flow import FlowSettings
from rltf.flows.backends.scripted import ScriptedBackend


@pytest.fixture(scope="module")
def setup(real_travel_queries):
    config = TravelEnvConfig(database_dir="reference_information", queries_source=str(real_travel_queries),
                             queries_split="train", track="benchmark")
    parts = list(split_ids(config).values())
    return (*make_envs(config), parts, real_travel_queries)


def _descriptions(notes) -> set[str]:
    return {str(n["Description"]) for n in reference_notes(notes, "test")}


def test_the_prompt_is_the_official_sole_planning_prompt_of_the_querys_own_notes(setup):
    train, held_out, parts, _ = setup
    for qid in (parts[0][0], parts[2][0]):  # a train query and a held-out test query
        view, task = held_out.view(qid), held_out.get_task(qid)
        own = given_information(view.notes)
        assert task.description == f"Given information: {own}\nQuery: {view.query}"
        assert task.description == sole_planning_prompt(view.query, view.notes)
        for d in _descriptions(view.notes):  # every note of its own: 'Flight from A to B on D', 'Restaurants in C'...
            assert f"'Description': '{d}'" in task.description
        others = set().union(*(_descriptions(held_out.view(i).notes) for i in held_out.query_ids if i != qid))
        foreign = others - _descriptions(view.notes)
        assert foreign and not any(f"'Description': '{d}'" in task.description for d in foreign)
    # the tables' padding is one space: nothing else of the hub's text changes
    raw = held_out.view(parts[2][0]).notes
    assert "  " in raw and "  " not in own and own.replace(" ", "") == raw.replace(" ", "")
    assert sole_planning_prompt("Plan a trip.", None) == "Plan a trip."


def test_the_free_text_planner_is_asked_with_the_given_information(setup):
    _, held_out, parts, _ = setup
    qid = parts[2][1]
    backend = ScriptedBackend(["no plan"])
    TRAVEL_FLOWS.methods.lookup("flat").run(held_out, qid, backend, FlowSettings())
    (messages,) = backend.calls  # asked once (no retry with a hint)
    asked = messages[-1]["content"]
    assert asked.startswith(held_out.get_task(qid).description + "\n") and "Given information: [{" in asked


def test_the_embedded_tokenizer_learns_no_held_out_query(setup):
    train, held_out, parts, queries = setup
    texts = train.tokenizer_texts()
    held = parts[1] + parts[2]
    assert train.query_ids == parts[0] and not set(held) & train.plan_ids and held_out.plan_ids == train.plan_ids
    own, train_texts = _train_options(train), {train.get_query(i).query for i in parts[0]}
    # what it learns: the train queries' texts, their own options, the slot prefixes and single letters
    assert train_texts <= set(texts)
    assert all(t in own or t in train_texts or t.startswith("day 1 (from A to B) ") or len(t) == 1 for t in texts)
    # so nothing of a held-out query: its text, a plan (no solver's plan is made for it; its annotated plan)
    annotated = annotated_plans(queries, "train")
    for qid in held:
        assert held_out.get_task(qid).reference_plan is None
        assert held_out.get_query(qid).query not in texts
        named = {str(d.get(k)) for d in annotated[qid] for k in ("breakfast", "lunch", "dinner", "accommodation")}
        assert not {n for n in named - own if n != "-"} & set(texts)
    # the annotated plans of the 9 held-out queries name options no train query offers (the check is not empty)
    assert any({str(d.get("accommodation")) for d in annotated[q]} - own - {"-"} for q in held)


def _train_options(train) -> set[str]:
    out: set[str] = set()
    for qid in train.query_ids:
        c = train.candidates(qid)
        out |= {*c.route_cities, c.org}
        out |= {e for t in (c.restaurants, c.attractions, c.accommodations) for v in t.values() for e in v}
        out |= {s for per_day in c.transport.values() for v in per_day.values() for s in v}
    return out
