"""The sandbox database: determinism, sizes that make constraints bind, export -> load round trip,
and the loader for the real benchmark's files on fixtures written here in its exact schemas."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from envs.travel.evaluator import TravelEvaluator
from envs.travel.index import SandboxIndex
from envs.travel.interchange import read_submission, write_submission
from envs.travel.queries import QueryConfig, default_queries, generate_queries, load_hub_queries
from envs.travel.sandbox import export_database, generate_database, generated_flights_file, load_database
from envs.travel.schema import COLUMNS, DATABASE_FILES
from envs.travel.solver import TravelSolver


def test_same_seed_same_database_other_seed_other_database():
    a, b, c = generate_database(0), generate_database(0), generate_database(1)
    assert a.equals(b)
    assert not a.equals(c)
    assert list(a.cities) == list(c.cities)  # the geography is fixed; the tables are seeded


def test_same_seed_same_queries():
    db = generate_database(3)
    ix = SandboxIndex(db)
    q1 = generate_queries(ix, 3, QueryConfig(per_cell=2))
    q2 = generate_queries(SandboxIndex(generate_database(3)), 3, QueryConfig(per_cell=2))
    assert q1 == q2 and len(q1) == 18


def test_database_has_the_real_schema_and_binding_spreads():
    db = generate_database(0)
    for table, cols in COLUMNS.items():
        assert list(db.table(table).columns) == cols
    h = db.accommodations
    assert h["price"].min() < 100 and h["price"].max() >= 1000          # some hotels far too dear
    assert set(h["room type"]) == {"Entire home/apt", "Private room", "Shared room"}
    assert (h["minimum nights"] > 7).mean() > 0.05                      # long minimum stays exist
    assert not h["house_rules"].isna().any()                            # official loader drops NaN rows
    ix = SandboxIndex(db)
    ports = {f.origin for f in ix.flights} | {f.dest for f in ix.flights}
    road_only = [c for c in db.cities if c not in ports]
    assert road_only, "some cities are reachable only by road"
    islands = [c for c, s in db.cities.items() if s == "Coral Isles"]
    assert all(ix.road(islands[0], c) is None or ix.road(islands[0], c).cost("taxi") is None
               for c in db.cities if c not in islands)                  # flight-only state
    # cuisines unevenly spread: some query cuisine is missing in some city
    per_city = db.restaurants.groupby("City")["Cuisines"].apply(lambda s: " ".join(s))
    assert any(c not in text for text in per_city for c in ("French", "Mexican", "Indian", "Chinese"))
    # names never contain one another within a city (substring matching cannot pick a wrong row)
    for c, names in db.restaurants.groupby("City")["Name"]:
        ns = list(names)
        assert not any(a != b and a in b for a in ns for b in ns), c


def test_export_load_round_trip(tmp_path):
    db = generate_database(0)
    root = export_database(db, tmp_path)
    for key, rel in DATABASE_FILES.items():  # generated flights go under a name that says so, never the official one
        assert (root / rel).is_file() == (key != "flights"), rel
    assert (root / generated_flights_file(0)).is_file()
    assert not (root / DATABASE_FILES["cities"]).read_text().endswith("\n")
    back = load_database(tmp_path, flights="generated")
    assert back.equals(db), back.first_difference(db)
    assert load_database(root, flights="auto").equals(db)  # the database/ folder itself works too


def test_submission_round_trip(tmp_path):
    ix, qs = default_queries(0)
    qs = qs[:4]
    solver, ev = TravelSolver(ix), TravelEvaluator(ix)
    plans = [solver.solve(q).plan for q in qs]
    path = write_submission(tmp_path / "plans.jsonl", qs, plans)
    rows = read_submission(path)
    assert [r["idx"] for r in rows] == [1, 2, 3, 4]
    assert all(ev.evaluate(q, json.dumps(r)).final_pass for q, r in zip(qs, rows))


# --------------------------------------------------------------------- real-schema fixtures
CITY_LINES = "Alpha City\tNorthland\nBeta Town\tSouthland\nGamma Falls\tSouthland"


def write_real_fixture(root: Path) -> Path:
    """A tiny database in the public repository's files, exactly its columns and formats."""
    db = root / "database"
    for rel in DATABASE_FILES.values():
        (db / rel).parent.mkdir(parents=True, exist_ok=True)
    (db / DATABASE_FILES["cities"]).write_text(CITY_LINES)
    pd.DataFrame([
        ["F0000001", 120, "08:00", "09:30", "1 hours 30 minutes", "2022-03-10", "Alpha City", "Beta Town", 500.0],
        ["F0000002", 140, "17:00", "18:20", "1 hours 20 minutes", "2022-03-12", "Beta Town", "Alpha City", 500.0],
        ["F0000003", 90, "10:00", "11:00", "1 hours 0 minutes", "2022-03-10", "Alpha City", "Gamma Falls", 420.0],
    ], columns=COLUMNS["flights"]).to_csv(db / DATABASE_FILES["flights"], index=False)
    pd.DataFrame([
        ["Quiet Loft", "Entire home/apt", 200.0, 1.0, 4.0, "No parties", 4, "Beta Town"],
        ["Tiny Room", "Private room", 80.0, 3.0, 3.0, "No smoking & No pets", 1, "Beta Town"],
        # no rules: dropped like the official loader does
        ["Bare Bunk", "Shared room", 50.0, 1.0, 2.0, None, 1, "Beta Town"],
        ["Hill House", "Entire home/apt", 150.0, 1.0, 5.0, "No visitors", 2, "Gamma Falls"],
    ], columns=["NAME", "room type", "price", "minimum nights", "review rate number", "house_rules",
                "maximum occupancy", "city"]).to_csv(db / DATABASE_FILES["accommodations"])
    pd.DataFrame([
        ["Corner Cafe", 15, "Cafe, Bakery", 4.1, "Beta Town"],
        ["Noodle Bar", 20, "Chinese", 3.9, "Beta Town"],
        ["Pasta Place", 25, "Italian, Pizza", 4.4, "Beta Town"],
        ["Taco Stand", 12, "Mexican, Fast Food", 3.5, "Beta Town"],
        ["Home Diner", 18, "American", 3.0, "Alpha City"],
    ], columns=COLUMNS["restaurants"]).to_csv(db / DATABASE_FILES["restaurants"])
    pd.DataFrame([
        ["Town Museum", 40.1, -100.2, "1 Main St, Beta Town", "555-0100", "https://museum.example", "Beta Town"],
        ["River Park", 40.2, -100.3, "2 River Rd, Beta Town", "555-0101", "https://park.example", "Beta Town"],
    ], columns=COLUMNS["attractions"]).to_csv(db / DATABASE_FILES["attractions"], index=False)
    pd.DataFrame([
        ["Alpha City", "Beta Town", None, "6 hours 5 mins", "600 km"],
        ["Beta Town", "Alpha City", None, "6 hours 2 mins", "598 km"],
        ["Alpha City", "Gamma Falls", None, "1 day 2 hours", "2,400 km"],
        ["Beta Town", "Gamma Falls", None, None, None],
    ], columns=["origin", "destination", "cost", "duration", "distance"]).to_csv(db / DATABASE_FILES["distances"],
                                                                                   index=False)
    return db


