"""The main job on the real-benchmark path (``env.suite=full env.backend=hf``), offline.

The same ``train/rltf.py`` recipe a GPU user launches, with every hub model id pointed at the tiny
random checkpoints of tests/hf_tiny.py and every hub dataset at the tiny stand-ins of
tests/envs/openagi/test_hf_data.py: the 185-task suite is built once from those sources (German targets by the
Machine Translation expert), the embedded planner is fine-tuned, trained with RLTF against the hf
experts and the paper's metrics, and scored on the full suite's persisted test split.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub / datasets
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import contextlib
import json
from pathlib import Path

import pytest
import torch
from test_hf_data import HAS_DIFFUSERS, write_sources

from envs.openagi.hf.suite import full_suite_dir
from envs.openagi.metrics import METRICS
from envs.openagi.plans import check_plan, format_plan, parse_plan
from envs.openagi.suite import SUITE_LIMITS, task_specs
from envs.openagi.tools import signature_registry
from rltf.config.loading import REPO_ROOT, load_config
from tests import hf_tiny
from train.rltf import run

SIDE = 24  # max image side: tiny images keep the tiny experts fast
SCHEMAS = ("finetuned", "rltf", "reference")


def _hf_settings(tools: dict[str, str], metrics: dict[str, str]) -> dict:
    """``env.hf``: every tool and metric model a local tiny checkpoint, CPU, short generations."""
    return {"model_ids": tools, "metric_models": metrics, "device": "cpu", "local_files_only": True,
            "max_new_tokens": 4,
            "generate_kwargs": {t: {"num_inference_steps": 2} for t in hf_tiny.DIFFUSERS_TOOLS if t in tools}}


def _args(tmp_path: Path, hf: dict, sources: dict) -> list[str]:
    return [
        "env.suite=full", "env.backend=hf",
        f"env.hf={json.dumps(hf)}",  # JSON is YAML: the override parses as a mapping
        f"env.datasets={json.dumps(sources)}",
        f"env.data_dir={tmp_path / 'data'}", f"env.max_image_side={SIDE}",
        "env.n_samples=2", "env.samples_per_step=2",
        "planner.embedded.d_model=32", "planner.embedded.d_ff=64", "planner.embedded.num_layers=1",
        "planner.embedded.num_heads=2", f"planner.embedded.dir={tmp_path / 'embedded'}",
        "sft.epochs=1", "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=1",
        "eval.num_beams=2", "eval.splits=[test]", f"eval.schemas=[{','.join(SCHEMAS)}]",
        "logging.progress_bar=false", f"output_dir={tmp_path / 'runs'}", "run_name=full-hf",
    ]


@pytest.mark.slow
def test_main_job_on_the_full_suite_with_hf_experts(tmp_path, capsys):
    old_threads, old_metrics = torch.get_num_threads(), dict(METRICS)
    torch.set_num_threads(1)  # tiny models gain nothing from threads; on a busy box they spin-wait
    try:
        # without diffusers the two diffusion tools keep their hub ids: loading them fails offline,
        # which fails those samples (score 0), not the run
        tools, metrics = hf_tiny.build_all(tmp_path / "models", with_diffusers=HAS_DIFFUSERS)
        sources = write_sources(tmp_path / "hub")
        hf = _hf_settings(tools, metrics)
        cfg = load_config(_args(tmp_path, hf, sources))
        # ... and the trainer warns, per step, of each expert that failed on every call (rltf/rl/trainer.py)
        missing = pytest.warns(RuntimeWarning, match=r"failed on every call .* with diffusers, which is not installed")
        with contextlib.nullcontext() if HAS_DIFFUSERS else missing:
            summary = run(cfg)
    finally:
        torch.set_num_threads(old_threads)
    # the hf metrics live in the run's envs: the process-wide offline table is what it was
    assert METRICS == old_metrics

    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("held-out overall: finetuned=") and " rltf=" in out[-1], out[-1]

    # the suite was built from the local stand-ins into env.data_dir (not the hub, not the lite zoo)
    built = full_suite_dir(tmp_path / "data", 2, 0, sources, SIDE)
    manifest = json.loads((built / "manifest.json").read_text())
    assert len(manifest["tasks"]) == 185 and manifest["sources"]["squad"]["path"] == sources["squad"]["path"]

    run_dir = tmp_path / "runs" / "full-hf"
    for name in ("config.yaml", "results.md", "results.json", "rltf_history.json", "sft/rltf_planner.json"):
        assert (run_dir / name).exists(), name
    results = json.loads((run_dir / "results.json").read_text())
    table = results["table"]
    assert table == summary["table"]
    assert set(table["rows"]) == set(SCHEMAS)
    md = (run_dir / "results.md").read_text()
    assert all(f"| {s} |" in md or f"| {s} (" in md for s in SCHEMAS), md  # rltf (best validation, step N)

    # held out: exactly the full suite's persisted test split, every task scored in [0, 1]
    persisted = json.loads((REPO_ROOT / "envs" / "openagi" / "splits" / "full.json").read_text())
    test_ids = {t["id"] for t in persisted["test"]}
    assert len(test_ids) == 20 and table["n_tasks"]["overall"] == 20
    for schema in SCHEMAS:
        scores = {int(k): v for k, v in results["scores"][schema].items()}
        assert set(scores) == test_ids, schema
        assert all(0.0 <= v <= 1.0 for v in scores.values()), (schema, scores)
        row = table["rows"][schema]
        assert all(0.0 <= row[c] <= 1.0 for c in table["columns"]), (schema, row)
        assert row["overall"] == pytest.approx(sum(scores.values()) / len(scores))

    # the reference row ran the grammar's reference plans; the planner's plans are valid on the
    # full grammar (constrained decoding under the full suite's limits)
    specs = task_specs("full")
    assert {int(k): v for k, v in results["plans"]["reference"].items()} == {
        i: format_plan(specs[i].reference_plan) for i in test_ids}
    registry = signature_registry()
    for schema in ("finetuned", "rltf"):
        for tid, text in results["plans"][schema].items():
            spec = specs[int(tid)]
            check_plan(parse_plan(text, registry), registry, spec.inputs, spec.target, SUITE_LIMITS["full"])

    # RLTF trained on the full suite's train tasks and evaluated on validation every step
    hist = json.loads((run_dir / "rltf_history.json").read_text())
    assert [h["step"] for h in hist] == [1, 2]
    assert all(0.0 <= h["eval/validation/score"] <= 1.0 for h in hist)
