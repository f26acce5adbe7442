"""The hub dataset's formats (envs/travel/hub.py): CSV with string literals, JSONL with real lists,
one-line errors naming the row and the field, train's annotated_plan, and one meaning of a split
name in gym.make, envs.make and the factory's split."""

from __future__ import annotations

import json
from functools import lru_cache

import gymnasium as gym
import pytest

import envs
from envs.travel.evaluator import TravelEvaluator
from envs.travel.factory import run_split_names, split_ids
from envs.travel.hub import HubFileError, HubFormatError, annotated_plans, load_split, parse_split_name
from envs.travel.interchange import queries_frame
from envs.travel.queries import default_queries, load_hub_queries
from envs.travel.registration import GYM_ID
from envs.travel.solver import TravelSolver
from envs.travel.split import make_split

SIZES = {"train": 4, "validation": 15, "test": 5}


@lru_cache(maxsize=1)
def hub_queries() -> dict[str, list]:
    """3-day synthetic queries, 5 of each level for validation, as three hub splits."""
    _, queries = default_queries(0)
    by_level = {lv: [q for q in queries if q.days == 3 and q.level == lv] for lv in ("easy", "medium", "hard")}
    pool = [q for group in zip(*by_level.values()) for q in group]
    out, k = {}, 0
    for split, n in SIZES.items():
        out[split] = pool[k:k + n]
        k += n
    return out


def write_hub_dir(folder, with_reference: bool = True):
    """train / validation / test CSVs as the hub writes them (string literals; train with
    annotated_plan; reference_information from the synthetic sandbox)."""
    index, _ = default_queries(0)
    solver = TravelSolver(index)
    folder.mkdir(parents=True, exist_ok=True)
    for split, qs in hub_queries().items():
        plans = {q.id: solver.solve(q).plan for q in qs} if split == "train" else None
        queries_frame(qs, index if with_reference else None, plans).to_csv(folder / f"{split}.csv", index=False)
    return folder


def record(q) -> dict:
    return {**q.as_dict(), "reference_information": "[]"}


