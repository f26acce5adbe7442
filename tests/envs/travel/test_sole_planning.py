"""Sole-planning (envs/travel/reference_info.py): a query's reference_information as its candidate
database. Round trip: our export -> parse -> the same candidates (synthetic sandbox, real tables)."""

from __future__ import annotations

import pandas as pd
import pytest

import envs
from envs.travel.candidates import query_candidates
from envs.travel.evaluator import TravelEvaluator
from envs.travel.hub import HubFormatError
from envs.travel.index import SandboxIndex
from envs.travel.interchange import reference_information
from envs.travel.queries import default_queries
from envs.travel.query import TravelQuery
from envs.travel.reference_info import UNKNOWN_STATE, parse_table, reference_database, union_database
from envs.travel.sandbox import load_database
from envs.travel.solver import TravelSolver
from tests.envs.travel.test_hub_formats import write_hub_dir


def _one_per_days(queries):
    return [next(q for q in queries if q.days == d and q.level == lv) for d, lv in ((3, "hard"), (5, "medium"),
                                                                                      (7, "easy"))]


def test_round_trip_on_the_synthetic_sandbox():
    index, queries = default_queries(0)
    for q in _one_per_days(queries):
        ref = reference_information(index, q)
        db = reference_database(q, ref)
        own = SandboxIndex(db)
        assert query_candidates(own, q).as_json() == query_candidates(index, q).as_json()
        assert len(db.restaurants) < len(index.db.restaurants)  # only the query's rows
        # the solver finds the same optimum from the reference rows alone, and the plan passes there
        full, alone = TravelSolver(index).solve(q), TravelSolver(own).solve(q)
        assert alone.cost == pytest.approx(full.cost)
        assert TravelEvaluator(own).evaluate(q, alone.plan).final_pass
        assert TravelEvaluator(index).evaluate(q, alone.plan).final_pass


def test_round_trip_on_the_real_tables(real_travel_db):
    ix = SandboxIndex(load_database(real_travel_db, flights="generated"))
    org, dest = next((a, b) for (a, b) in ix.roads if ix.road(a, b).taxi_cost and len(ix.restaurants.in_city(b)) > 5)
    michigan = ix.states["Michigan"]
    org5 = next(c for c, s in ix.city_state.items() if s != "Michigan" and any((c, m) in ix.roads for m in michigan))
    qs = [TravelQuery(0, org, dest, 3, 1, ("2022-03-16", "2022-03-17", "2022-03-18"), 2, budget=3000),
          TravelQuery(1, org5, "Michigan", 5, 2, tuple(f"2022-03-{d}" for d in range(10, 15)), 3, budget=5000)]
    for q in qs:
        db = reference_database(q, reference_information(ix, q))
        assert query_candidates(SandboxIndex(db), q).as_json() == query_candidates(ix, q).as_json()


def test_hub_style_notes():
    q = TravelQuery(7, "Alpha", "Beta", 3, 1, ("2022-03-01", "2022-03-02", "2022-03-03"), 1, budget=900)
    hotels = pd.DataFrame([["Quiet Room ", 30.0, "Private room", "No parties", 1.0, 2, 4.0, "Beta"],
                           ["Big\nLoft", 1030.5, "Entire home/apt", "No smoking", 2.0, 4, 5.0, "Beta"]],
                          columns=["NAME", "price", "room type", "house_rules", "minimum nights",
                                   "maximum occupancy", "review rate number", "city"])
    notes = [
        {"Description": "Accommodations in Beta", "Content": hotels.to_string()},  # with its index
        {"Description": "Restaurants in Beta", "Content": [
            {"Name": "Pasta Place", "Average Cost": 20, "Cuisines": "Italian, Cafe", "Aggregate Rating": 4.1,
             "City": "Beta"}]},  # rows as dicts (the repository's *_ref_info.jsonl)
        {"Description": "Attractions in Beta", "Content": "There is no attraction in this city."},
        {"Description": "Flight from Alpha to Beta on 2022-03-01",
         "Content": "There is no flight from Alpha to Beta on 2022-03-01."},
        {"Description": "Self-driving from Alpha to Beta",
         "Content": "self-driving, from Alpha to Beta, duration: 3 hours 2 mins, distance: 1,234 km, cost: 61"},
        {"Description": "Taxi from Beta to Alpha", "Content": "taxi, from Beta to Alpha, no valid information."},
    ]
    db = reference_database(q, repr(notes))
    assert list(db.accommodations["NAME"]) == ["Quiet Room ", "Big\nLoft"]  # trailing space, newline kept
    assert list(db.accommodations["price"]) == [30.0, 1030.5]
    assert db.accommodations["maximum occupancy"].tolist() == [2, 4]
    assert db.restaurants["Name"].tolist() == ["Pasta Place"] and len(db.attractions) == 0 and len(db.flights) == 0
    assert db.distances.to_dict("records") == [{"origin": "Alpha", "destination": "Beta", "duration": "3 hours 2 mins",
                                                "distance": "1,234 km"}]
    assert db.cities == {"Alpha": UNKNOWN_STATE, "Beta": UNKNOWN_STATE}
    assert SandboxIndex(db).road_cost("Alpha", "Beta", "self-driving") == 61
    # a dict Description -> Content reads the same
    assert reference_database(q, {n["Description"]: n["Content"] for n in notes}).accommodations.equals(
        db.accommodations)


def test_bad_notes_are_named():
    q = TravelQuery(3, "Alpha", "Beta", 3, 1, ("2022-03-01", "2022-03-02", "2022-03-03"), 1)
    with pytest.raises(HubFormatError, match="query 3 reference_information: expected a list"):
        reference_database(q, "not notes")
    lacks = r"note 0 \(Restaurants in Beta\).*lacks column\(s\) \['Cuisines', 'Aggregate Rating'\]"
    with pytest.raises(HubFormatError, match=lacks):
        reference_database(q, [{"Description": "Restaurants in Beta", "Content": "Name  Average Cost City\n A 1 Beta"}])
    with pytest.raises(HubFormatError, match="'Average Cost' holds a value that is not a number"):
        parse_table(" Name Average Cost Cuisines Aggregate Rating City\n"
                    "    A         lots      Tea              1 Beta", "restaurants", "here")


def test_union_database_and_the_env_from_the_hub_alone(tmp_path):
    hub = write_hub_dir(tmp_path / "hub")
    index, _ = default_queries(0)
    env = envs.make({"name": "travel", "travel": {"database_dir": "reference_information",
                                                  "queries_source": str(hub)}}, "validation")
    assert len(env.index.db.restaurants) < len(index.db.restaurants)
    for i in env.query_ids[:3]:  # the solver's plan from the reference rows alone passes the full sandbox too
        plan = env.reference_plan(i)
        assert TravelEvaluator(index).evaluate(env.get_query(i), plan).final_pass
        env.reset(options={"query": i})
        assert env.step(plan)[1] == pytest.approx(1.0)
    q = env.get_query(env.query_ids[0])
    db = union_database([(q, reference_information(index, q))])
    assert set(db.cities) >= {q.org, q.dest}
