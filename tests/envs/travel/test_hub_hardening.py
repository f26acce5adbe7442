"""Hostile hub query files and reference information (#52 item 7): every failure is one
HubFormatError line naming the file / row / field (or the note / row / column), the values the
benchmark cannot hold are refused, and a seeded fuzz finds no other outcome. Data: the benchmark's
real train queries (``benchmarks/travel_hub_fuzz.py`` finds them) where present, else rows written here."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.travel_hub_fuzz import (
    CLEAN,
    REFUSED,
    base_row,
    hub_outcomes,
    real_queries_dir,
    reference_outcomes,
)
from envs.travel.hub import HubFormatError, load_split
from envs.travel.index import SandboxIndex, _road
from envs.travel.query import TravelQuery
from envs.travel.reference_info import reference_database
from envs.travel.solver import TravelSolver

ROW = {"org": "Alpha", "dest": "Beta", "days": 3, "visiting_city_number": 1,
       "date": "['2022-03-16', '2022-03-17', '2022-03-18']", "people_number": 2,
       "local_constraint": "{'house rule': None, 'cuisine': None, 'room type': None, 'transportation': None}",
       "budget": 1900, "query": "Plan a 3-day trip from Alpha to Beta for two people, budget $1,900.",
       "level": "easy", "reference_information": "[]"}


def _load(tmp_path: Path, text: str, name: str = "validation.jsonl"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load_split(path, "validation")


def _refused(tmp_path: Path, text: str, name: str = "validation.jsonl") -> str:
    with pytest.raises(HubFormatError) as err:
        _load(tmp_path, text, name)
    msg = str(err.value)
    assert "\n" not in msg and name in msg, msg
    return msg


def _jsonl(*rows: dict) -> str:
    return "\n".join(json.dumps(r) for r in rows) + "\n"


# ----------------------------------------------------------------------------- hub files
def test_the_row_loads(tmp_path):
    # the row every refusal below damages one field of
    (q,), _ = _load(tmp_path, _jsonl(ROW))
    assert (q.org, q.people_number, q.budget, q.date[-1]) == ("Alpha", 2, 1900, "2022-03-18")


@pytest.mark.parametrize("field, value, expected", [
    pytest.param("days", "9" * 400, "'days' is '9999", id="days-400-digits"),  # OverflowError: int(float()) before
    pytest.param("people_number", "9" * 400, "'people_number' is '9999", id="people-400-digits"),
    pytest.param("people_number", 10 ** 400, "expected an integer from 1 to 1,000", id="people-400-digit-int"),
    pytest.param("budget", 10 ** 400, "expected a number from 1 to 1,000,000,000", id="budget-400-digit-int"),
    ("local_constraint", "{[1]: 2}", "'local_constraint' is '{[1]: 2}'"),  # TypeError: unhashable before
    ("visiting_city_number", 0, "expected 1 (a 3-day TravelPlanner trip visits 1 city)"),  # solver ValueError before
])
def test_what_crashed_is_one_line_naming_row_and_field(tmp_path, field, value, expected):
    msg = _refused(tmp_path, _jsonl(ROW, {**ROW, field: value}))
    assert "row 1" in msg and repr(field) in msg and expected in msg, msg
    assert len(msg) < 400, msg  # the 400-digit value is shown cut


def test_a_deeply_nested_line_is_one_line(tmp_path):
    msg = _refused(tmp_path, _jsonl(ROW) + "[" * 10_000 + "]" * 10_000 + "\n")  # RecursionError before
    assert "line 2" in msg and "nested too deep" in msg, msg
    msg = _refused(tmp_path, "[" * 10_000 + "]" * 10_000, "validation.json")
    assert "nested too deep" in msg


@pytest.mark.parametrize("field, value, expected", [
    ("date", "['2022-02-27', '2022-02-28', '2022-02-29']", "'2022-02-29', which is not a calendar date"),
    ("date", "['2022-02-28', '2022-02-29', '2022-02-30']", "'2022-02-29', which is not a calendar date"),
    ("date", "['2022-03-16', '2022-03-18', '2022-03-17']", "'2022-03-18' does not follow '2022-03-16'"),
    ("date", "['2022-03-16', '2022-03-16', '2022-03-17']", "expected consecutive days"),
    ("people_number", 0, "'people_number' is 0; expected an integer from 1 to 1,000"),
    ("people_number", -2, "'people_number' is -2; expected an integer from 1 to 1,000"),
    ("budget", -100, "'budget' is -100; expected a number from 1 to"),
    ("budget", 0, "'budget' is 0; expected a number from 1 to"),
    ("dest", "alpha", "fields 'org' and 'dest' are both 'Alpha'"),
    ("visiting_city_number", 50, "'visiting_city_number' is 50; expected 1"),
    ("query", "  ", "'query' is '  '; expected non-empty text"),
])
def test_values_no_trip_has_are_refused(tmp_path, field, value, expected):
    msg = _refused(tmp_path, _jsonl(ROW, {**ROW, field: value}))
    assert "row 1" in msg and expected in msg, msg


def test_more_cities_than_the_trip_has_days_is_refused(tmp_path):
    five = {**ROW, "days": 5, "dest": "Gamma State", "visiting_city_number": 6,
            "date": repr([f"2022-03-{d}" for d in range(16, 21)])}
    assert "expected 2 (a 5-day TravelPlanner trip visits 2 cities)" in _refused(tmp_path, _jsonl(five))
    (q,), _ = _load(tmp_path, _jsonl({**five, "visiting_city_number": 2}))
    assert q.visiting_city_number == 2


def test_empty_files_and_unequal_columns_are_errors(tmp_path):
    header = ",".join(ROW) + "\n"
    for name, text in (("validation.csv", ""), ("validation.csv", header), ("validation.jsonl", "\n\n"),
                       ("validation.json", "[]")):
        assert "no queries" in _refused(tmp_path, text, name)  # 0 queries, exit 0, before
    columns = {k: [v, v] for k, v in ROW.items()}
    (tmp_path / "ok").mkdir()
    assert len(_load(tmp_path / "ok", json.dumps(columns), "validation.json")[0]) == 2
    columns["query"] = columns["query"][:1]
    msg = _refused(tmp_path, json.dumps(columns), "validation.json")  # cut to 1 row by zip() before
    assert "unequal lengths (2 values in 'org', 1 in 'query')" in msg, msg
    assert "expected a JSON list" in _refused(tmp_path, json.dumps({**columns, "query": "one"}), "validation.json")


def test_a_csv_row_with_more_cells_than_its_header(tmp_path):
    frame = pd.DataFrame([ROW])
    text = frame.to_csv(index=False).rstrip("\n") + ",surplus\n"
    assert "row 0: 12 cells; the header has 11 columns" in _refused(tmp_path, text, "validation.csv")


# ----------------------------------------------------------------------------- reference information
HOTELS = pd.DataFrame([["Quiet Room", "30.0", "Private room", "No parties", "1.0", "2", "4.0", "Beta"],
                       ["Big Loft", "130.5", "Entire home/apt", "No smoking", "2.0", "4", "5.0", "Beta"]],
                      columns=["NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy",
                               "review rate number", "city"])
QUERY = TravelQuery(0, "Alpha", "Beta", 3, 1, ("2022-03-16", "2022-03-17", "2022-03-18"), 2, budget=1900)


def _notes(hotel_cell: tuple[str, str] | None = None, distance: str = "120 km") -> str:
    hotels = HOTELS.copy()
    if hotel_cell is not None:
        hotels.loc[1, hotel_cell[0]] = hotel_cell[1]
    road = f"self-driving, from Alpha to Beta, duration: 1 hour 20 mins, distance: {distance}, cost: 6"
    return repr([{"Description": "Accommodations in Beta", "Content": hotels.to_string(index=False)},
                 {"Description": "Self-driving from Alpha to Beta", "Content": road}])


def test_the_notes_load():
    index = SandboxIndex(reference_database(QUERY, _notes()))
    assert [h.max_occupancy for h in index.hotels.items] == [2, 4]
    assert index.road("Alpha", "Beta").self_driving_cost == 6


@pytest.mark.parametrize("column, value, expected", [
    ("maximum occupancy", "", "'maximum occupancy' holds a value that is not a whole number from 1 to 1,000: ''"),
    ("maximum occupancy", "nan", "not a whole number from 1 to 1,000: 'nan'"),  # IntCastingNaNError before
    ("maximum occupancy", "1e30", "not a whole number from 1 to 1,000: '1e30'"),  # int64 min before
    ("maximum occupancy", "2.5", "not a whole number from 1 to 1,000: '2.5'"),  # 2 before
    ("price", "-5.0", "'price' holds a value that is not a number from 0 to 1,000,000,000: '-5.0'"),
    ("price", "inf", "'price' holds a value that is not a number from 0 to 1,000,000,000: 'inf'"),
    pytest.param("price", "9" * 5000, "1,000,000,000: '9999", id="price-5000-digits"),
    ("review rate number", "nan", "'review rate number' holds a value that is not a number"),  # NaN rating before
])
def test_a_bad_number_names_the_note_row_and_column(column, value, expected):
    with pytest.raises(HubFormatError) as err:
        reference_database(QUERY, _notes((column, value)))
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 400, msg
    assert "query 0 reference_information note 0 (Accommodations in Beta) row 1 ('Big Loft')" in msg, msg
    assert expected in msg, msg


@pytest.mark.parametrize("distance", ["1e999 km", "nan km", "-300 km", "far km"])
def test_a_bad_distance_names_the_note(distance):
    # OverflowError / ValueError in the index, or a negative taxi cost, before
    with pytest.raises(HubFormatError) as err:
        SandboxIndex(reference_database(QUERY, _notes(distance=distance)))
    assert str(err.value) == (f"query 0 reference_information note 1 (Self-driving from Alpha to Beta): distance "
                              f"{distance!r}; expected a number of km from 0 to 1,000,000,000")


def test_an_unhashable_literal_is_one_line():
    with pytest.raises(HubFormatError, match=r"query 0 reference_information: expected a list of"):
        reference_database(QUERY, "{[1]: 2}")  # TypeError before
    with pytest.raises(HubFormatError, match=r"expected a list of"):
        reference_database(QUERY, "[" + "9" * 5000 + "]")


@pytest.mark.parametrize("distance", ["1e999 km", "nan km", "-300 km"])
def test_the_index_gives_a_road_without_costs_for_a_distance_that_is_no_number(distance):
    road = _road("Alpha", "Beta", "1 hour", distance)  # a distance table read from files
    assert (road.km, road.self_driving_cost, road.taxi_cost) == (None, None, None)


# ----------------------------------------------------------------------------- the real queries
@pytest.fixture(scope="module")
def real_queries():
    folder = real_queries_dir()
    if folder is None:
        pytest.skip("the real TravelPlanner train queries were not found: set RLTF_TRAVELPLANNER_QUERIES to the "
                    "folder holding train.csv")
    return folder


def test_the_real_train_queries_still_load(real_queries):
    queries, rows = load_split(real_queries, "train")
    assert len(queries) == 27 and {q.days for q in queries} == {3, 5, 7}
    indexes = [SandboxIndex(reference_database(q, r["reference_information"])) for q, r in zip(queries, rows)]
    assert all(ix.hotels.items and ix.restaurants.items for ix in indexes)
    for days in (3, 5, 7):  # one trip of each length still solves on its own notes
        k = next(k for k, q in enumerate(queries) if q.days == days)
        assert TravelSolver(indexes[k]).solve(queries[k]) is not None


def test_fuzz_every_hub_case_loads_or_is_one_error(real_queries, tmp_path):
    outcomes = hub_outcomes(base_row(real_queries), tmp_path)
    assert len(outcomes) >= 70
    crashes = {k: v for k, v in outcomes.items() if v not in (CLEAN, REFUSED)}
    assert not crashes, crashes
    assert outcomes["base.csv"] == outcomes["base.jsonl"] == outcomes["test-columns.csv"] == CLEAN
    assert outcomes["empty.csv"] == outcomes["unequal-columns.json"] == outcomes["visiting_city_number[0]"] == REFUSED


def test_fuzz_reference_information_mutations_parse_or_are_one_error(real_queries):
    outcomes = reference_outcomes(base_row(real_queries), 100, seed=0)
    crashes = [o for o in outcomes if o not in (CLEAN, REFUSED)]
    assert not crashes, crashes
    assert outcomes.count(CLEAN) > 10 and outcomes.count(REFUSED) > 10  # the mutations do reach both