def test_csv_literals_and_jsonl_lists_give_the_same_queries(tmp_path):
    hub = write_hub_dir(tmp_path / "hub", with_reference=False)
    from_csv = load_hub_queries(hub, "validation")
    rows = [record(q) for q in hub_queries()["validation"]]  # date a JSON list, local_constraint a dict
    (tmp_path / "validation.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    from_jsonl = load_hub_queries(tmp_path / "validation.jsonl", "validation")
    assert [q.as_dict() for q in from_csv] == [q.as_dict() for q in from_jsonl] == [
        q.as_dict() for q in hub_queries()["validation"]]
    assert isinstance(from_jsonl[0].date, tuple) and from_jsonl[0].date[0] == hub_queries()["validation"][0].date[0]
    (tmp_path / "v.json").write_text(json.dumps(rows))
    assert [q.as_dict() for q in load_hub_queries(tmp_path / "v.json", "validation")] == [
        q.as_dict() for q in from_jsonl]


@pytest.mark.parametrize("field, value, expected", [
    ("date", "2022-03-16", "a list of 'YYYY-MM-DD'"),
    ("date", ["2022-03-16 00:00:00", "2022-03-17 00:00:00", "2022-03-18 00:00:00"], "a list of 'YYYY-MM-DD'"),
    ("date", [20220316, 20220317, 20220318], "a list of 'YYYY-MM-DD'"),
    ("date", ["2022-03-16"], "expected 3"),
    ("local_constraint", "{'cuisine': 5}", "a dict"),
    ("local_constraint", "{'smoking': True}", "a dict"),
    ("local_constraint", "not a literal", "a dict"),
    ("days", "three", "an integer"),
    ("people_number", 2.5, "an integer"),
    ("budget", "lots", "a number"),
    ("level", "extreme", "one of"),
])
def test_a_wrong_type_is_one_line_naming_row_and_field(tmp_path, field, value, expected):
    rows = [record(q) for q in hub_queries()["validation"][:3]]
    rows[1][field] = value
    path = tmp_path / "validation.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(HubFormatError) as err:
        load_hub_queries(path, "validation")
    msg = str(err.value)
    assert "\n" not in msg and "row 1" in msg and repr(field) in msg and expected in msg, msg


def test_missing_files_and_columns(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(HubFileError, match="no test.csv"):
        load_hub_queries(tmp_path / "empty", "test")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_hub_queries(tmp_path / "nowhere", "test")
    rows = [record(q) for q in hub_queries()["validation"][:2]]
    del rows[0]["budget"]
    (tmp_path / "v.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(HubFormatError, match=r"row 0: missing column\(s\) \['budget'\]"):
        load_hub_queries(tmp_path / "v.jsonl", "validation")
    with pytest.raises(HubFormatError, match="unknown hub split"):
        load_hub_queries(tmp_path / "v.jsonl", "dev")


def test_train_annotated_plans_are_plans_the_env_scores(tmp_path):
    hub = write_hub_dir(tmp_path / "hub", with_reference=False)
    plans = annotated_plans(hub, "train")
    queries, _ = load_split(hub, "train")
    assert sorted(plans) == [q.id for q in queries]
    index, _ = default_queries(0)
    ev = TravelEvaluator(index)
    assert all(ev.evaluate(q, plans[q.id]).final_pass for q in queries)
    # the hub's other form: [query record, [day records]]
    rows = [{**record(q), "annotated_plan": repr([q.as_dict(), plans[q.id]])} for q in queries]
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert annotated_plans(tmp_path / "train.jsonl", "train") == plans


def test_split_names():
    assert parse_split_name("test") == ("test", None)
    assert parse_split_name("validation:re-split:train") == ("validation", "train")
    with pytest.raises(HubFormatError, match="re-split"):
        parse_split_name("dev")
    with pytest.raises(HubFormatError):
        parse_split_name("validation:re-split:dev")


def _config(hub, queries_split="validation"):
    return {"name": "travel", "travel": {"database_dir": "reference_information", "queries_source": str(hub),
                                         "queries_split": queries_split}}


def test_one_meaning_of_a_split_name(tmp_path):
    hub = write_hub_dir(tmp_path / "hub")
    n_test = SIZES["test"]
    # gym.make and envs.make: "test" is the hub's test split, whatever the config re-splits
    g = gym.make(GYM_ID, database_dir="reference_information", queries_source=hub, split="test").unwrapped
    e = envs.make(_config(hub), "test")
    assert len(g.query_ids) == len(e.query_ids) == n_test
    assert [g.get_query(i).query for i in g.query_ids] == [e.get_query(i).query for i in e.query_ids] == [
        q.query for q in hub_queries()["test"]]
    # a re-split has its own name, the same in both
    parts = make_split(load_hub_queries(hub, "validation"), 0)
    for part in ("train", "validation", "test"):
        name = f"validation:re-split:{part}"
        g = gym.make(GYM_ID, database_dir="reference_information", queries_source=hub, split=name).unwrapped
        assert g.query_ids == envs.make(_config(hub), name).query_ids == parts[part]
    assert run_split_names(_config(hub)["travel"]) == {p: f"validation:re-split:{p}" for p in parts}
    assert split_ids(_config(hub)["travel"]) == {f"validation:re-split:{p}": v for p, v in parts.items()}
    # queries_split: hub -> the run's parts are the hub's splits
    ids = split_ids(_config(hub, "hub")["travel"])
    assert {k: len(v) for k, v in ids.items()} == SIZES
    train, held_out = envs.make_train_and_held_out(_config(hub, "hub"))
    assert len(train.query_ids) == SIZES["train"] and len(held_out.query_ids) == sum(SIZES.values())
    with pytest.raises(HubFormatError, match="unknown split 'dev'"):
        envs.make(_config(hub), "dev")
    with pytest.raises(ValueError, match="queries_split"):
        envs.make(_config(hub, "everything"), "test")
