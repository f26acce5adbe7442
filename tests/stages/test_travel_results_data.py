"""Travel results tables name the data they were computed on (issue #36): ``results.md`` / ``.json`` of
the flat job's report, ``flow_results.md`` / ``.json`` of the flow job's and ``flow_eval.md`` / ``.json``
of the flow evaluation each hold one line under the title and a ``data`` dict: the generated sandbox
and its seed, or the real tables' folder and fingerprint; the flights; the queries and their split;
the evaluated splits. The smallest runs: no planner (the reference and solver rows; the flow
evaluation's flat method on a scripted backend)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.travel.provenance import data_line, shown_path
from rltf.config.loading import load_config
from rltf.flows import ScriptedBackend
from rltf.flows.evaluate import load_flow_config
from rltf.flows.evaluation import evaluate_flows, held_out_ids, solver_row
from rltf.stages import flow_job
from rltf.stages import plan_job as stages

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = ["env.travel.days=[3]", "env.travel.levels=[easy]", "logging.progress_bar=false"]


def _real(db) -> list[str]:
    return [f"env.travel.database_dir={db}", "env.travel.queries_source=generated"]


def _data_line_under_title(md: str, data: dict) -> None:
    lines = md.splitlines()
    assert lines[0].startswith("### ") and lines[2] == data_line(data) and lines[2].startswith("data: ")


def _flat_and_flow_reports(tmp_path, extra: list[str]) -> tuple[dict, dict]:
    """The flat job's report (reference and solver rows) and the flow job's (the solver's row)."""
    cfg = load_config(["config=configs/travel-flat.yaml", f"output_dir={tmp_path}", "run_name=flat",
                       "eval.splits=[test]", *SMALL, *extra])
    run = stages.start(cfg)
    envs = stages.build_envs(run)
    tasks = envs.tasks(cfg.eval.splits)[:2]
    results = stages.evaluate(run, ["reference", "oracle"], None, envs, tasks, log=False)
    flat = stages.report(run, results, tasks, title="held-out (test) tasks")
    _data_line_under_title((run.run_dir / "results.md").read_text(), flat["data"])
    assert json.loads((run.run_dir / "results.json").read_text())["data"] == flat["data"]

    cfg = load_config(["config=configs/travel-mtp.yaml", f"output_dir={tmp_path}", "run_name=mtp", "flow.limit=1",
                       *SMALL, *extra])
    run = stages.start(cfg)
    envs = stages.build_envs(run)
    ids = held_out_ids(cfg, cfg.flow, envs.held_out)
    row, records = solver_row(envs.held_out, ids)
    flow = flow_job.report(run, {"solver": row}, {"solver": records}, ids, "mtp", None)
    _data_line_under_title((run.run_dir / "flow_results.md").read_text(), flow["data"])
    assert json.loads((run.run_dir / "flow_results.json").read_text())["data"] == flow["data"]
    return flat["data"], flow["data"]


def _flow_eval(tmp_path, extra: list[str]) -> dict:
    """``python -m rltf.flows.evaluate``'s table: the flat method answered ``?`` by a scripted backend."""
    cfg, flow = load_flow_config(["config=configs/travel-mtp.yaml", f"output_dir={tmp_path}", "run_name=ev",
                                  "flow.methods=[flat]", "flow.limit=1", "flow.trace_queries=0", *SMALL, *extra])
    summary = evaluate_flows(cfg, flow, backend=ScriptedBackend(lambda messages: "?"), log=lambda _: None)
    _data_line_under_title((tmp_path / "ev" / "flow_eval.md").read_text(), summary["data"])
    assert json.loads((tmp_path / "ev" / "flow_eval.json").read_text())["data"] == summary["data"]
    return summary["data"]


def test_results_tables_name_the_generated_sandbox(tmp_path):
    flat, flow = _flat_and_flow_reports(tmp_path, [])
    evaluated = _flow_eval(tmp_path, [])
    for data in (flat, flow, evaluated):
        assert data["database"] == "generated sandbox" and data["seed"] == 0 and data["path"] is None
        assert data["split"] == "envs/travel/splits/seed0.json" and data["evaluated"] == ["test"]


def test_results_tables_name_the_real_tables(tmp_path, real_travel_db):
    flat, flow = _flat_and_flow_reports(tmp_path, _real(real_travel_db))
    evaluated = _flow_eval(tmp_path, _real(real_travel_db))
    assert flat == flow == evaluated
    assert flat["database"] == "real tables" and flat["path"] == shown_path(real_travel_db)
    assert not Path(flat["path"]).is_absolute()  # no machine's path in a results file (#51 item 6)
    assert len(flat["fingerprint"]) == 16 and flat["flights"] == "generated (seed 0)"
    assert flat["queries"] == "generated over the tables (seed 0)" and flat["evaluated"] == ["test"]
    assert flat["split"] == "envs/travel/splits/real-seed0.json"


def test_openagi_results_have_no_data_line(tmp_path):
    cfg = load_config([f"output_dir={tmp_path}", "run_name=lite", "eval.splits=[test]", "logging.progress_bar=false"])
    run = stages.start(cfg)
    envs = stages.build_envs(run)
    tasks = envs.tasks(cfg.eval.splits)[:2]
    summary = stages.report(run, stages.evaluate(run, ["reference"], None, envs, tasks, log=False), tasks, title="t")
    assert "data" not in summary and "data: " not in (run.run_dir / "results.md").read_text()
