"""Which data a travel result was computed on (issue #36): the generated sandbox with its seed, or the
real tables' folder and fingerprint, the flights, the queries' source and split, the evaluated splits;
as a dict (a results JSON's ``data``) and one markdown line."""

from __future__ import annotations

from envs.travel.config import TravelEnvConfig
from envs.travel.factory import make_envs
from envs.travel.provenance import data_line, data_source
from envs.travel.real_sandbox import fingerprint, real_index

KEYS = ["database", "seed", "path", "fingerprint", "flights", "queries", "split", "evaluated", "evaluator"]
DEFAULT_RULES = ("evaluator: default rules (official_quirks=false: the rules as intended, not the benchmark's "
                 "verdicts)")


def test_the_generated_sandbox_names_its_seed_and_split_file():
    data = data_source(TravelEnvConfig(seed=0, days=[3]), evaluated=["test", "test"])
    assert list(data) == KEYS
    assert data == {"database": "generated sandbox", "seed": 0, "path": None, "fingerprint": None,
                    "flights": "generated with the sandbox", "queries": "generated with the sandbox",
                    "split": "envs/travel/splits/seed0.json", "evaluated": ["test"], "evaluator": "default"}
    assert data_line(data) == ("data: generated sandbox (seed 0), flights generated with it; queries generated "
                               f"with it, split envs/travel/splits/seed0.json; evaluated: test; {DEFAULT_RULES}")


def test_sole_planning_names_the_queries_reference_rows():
    config = TravelEnvConfig(database_dir="reference_information", queries_source="osunlp/TravelPlanner",
                             queries_split="hub")
    data = data_source(config, evaluated=["validation"])
    assert data["database"] == "reference_information" and data["path"] is None and data["fingerprint"] is None
    assert data["queries"] == "osunlp/TravelPlanner" and data["split"] == "the hub's train / validation / test"
    assert data_line(data) == ("data: reference_information rows of each query, no database; queries "
                               "osunlp/TravelPlanner, the hub's train / validation / test; evaluated: validation; "
                               + DEFAULT_RULES)


def test_the_real_tables_name_their_folder_fingerprint_and_flights(real_travel_db):
    """Queries generated over the tables (the persisted real split) and the hub's queries re-split."""
    config = TravelEnvConfig(database_dir=str(real_travel_db), queries_source="generated", days=[3], levels=["easy"])
    _, held = make_envs(config)
    data = data_source(config, held.index, ["test"])
    assert list(data) == KEYS
    assert data["database"] == "real tables" and data["path"] == real_travel_db.name  # outside the checkout: its name
    assert data["fingerprint"] == fingerprint(held.index) and len(data["fingerprint"]) == 16
    assert data["flights"] == "generated (seed 0)"  # the public tables have no flights file
    assert data["queries"] == "generated over the tables (seed 0)"
    assert data["split"] == "envs/travel/splits/real-seed0.json"  # the persisted split matches these tables
    assert data_line(data) == (f"data: real tables {real_travel_db.name} (fingerprint {data['fingerprint']}), "
                               "flights generated (seed 0); queries generated over the tables (seed 0), split "
                               f"envs/travel/splits/real-seed0.json; evaluated: test; {DEFAULT_RULES}")
    assert data_source(config, None, ["test"]) == data  # without the env's index: the process's cached one

    hub = TravelEnvConfig(database_dir=str(real_travel_db), queries_split="validation", seed=1)
    data = data_source(hub, real_index(real_travel_db, "auto", 1), ["validation:re-split:test"])
    assert data["queries"] == "osunlp/TravelPlanner" and data["split"] == "validation re-split by seed 1"
    assert data["flights"] == "generated (seed 1)" and data["seed"] == 1
    assert data_line(data).endswith("; queries osunlp/TravelPlanner, validation re-split by seed 1; evaluated: "
                                    f"validation:re-split:test; {DEFAULT_RULES}")
