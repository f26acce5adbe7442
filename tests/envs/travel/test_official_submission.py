"""The official submission file (issue #51 item 3): one ``{"idx", "query", "plan"}`` line per query
in the split's order, idx from 1, plans as day records (text parsed as the evaluator parses it, a
plan that does not parse written null), written atomically; read back, it scores as the plans did."""

from __future__ import annotations

import json

import pytest

from envs.travel.evaluator import TravelEvaluator
from envs.travel.official_metrics import official_metrics
from envs.travel.queries import default_queries
from envs.travel.solver import TravelSolver
from envs.travel.submission import SubmissionError, read_submission, write_submission

IX, QUERIES = default_queries(0)


@pytest.fixture(scope="module")
def four():
    qs = QUERIES[:4]
    solver = TravelSolver(IX)
    plans = [solver.solve(q).plan for q in qs]
    # day records, their text in a fenced block, text that is no plan, no plan at all
    fenced = f"Here is the plan:\n```json\n{json.dumps(plans[1])}\n```"
    return qs, [plans[0], fenced, "I cannot plan this.", None], plans


def test_written_read_back_and_scored(tmp_path, four):
    qs, given, plans = four
    path = write_submission(tmp_path / "out" / "test_submission.jsonl", qs, given)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and all(json.loads(line).keys() == {"idx", "query", "plan"} for line in lines)
    rows = read_submission(path)
    assert [r["idx"] for r in rows] == [1, 2, 3, 4] and [r["query"] for r in rows] == [q.query for q in qs]
    assert [r["plan"] for r in rows] == [plans[0], plans[1], None, None]
    ev = TravelEvaluator(IX, official_quirks=True)
    got = official_metrics(qs, [ev.evaluate(q, r) for q, r in zip(qs, rows)])  # records scored as eval.py reads them
    assert got["delivery_rate"] == 0.5 and got["final_pass"] == 0.5
    assert [p.name for p in path.parent.iterdir()] == ["test_submission.jsonl"]  # no temporary file left


def test_written_atomically_and_refusals_leave_the_old_file(tmp_path, four):
    qs, given, _ = four
    path = write_submission(tmp_path / "s.jsonl", qs, given)
    before = path.read_bytes()
    with pytest.raises(SubmissionError, match="4 queries but 3 plans"):
        write_submission(path, qs, given[:3])
    with pytest.raises(SubmissionError, match="split 'test' has 1000 queries in the official evaluation, got 4"):
        write_submission(path, qs, given, split="test")
    with pytest.raises(SubmissionError, match="split 'dev' is not a hub split"):
        write_submission(path, qs, given, split="dev")
    assert path.read_bytes() == before
    write_submission(path, qs[:1], given[:1])  # a new file replaces the old one whole
    assert len(read_submission(path)) == 1


def test_a_damaged_file_is_one_line_naming_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"idx": 1, "query": "q", "plan": null}\n{"idx": 2, "plan": []}\n', encoding="utf-8")
    with pytest.raises(SubmissionError, match=r"bad.jsonl line 2 is not a record with idx, query and plan"):
        read_submission(path)
    path.write_text("[" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(SubmissionError, match="bad.jsonl line 1 is not JSON"):
        read_submission(path)
