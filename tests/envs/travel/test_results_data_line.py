"""What a travel results data line says (issues #51 items 3 and 6): the evaluator's mode (official
vs the default rules) on every line, and no machine's absolute path -- a folder outside the checkout
is its name, a path inside it is relative -- in the generator's output or in the committed travel
pages."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from benchmarks.results_pages import render_travel_real
from envs.travel.config import TravelEnvConfig
from envs.travel.eval_mode import MODE_TEXT
from envs.travel.provenance import PROJECT_ROOT, _relative, data_line, data_source, shown_path
from envs.travel.real_sandbox import real_index

ABSOLUTE = re.compile(r"(?:^|[\s`'\"(\[])/[^\s/]")  # a token that starts at the file system's root


def no_machine_path(data: dict, line: str) -> None:
    assert not ABSOLUTE.search(line), line
    for key, value in data.items():
        assert not (isinstance(value, str) and Path(value.split(" (")[0]).is_absolute()), (key, value)


def test_paths_are_relative_to_the_checkout_or_a_name(tmp_path):
    folder = tmp_path / "my-tables"
    folder.mkdir()
    (folder / "queries.json").write_text("[]")
    assert shown_path(folder) == "my-tables"
    assert shown_path(folder / "queries.json") == "my-tables/queries.json"
    assert shown_path(PROJECT_ROOT / "envs" / "travel" / "splits") == "envs/travel/splits"
    assert shown_path(PROJECT_ROOT) == "."
    # the rltf cache's generated queries, as real_sandbox names them
    assert _relative(f"{folder / 'queries.json'} (split by seed 0)") == "my-tables/queries.json (split by seed 0)"
    assert _relative("envs/travel/splits/real-seed0.json") == "envs/travel/splits/real-seed0.json"


def test_every_line_names_the_evaluator_mode():
    for quirks, mode in ((False, "default"), (True, "official")):
        data = data_source(TravelEnvConfig(seed=0, days=[3], official_quirks=quirks), evaluated=["test"])
        line = data_line(data)
        assert data["evaluator"] == mode and line.endswith(f"; evaluator: {MODE_TEXT[mode]}")
        no_machine_path(data, line)
    assert "the benchmark's" in MODE_TEXT["official"] and "not the benchmark's" in MODE_TEXT["default"]
    old = {k: v for k, v in data.items() if k != "evaluator"}  # a result written before the key existed
    assert "evaluator" not in data_line(old)


def test_a_local_copy_of_the_queries_is_named_not_located(tmp_path):
    folder = tmp_path / "travelplanner-queries"
    folder.mkdir()
    for source, shown in ((str(folder), "travelplanner-queries"), ("osunlp/TravelPlanner", "osunlp/TravelPlanner")):
        config = TravelEnvConfig(database_dir="reference_information", queries_source=source, queries_split="hub")
        data = data_source(config, evaluated=["train"])
        assert data["queries"] == shown
        no_machine_path(data, data_line(data))


def test_the_real_tables_are_named_not_located(real_travel_db):
    """The configs name the tables as ``../shared/data/travelplanner-db`` (outside the checkout): the
    line holds the folder's name, whether the setting was relative or absolute."""
    index = real_index(real_travel_db, "auto", 1)
    for given in (str(real_travel_db.resolve()), os.path.relpath(real_travel_db.resolve())):
        config = TravelEnvConfig(database_dir=given, queries_split="validation", seed=1, official_quirks=True)
        data = data_source(config, index, ["validation:re-split:test"])
        line = data_line(data)
        assert data["path"] == real_travel_db.name and f"real tables {real_travel_db.name} (" in line
        no_machine_path(data, line)


def test_the_results_page_generator_prints_no_machine_path(tmp_path):
    """A table.json written before provenance dropped absolute paths still renders the folder's name."""
    table = {"rows": [{"method": "flat · embedded · rltf · flat-seed0", "run": "flat-seed0", "final pass": 0.5}],
             "data": {"database": "real tables", "path": "/somewhere/on/a/machine/travelplanner-db",
                      "fingerprint": "0" * 16, "flights": "generated (seed 0)", "queries": "generated",
                      "split": "envs/travel/splits/real-seed0.json", "evaluated": ["test"], "evaluator": "default"},
             "runs": ["flat-seed0"]}
    (tmp_path / "table.json").write_text(json.dumps(table))
    _, _, lines = render_travel_real(tmp_path)
    text = "\n".join(lines)
    assert "`travelplanner-db`" in text and "/somewhere" not in text and "evaluator mode: default" in text


@pytest.mark.parametrize("rel", ["docs/envs/travelplanner-benchmark.md", "docs/results/travel-real.md",
                                 "benchmarks/results/travel-real/table.json",
                                 "benchmarks/results/travel-real/table.md"])
def test_committed_travel_pages_hold_no_machine_path(rel):
    text = (PROJECT_ROOT / rel).read_text(encoding="utf-8")
    assert not re.search(r"(?<![\w.])/(?:work|tmp|root|home|Users)/", text), rel
