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
