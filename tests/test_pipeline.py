"""The main job end to end on a tiny configuration: every stage, the table, the plot, resume."""

import json

import pytest

from rltf.config import load_config
from rltf.pipeline import run

TINY = ["planner.embedded.d_model=32", "planner.embedded.d_ff=64", "planner.embedded.num_layers=1",
        "planner.embedded.num_heads=2", "env.n_samples=2", "env.samples_per_step=2", "sft.epochs=2",
        "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=1",
        "rltf.checkpoint_every=1", "eval.num_beams=2", "eval.splits=[test]", "logging.progress_bar=false",
        "eval.schemas=[zero,few,finetuned,rltf,reference]"]


@pytest.mark.slow
def test_main_job_on_a_tiny_config(tmp_path, capsys):
    args = [f"output_dir={tmp_path}", "run_name=tiny", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY]
    summary = run(load_config(args))
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("held-out overall: zero=") and " rltf=" in out[-1]
    run_dir = tmp_path / "tiny"
    for name in ("config.yaml", "results.md", "results.json", "rewards.png", "rltf_history.json",
                 "eval_initial.json", "sft/rltf_planner.json", "rltf/latest"):
        assert (run_dir / name).exists(), name
    table = json.loads((run_dir / "results.json").read_text())["table"]
    assert set(table["rows"]) == {"zero", "few", "finetuned", "rltf", "reference"}
    assert "overall" in table["columns"] and table["n_tasks"]["overall"] == 10
    hist = json.loads((run_dir / "rltf_history.json").read_text())
    assert [h["step"] for h in hist] == [1, 2] and "eval/validation/score" in hist[0]
    assert "| schema |" in (run_dir / "results.md").read_text()
    # resume: the finished run is picked up from its checkpoints and gives the same table
    again = run(load_config([*args, "resume=true"]))
    assert again["table"] == summary["table"]


@pytest.mark.slow
def test_sft_entry_point_writes_a_reloadable_planner(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    from rltf.planner import Planner

    spec = importlib.util.spec_from_file_location("sft_entry", Path(__file__).resolve().parents[1] / "train" / "sft.py")
    sft = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sft)
    sft.main([f"output_dir={tmp_path}", "run_name=sft", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY])
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("held-out (test) finetuned=")
    reloaded = Planner.from_pretrained(tmp_path / "sft" / "sft")
    assert reloaded.is_encoder_decoder and (tmp_path / "sft" / "sft_history.json").exists()