def write_hub_fixture(root: Path) -> Path:
    rows = [
        {"org": "Alpha City", "dest": "Beta Town", "days": 3, "visiting_city_number": 1,
         "date": "['2022-03-10', '2022-03-11', '2022-03-12']", "people_number": 2,
         "local_constraint": "{'house rule': 'smoking', 'cuisine': ['Italian'], 'room type': None, "
                             "'transportation': None}",
         "budget": 1400, "query": "Plan a 3-day trip from Alpha City to Beta Town for 2 people, budget $1,400.",
         "level": "medium", "reference_information": "[]"},
        {"org": "Beta Town", "dest": "Alpha City", "days": 3, "visiting_city_number": 1,
         "date": "['2022-03-20', '2022-03-21', '2022-03-22']", "people_number": 1,
         "local_constraint": "{'house rule': None, 'cuisine': None, 'room type': None, 'transportation': None}",
         "budget": 500, "query": "Plan a trip from Beta Town to Alpha City.", "level": "easy",
         "reference_information": "[]"},
    ]
    path = root / "hub" / "validation.csv"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path.parent


FIXTURE_PLAN = [
    {"days": 1, "current_city": "from Alpha City to Beta Town",
     "transportation": "Flight Number: F0000001, from Alpha City to Beta Town, Departure Time: 08:00, "
                       "Arrival Time: 09:30",
     "breakfast": "-", "attraction": "-", "lunch": "Taco Stand, Beta Town", "dinner": "-",
     "accommodation": "Tiny Room, Beta Town"},
    {"days": 2, "current_city": "Beta Town", "transportation": "-", "breakfast": "Corner Cafe, Beta Town",
     "attraction": "Town Museum, Beta Town;River Park, Beta Town;", "lunch": "Noodle Bar, Beta Town",
     "dinner": "Pasta Place, Beta Town", "accommodation": "Tiny Room, Beta Town"},
    {"days": 3, "current_city": "from Beta Town to Alpha City",
     "transportation": "Flight Number: F0000002, from Beta Town to Alpha City, Departure Time: 17:00, "
                       "Arrival Time: 18:20",
     "breakfast": "-", "attraction": "-", "lunch": "-", "dinner": "-", "accommodation": "-"},
]


