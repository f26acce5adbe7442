"""benchmarks/travel_real_table.py: per run and mean ± std over seeds, from the runs' own files."""

import json

import numpy as np
import pytest

from benchmarks import travel_real_table as trt

DATA = {"database": "real tables", "fingerprint": "abc", "flights": "generated (seed 0)",
        "queries": "generated over the tables (seed 0)", "split": "real-seed0.json", "evaluated": ["test"]}


def _row(x):
    return {c: x for c in trt.COLUMNS}


def _flat(folder, finetuned, rltf, data=DATA):
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"table": {"columns": list(trt.COLUMNS), "rows": {
        "finetuned": _row(finetuned), "rltf": _row(rltf), "solver": _row(1.0)}}, "data": data}))


def _mtp(folder, finetuned, rltf):
    folder.mkdir(parents=True)
    (folder / "flow_results.json").write_text(json.dumps({"method": "mtp", "data": DATA, "table": {
        "finetuned": {**_row(finetuned), "tokens/query": 5.0}, "rltf": _row(rltf), "solver": _row(1.0)}}))


def test_means_and_spreads_per_planner_and_schema(tmp_path):
    for s, (f, r) in enumerate([(0.1, 0.2), (0.3, 0.5), (0.2, 0.2)]):
        _flat(tmp_path / f"flat-seed{s}", f, r)
    _mtp(tmp_path / "mtp-seed0", 0.7, 0.8)
    table = trt.collect(tmp_path)
    rows = {r["method"]: r for r in table["rows"]}
    mean = rows["**flat · rltf: mean over 3 seed(s)**"]
    assert mean["final pass"] == pytest.approx(0.3)
    assert rows["flat · rltf: std (ddof=1)"]["reward"] == pytest.approx(np.std([0.2, 0.5, 0.2], ddof=1))
    assert rows["**mtp · finetuned: mean over 1 seed(s)**"]["delivery"] == pytest.approx(0.7)
    assert not any("solver" in m for m in rows) and table["data"] == DATA
    assert "mtp · finetuned: std (ddof=1)" not in rows  # one seed: no spread
    assert "| flat · finetuned · flat-seed1 |" in trt.markdown(table)


def test_runs_over_other_data_or_no_runs_are_refused(tmp_path, capsys):
    _flat(tmp_path / "a", 0.1, 0.2)
    _flat(tmp_path / "b", 0.1, 0.2, data={**DATA, "fingerprint": "other"})
    with pytest.raises(SystemExit, match="its data differs"):
        trt.collect(tmp_path)
    with pytest.raises(SystemExit) as e:
        trt.main([str(tmp_path / "missing")])
    assert e.value.code == 2 and "bad value for runs" in capsys.readouterr().err


def test_the_planner_model_and_the_number_of_judged_queries_label_the_rows(tmp_path):
    _flat(tmp_path / "flat-seed0", 0.1, 0.2)
    d = json.loads((tmp_path / "flat-seed0" / "results.json").read_text())
    d["scores"] = {"finetuned": {"1": 0.5, "7": 0.25, "9": 1.0}, "rltf": {"1": 0.5, "7": 0.25, "9": 1.0}}
    (tmp_path / "flat-seed0" / "results.json").write_text(json.dumps(d))
    (tmp_path / "flat-seed0" / "config.yaml").write_text("planner:\n  model: smollm2\n  arch: causal\n")
    _mtp(tmp_path / "mtp-seed0", 0.7, 0.8)
    d = json.loads((tmp_path / "mtp-seed0" / "flow_results.json").read_text())
    d["results"] = {s: [{"query": q, "reward": 1.0, "final_pass": True} for q in (1, 10, 18, 20)]
                    for s in ("finetuned", "rltf")}  # a flow's per-query results
    (tmp_path / "mtp-seed0" / "flow_results.json").write_text(json.dumps(d))
    (tmp_path / "mtp-seed0" / "config.yaml").write_text("planner:\n  model: embedded\n")
    table = trt.collect(tmp_path)
    rows = {r["method"]: r for r in table["rows"]}
    assert rows["flat · smollm2 · rltf · flat-seed0"]["queries"] == 3
    assert rows["**flat · smollm2 · rltf: mean over 1 seed(s)**"]["queries"] == 3
    assert rows["mtp · embedded · finetuned · mtp-seed0"]["queries"] == 4
    assert table["data"] == DATA  # the count is per row, not part of the data every run must share
    assert "| flat · smollm2 · finetuned · flat-seed0 | " in trt.markdown(table)


def test_planners_judged_on_different_queries_are_compared_on_the_shared_ones(tmp_path):
    for s, base in enumerate((0.25, 0.5)):  # the embedded planner: 4 queries; query 9 passes on seed 1 only
        _flat(tmp_path / f"flat-seed{s}", 0.1, 0.2)
        d = json.loads((tmp_path / f"flat-seed{s}" / "results.json").read_text())
        scores = {"1": base, "7": 0.5, "9": 1.0 if s else 0.75, "11": 1.0}
        d["scores"] = {"finetuned": scores, "rltf": scores}
        (tmp_path / f"flat-seed{s}" / "results.json").write_text(json.dumps(d))
    _flat(tmp_path / "flat-smollm2-seed0", 0.1, 0.2)  # SmolLM2 on queries 1 and 9 of them
    d = json.loads((tmp_path / "flat-smollm2-seed0" / "results.json").read_text())
    d["scores"] = {"finetuned": {"1": 0.5, "9": 1.0}, "rltf": {"1": 1.0, "9": 1.0}}
    (tmp_path / "flat-smollm2-seed0" / "results.json").write_text(json.dumps(d))
    (tmp_path / "flat-smollm2-seed0" / "config.yaml").write_text("planner:\n  model: smollm2\n")
    same = {(r["planner"], r["schema"]): r for r in trt.collect(tmp_path)["same_queries"]}
    emb = same[("flat", "rltf")]
    assert emb["queries"] == 2 and emb["seeds"] == 2
    assert emb["reward"] == pytest.approx(np.mean([(0.25 + 0.75) / 2, (0.5 + 1.0) / 2]))
    assert emb["final pass"] == pytest.approx(0.25) and emb["final pass std"] == pytest.approx(np.std([0, 0.5], ddof=1))
    smol = same[("flat · smollm2", "rltf")]
    assert (smol["reward"], smol["final pass"], smol["final pass std"]) == (1.0, 1.0, None)
    assert "| flat · smollm2 · finetuned | 1 | 2 | 0.7500 | 0.5000 |" in trt.markdown(trt.collect(tmp_path))
