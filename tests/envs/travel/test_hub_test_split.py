"""The hub's test split gives only level, days, query and reference_information (#51 item 4): such
files load as QueryText queries, enough to build each query's reference database, decode and write
the official submission file; what needs a structured field says so in one line."""

from __future__ import annotations

import json

import pytest

import envs
from envs.travel.evaluator import TravelEvaluator
from envs.travel.hub import HubFormatError, MissingQueryFieldError, QueryText, is_structured, load_split
from envs.travel.index import SandboxIndex
from envs.travel.reference_info import UNKNOWN_STATE, reference_database
from envs.travel.solver import TravelSolver
from envs.travel.split import hub_split
from envs.travel.submission import read_submission, write_submission
from tests.envs.travel.test_hub_formats import hub_queries, write_hub_dir

TEST_COLUMNS = ["level", "days", "query", "reference_information"]


def reduced_hub_dir(folder):
    """The synthetic hub folder with test.csv cut to the hub test split's four columns."""
    import pandas as pd

    write_hub_dir(folder)
    frame = pd.read_csv(folder / "test.csv", dtype=str, keep_default_na=False)
    frame[TEST_COLUMNS].to_csv(folder / "test.csv", index=False)
    return folder


def test_the_test_splits_columns_load(tmp_path):
    hub = reduced_hub_dir(tmp_path / "hub")
    queries, rows = load_split(hub, "test", id_offset=100)
    full = hub_queries()["test"]
    assert all(isinstance(q, QueryText) and not is_structured(q) for q in queries)
    assert [(q.id, q.days, q.level, q.query) for q in queries] == [
        (100 + k, q.days, q.level, q.query) for k, q in enumerate(full)]
    assert sorted(rows[0]) == sorted(TEST_COLUMNS)
    # the other splits keep the full columns
    assert all(is_structured(q) for q in load_split(hub, "validation")[0])


def test_a_missing_field_says_so_in_one_line(tmp_path):
    hub = reduced_hub_dir(tmp_path / "hub")
    q = load_split(hub, "test")[0][0]
    for name in ("org", "budget", "date", "local_constraint", "people_number"):
        with pytest.raises(MissingQueryFieldError) as err:
            getattr(q, name)
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"query 0 (hub (test) row 0) has no {name!r}: the hub's test split "
                                                  "gives only level, days, query and reference_information"), msg
    with pytest.raises(MissingQueryFieldError, match=r"has no structured fields \(as_dict reads them\)"):
        q.as_dict()
    with pytest.raises(AttributeError):  # any other name is an ordinary missing attribute
        q.no_such_thing  # noqa: B018


def test_decoding_needs_only_the_text_and_the_notes(tmp_path):
    hub = reduced_hub_dir(tmp_path / "hub")
    queries, rows = load_split(hub, "test")
    full = hub_queries()["test"]
    for q, r, f in zip(queries, rows, full):
        index = SandboxIndex(reference_database(q, r["reference_information"]))
        assert {h.name for h in index.hotels.items} and set(index.city_state.values()) == {UNKNOWN_STATE}
        assert f.dest in index.city_state  # the notes' cities, the destination's among them
    # the official submission file, aligned with the queries
    path = write_submission(tmp_path / "plans" / "test.jsonl", queries, [None] * len(queries))
    assert [r["query"] for r in read_submission(path)] == [q.query for q in queries]
    # what needs the structured fields says so
    index = SandboxIndex(reference_database(queries[0], rows[0]["reference_information"]))
    with pytest.raises(MissingQueryFieldError, match="query 0 .* has no "):
        TravelEvaluator(index).evaluate(queries[0], [])
    with pytest.raises(MissingQueryFieldError):
        TravelSolver(index).solve(queries[0])


def test_split_names_and_the_env_over_the_test_split(tmp_path):
    hub = reduced_hub_dir(tmp_path / "hub")
    queries, _, ids = hub_split(hub, "test")
    assert len(ids) == len(queries) == len(hub_queries()["test"])
    parts = [hub_split(hub, f"test:re-split:{p}")[2] for p in ("train", "validation", "test")]
    assert sorted(sum(parts, [])) == sorted(ids)
    config = {"name": "travel", "travel": {"database_dir": "reference_information", "queries_source": str(hub),
                                           "queries_split": "hub"}}
    env = envs.make(config, "test")
    assert [env.get_query(i).query for i in env.query_ids] == [q.query for q in hub_queries()["test"]]


def test_one_layout_per_file(tmp_path):
    hub = reduced_hub_dir(tmp_path / "hub")
    import csv

    with (hub / "test.csv").open(newline="") as f:
        reduced = list(csv.DictReader(f))
    with (hub / "validation.csv").open(newline="") as f:
        full = next(csv.DictReader(f))
    (tmp_path / "mixed.jsonl").write_text("\n".join(json.dumps(r) for r in (full, reduced[0])) + "\n")
    with pytest.raises(HubFormatError, match=r"row 0 has the structured columns but row 1 only the test split's"):
        load_split(tmp_path / "mixed.jsonl", "test")
    # a row with some structured columns is a damaged row, not the test layout
    (tmp_path / "part.jsonl").write_text(json.dumps({**reduced[0], "org": "Alpha"}) + "\n")
    with pytest.raises(HubFormatError, match=r"row 0: missing column\(s\) \['dest'"):
        load_split(tmp_path / "part.jsonl", "test")
    # and the test layout's own fields are checked
    (tmp_path / "bad.jsonl").write_text(json.dumps({**reduced[0], "days": "9" * 400}) + "\n")
    with pytest.raises(HubFormatError, match=r"row 0: field 'days' is '9999"):
        load_split(tmp_path / "bad.jsonl", "test")
