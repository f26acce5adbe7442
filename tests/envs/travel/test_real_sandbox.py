"""A sandbox over the benchmark's real tables (issue #36 item 3): flights generated (seeded, plausible,
marked as generated) when the folder has no flights table, a user's flights file used instead,
queries generated over the real cities with a persisted split, and the solver delivering on them.
Read in place from the ``real_travel_db`` fixture (skipped when the tables are absent)."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest

from envs.travel.config import TravelConfigError, TravelEnvConfig
from envs.travel.factory import describe_env, make_envs, split_ids
from envs.travel.flights import FLIGHTS_MODEL, city_locations, generate_flights
from envs.travel.index import SandboxIndex
from envs.travel.plans import parse_plan
from envs.travel.real_sandbox import fingerprint, generate_real_queries, real_index, real_queries, real_split_path
from envs.travel.sandbox import load_database
from envs.travel.schema import COLUMNS, DATABASE_FILES
from envs.travel.solver import TravelSolver


@pytest.fixture(scope="module")
def real(real_travel_db):
    return real_index(real_travel_db, "auto", 0)


def test_the_public_tables_load_with_generated_flights_marked_as_such(real_travel_db, real):
    db = real.db
    assert db.meta["flights"] == "generated" and db.meta["flights_model"]["model"] == FLIGHTS_MODEL
    assert "flights generated, seed 0" in db.source
    assert list(db.flights.columns) == COLUMNS["flights"]
    sizes = db.sizes()
    assert sizes["cities"] >= 300 and sizes["restaurants"] > 9000 and sizes["distances"] > 17000
    assert 50_000 < sizes["flights"] < 250_000
    with pytest.raises(FileNotFoundError, match="clean_Flights_2022.csv"):  # the old behaviour, by default
        load_database(real_travel_db)
    assert real_index(real_travel_db, "auto", 0) is real  # loaded once per process


def test_generated_flights_are_seeded_and_plausible(real):
    db = real.db
    again, meta = generate_flights(db.cities, db.attractions, db.distances, seed=0)
    other, _ = generate_flights(db.cities, db.attractions, db.distances, seed=1)
    assert again.equals(db.flights) and not other.equals(db.flights)
    f = db.flights
    ports = set(city_locations(db.cities, db.attractions))
    assert set(f["OriginCityName"]) <= ports and set(f["DestCityName"]) <= ports
    assert meta["airports"] == len(ports) > 250
    assert f["Flight Number"].is_unique and f["FlightDate"].str.startswith("2022-03-").all()
    assert (f["OriginCityName"] != f["DestCityName"]).all()
    assert f["Price"].between(15, 4000).all() and f["Distance"].gt(0).all()
    # durations add up: arrival = departure + elapsed (mod a day)
    mins = lambda s: s.str.slice(0, 2).astype(int) * 60 + s.str.slice(3, 5).astype(int)  # noqa: E731
    el = f["ActualElapsedTime"].str.extract(r"(\d+) hours (\d+) minutes").astype(int)
    assert ((mins(f["DepTime"]) + el[0] * 60 + el[1]) % 1440 == mins(f["ArrTime"])).all()
    # every route is flown both ways; a flight is never longer than the road between the cities
    legs = set(zip(f["OriginCityName"], f["DestCityName"]))
    assert all((b, a) in legs for a, b in legs)
    for (a, b), road in list(real.roads.items())[:2000]:
        if road.km is not None and (a, b) in legs:
            miles = f.loc[(f["OriginCityName"] == a) & (f["DestCityName"] == b), "Distance"].iloc[0]
            assert miles <= road.km * 0.621 + 1


def test_a_users_flights_file_replaces_the_generated_flights(real_travel_db, tmp_path):
    root = tmp_path / "database"
    for table in ("accommodations", "restaurants", "attractions", "distances", "cities"):
        target = root / DATABASE_FILES[table]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(real_travel_db / DATABASE_FILES[table])  # read in place
    flights = pd.DataFrame([["F0000001", 120, "08:00", "09:30", "1 hours 30 minutes", "2022-03-10", "Buffalo",
                             "New York", 292.0]], columns=COLUMNS["flights"])
    (root / "flights").mkdir()
    flights.to_csv(root / DATABASE_FILES["flights"], index=False)
    db = load_database(tmp_path, flights="auto")
    assert db.meta["flights"] == "file" and "generated" not in db.source
    assert db.flights.equals(flights)
    assert load_database(tmp_path, flights="generated").meta["flights"] == "generated"
    with pytest.raises(ValueError, match="flights="):
        load_database(tmp_path, flights="sometimes")


def test_the_persisted_split_holds_queries_over_the_real_cities(real_travel_db, real):
    data = json.loads(real_split_path(0).read_text())
    assert data["fingerprint"] == fingerprint(real)  # the public tables with flights of seed 0
    index, queries, parts, where = real_queries(real_travel_db, "auto", 0)
    assert index is real and where == str(real_split_path(0))
    assert len(queries) == data["n_queries"] == 360
    assert {k: len(v) for k, v in parts.items()} == {"train": 216, "validation": 72, "test": 72}
    assert set().union(*map(set, parts.values())) == {q.id for q in queries}
    assert all(set(parts[a]).isdisjoint(parts[b]) for a, b in (("train", "test"), ("train", "validation")))
    for q in queries:
        assert q.org in real.city_state
        assert (q.dest in real.city_state) if q.days == 3 else (q.dest in real.states)
        assert q.query and q.budget > 0
    cuisines = {c for q in queries for c in (q.local_constraint.get("cuisine") or ())}
    assert cuisines and all(any(c in r.cuisines for r in real.restaurants.items) for c in cuisines)


def test_query_generation_over_the_real_tables_is_seeded(real):
    a = generate_real_queries(real, seed=0, per_cell=1)
    b = generate_real_queries(real, seed=0, per_cell=1)
    assert a == b and len(a) == 9
    persisted = {(q.org, q.dest, q.date, q.people_number) for q in real_queries(real.db.meta["root"])[1]}
    assert len([q for q in a if (q.org, q.dest, q.date, q.people_number) in persisted]) >= 7  # the file's queries


@pytest.mark.slow
def test_the_solver_delivers_a_passing_plan_within_budget_on_the_generated_queries(real_travel_db):
    train, held_out = make_envs(TravelEnvConfig(database_dir=str(real_travel_db), queries_source="generated"))
    solver = TravelSolver(held_out.index)
    queries = [held_out.get_query(i) for i in held_out.query_ids]
    start = time.perf_counter()
    results = [solver.solve(q) for q in queries]
    per_query = (time.perf_counter() - start) / len(queries)
    delivered = passed = 0
    for q, res in zip(queries, results):
        if res is None:
            continue
        delivered += len(parse_plan(held_out.format_plan(res.plan))) == q.days
        passed += res.within_budget(q.budget) and held_out.evaluator.evaluate(q, res.plan).final_pass
    assert delivered >= 0.99 * len(queries) and passed >= 0.99 * len(queries), (delivered, passed, len(queries))
    assert per_query < 1.0


def test_the_config_reaches_the_real_sandbox(real_travel_db):
    cfg = TravelEnvConfig(database_dir=str(real_travel_db), queries_source="generated", days=[3], levels=["easy"])
    parts = split_ids(cfg)
    assert parts["train"] and parts["test"]
    train, held_out = make_envs(cfg)
    assert isinstance(train.index, SandboxIndex) and "generated" in train.index.db.source
    assert train.query_ids == parts["train"]
    text = describe_env(cfg)[0]
    assert "generated" in text and "real-seed0.json" in text
    with pytest.raises(TravelConfigError, match="database_dir"):
        TravelEnvConfig(queries_source="generated").validate()
    with pytest.raises(TravelConfigError, match="flights"):
        TravelEnvConfig(database_dir=str(real_travel_db), flights="never").validate()


def test_other_tables_get_their_queries_generated_once_and_cached(real_travel_db, real, tmp_path, monkeypatch):
    """Tables the persisted file does not match (here: no file) generate their queries, cache them
    under the cache folder and split them by seed; a second process reads the cache."""
    import envs.travel.real_sandbox as rs

    made = []
    monkeypatch.setenv("RLTF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(rs, "real_split_path", lambda seed=0: tmp_path / f"real-seed{seed}.json")
    monkeypatch.setattr(rs, "generate_real_queries",
                        lambda index, seed: made.append(seed) or generate_real_queries(index, seed, per_cell=2))
    rs._queries.cache_clear()
    try:
        _, queries, parts, where = rs.real_queries(real_travel_db)
        assert made == [0] and len(queries) == 18 and "split by seed 0" in where
        assert sorted(i for v in parts.values() for i in v) == [q.id for q in queries]
        rs._queries.cache_clear()
        assert rs.real_queries(real_travel_db)[1] == queries and made == [0]  # read back from the cache
        assert list((tmp_path / "cache" / "travel-real").glob("queries-*-seed0.json"))
    finally:
        rs._queries.cache_clear()