def test_real_schema_loader_on_fixtures(tmp_path):
    db_dir = write_real_fixture(tmp_path)
    write_hub_fixture(tmp_path)
    db = load_database(db_dir)
    assert db.cities == {"Alpha City": "Northland", "Beta Town": "Southland", "Gamma Falls": "Southland"}
    assert list(db.accommodations["NAME"]) == ["Quiet Loft", "Tiny Room", "Hill House"]  # NaN row dropped
    ix = SandboxIndex(db)
    assert (ix.road("Alpha City", "Beta Town").taxi_cost == 600
            and ix.road("Alpha City", "Beta Town").self_driving_cost == 30)
    assert ix.road("Alpha City", "Gamma Falls").taxi_cost is None  # a day's drive: no valid cost
    assert ix.road("Beta Town", "Gamma Falls").duration is None
    queries = load_hub_queries(tmp_path / "hub", "validation")
    q = queries[0]
    assert q.date == ("2022-03-10", "2022-03-11", "2022-03-12") and q.local_constraint["cuisine"] == ["Italian"]
    assert q.hard_constraint_count == 3
    ev = TravelEvaluator(ix)
    e = ev.evaluate(q, FIXTURE_PLAN)
    # Tiny Room: minimum 3 nights (2 booked), and 'No smoking' where the query wants smoking
    assert {k for k, v in e.commonsense.items() if not v.passed} == {"minimum_nights_stay"}
    assert {k for k, v in e.hard.items() if v.passed is False} == {"room_rule"}
    assert e.total_cost == pytest.approx(2 * (120 + 140) + 2 * (12 + 15 + 20 + 25) + 2 * 80 * 2)
    # the exact solver finds the valid plan (Quiet Loft allows smoking, 1 night minimum)
    res = TravelSolver(ix).solve(q)
    assert res is not None and ev.evaluate(q, res.plan).final_pass
    assert "Quiet Loft, Beta Town" in json.dumps(res.plan) and "Pasta Place" in json.dumps(res.plan)


def test_env_on_real_schema_fixtures(tmp_path):
    from envs.travel.env import TravelPlannerEnv

    write_real_fixture(tmp_path)
    write_hub_fixture(tmp_path)
    env = TravelPlannerEnv(database_dir=tmp_path, queries_source=tmp_path / "hub", split="all")
    obs, info = env.reset(options={"query": 0})
    assert obs.startswith("Plan a 3-day trip") and info["query"]["people_number"] == 2
    plan = env.reference_plan(0)
    _, reward, done, _, info = env.step(plan)
    assert reward == pytest.approx(1.0) and done and info["final_pass"]
    _, reward, _, _, info = env.step("{}")
    assert reward == 0.0 and "plan" in info["error"]
    assert env.tools.call("FlightSearch[Alpha City, Beta Town, 2022-03-10]").count("F0000001") == 1
    assert env.reference_plan(1) is None  # Alpha City has no accommodation: no valid plan


@pytest.mark.parametrize("remove", ["flights/clean_Flights_2022.csv", "background/citySet_with_states.txt"])
def test_missing_file_is_named(tmp_path, remove):
    db_dir = write_real_fixture(tmp_path)
    (db_dir / remove).unlink()
    with pytest.raises(FileNotFoundError, match=remove.split("/")[-1]):
        load_database(db_dir)


def test_missing_column_is_named(tmp_path):
    db_dir = write_real_fixture(tmp_path)
    path = db_dir / DATABASE_FILES["restaurants"]
    pd.read_csv(path, index_col=0).drop(columns=["Cuisines"]).to_csv(path)
    with pytest.raises(ValueError, match="Cuisines"):
        load_database(db_dir)
    hub = write_hub_fixture(tmp_path)
    pd.read_csv(hub / "validation.csv").drop(columns=["budget"]).to_csv(hub / "validation.csv", index=False)
    with pytest.raises(ValueError, match="budget"):
        load_hub_queries(hub, "validation")
    with pytest.raises(FileNotFoundError, match="test.csv"):
        load_hub_queries(hub, "test")
