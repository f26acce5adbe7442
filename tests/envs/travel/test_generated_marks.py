"""Generated data is marked as generated wherever it goes (issue #51 item 4): an export of generated
flights never writes the benchmark's official flights file name (``flights/clean_Flights_2022.csv``)
but ``flights/generated_Flights_seed<seed>.csv`` with a note, a reader of the export knows the flights
are generated (``flights='generated'`` / ``'auto'``; ``'file'`` reads the official file only), and
exported query rows say what of them is made up (the ``generated`` column)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from envs.travel.index import SandboxIndex
from envs.travel.interchange import export_queries
from envs.travel.provenance import _flights, data_line
from envs.travel.queries import default_queries
from envs.travel.sandbox import (
    DATABASE_FILES,
    export_database,
    flights_are_generated,
    generated_flights_file,
    load_database,
)

OFFICIAL = DATABASE_FILES["flights"]


def test_the_synthetic_sandboxs_flights_export_as_generated_and_read_back_as_such(tmp_path):
    index, queries = default_queries(0)
    db = index.db
    root = export_database(db, tmp_path)
    assert not (root / OFFICIAL).exists() and not list(root.rglob("clean_Flights_2022.csv"))
    assert (root / generated_flights_file(0)).is_file() and generated_flights_file(0).startswith("flights/generated_")
    note = json.loads((root / generated_flights_file(0)).with_suffix(".json").read_text())
    assert note["generated"] is True and note["seed"] == 0
    for mode in ("generated", "auto"):  # the reader knows: marked in meta and source, the same tables back
        back = load_database(tmp_path, flights=mode)
        assert back.equals(db), back.first_difference(db)
        assert flights_are_generated(back) and back.meta["flights_file"] == generated_flights_file(0)
        assert "flights generated, seed 0" in back.source
    with pytest.raises(FileNotFoundError, match="clean_Flights_2022.csv.*generated_Flights_seed0.csv"):
        load_database(tmp_path, flights="file")  # file: the official file only, never the generated one
    # exporting what was read back keeps the generated name; the provenance line says generated
    again = export_database(load_database(tmp_path, flights="auto"), tmp_path / "again")
    assert not (again / OFFICIAL).exists() and (again / generated_flights_file(0)).is_file()
    shown = _flights(SandboxIndex(back))
    assert shown == f"generated (seed 0, read from {generated_flights_file(0)})"
    line = data_line({"database": "real tables", "path": "x", "fingerprint": "f", "flights": shown,
                      "queries": "generated over the tables (seed 0)", "split": "s", "evaluated": ["test"]})
    assert "flights generated (seed 0, read from flights/generated_Flights_seed0.csv)" in line
    # the exported query rows say what of them is generated
    path = export_queries(index, queries[:2], tmp_path, "test", with_plans=False, generated=True)[0]
    rows = pd.read_csv(path)
    assert rows["generated"].str.startswith("query (generated").all()
    assert rows["generated"].str.contains("reference_information").all()


def test_an_export_of_the_real_tables_with_generated_flights_names_them_generated(real_travel_db, tmp_path):
    db = load_database(real_travel_db, flights="generated", flights_seed=3)  # the public tables have no flights
    assert flights_are_generated(db)
    root = export_database(db, tmp_path)
    assert not (root / OFFICIAL).exists() and (root / generated_flights_file(3)).is_file()
    back = load_database(tmp_path, flights="generated", flights_seed=3)
    assert back.meta["flights"] == "generated" and back.meta["flights_seed"] == 3
    assert back.flights.reset_index(drop=True).equals(db.flights.reset_index(drop=True))
    with pytest.raises(FileNotFoundError, match="clean_Flights_2022.csv"):
        load_database(tmp_path, flights="file")
