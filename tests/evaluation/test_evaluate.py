"""``train/evaluate.py``: the planner ``planner.model`` names (a finished run's folder: the planner
it reported as rltf, which survives checkpoint rotation), rows named for the planner evaluated,
and the evaluation's files beside that planner, never in a training run's own folder
(:mod:`rltf.stages.evaluated_planner`). One tiny main job (embedded T5 from scratch, 3 RLTF steps,
a checkpoint every step, ``rltf.save_total_limit=1``) is evaluated several ways."""

import json
import re

import pytest

import envs
from rltf.config.loading import load_config
from rltf.planners.hf_models import PlannerError
from rltf.run.checkpoint import checkpoints
from rltf.run.folders import RunFolderError
from rltf.stages.evaluated_planner import evaluated_planner
from tests.stages.test_main_job import _run_printing
from train.evaluate import main as evaluate_main
from train.rltf import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "env.n_samples=2", "env.samples_per_step=2",
        "sft.epochs=2", "rltf.steps=3", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=1",
        "rltf.checkpoint_every=1", "rltf.save_total_limit=1", "eval.num_beams=2", "eval.splits=[test]",
        "logging.progress_bar=false", "eval.schemas=[finetuned,rltf,reference]"]
TRAINING_FILES = ("config.yaml", "results.md", "results.json", "rltf_history.json", "sft_history.json", "rltf/latest")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished tiny main job: ``(args, summary, run folder)``."""
    root = tmp_path_factory.mktemp("evaluate")
    args = [f"output_dir={root}", "run_name=tiny", f"planner.embedded.dir={root / 'embedded'}", *TINY]
    summary, _ = _run_printing(run, load_config(args))
    return args, summary, root / "tiny"


def _training_files(run_dir):
    return {name: (run_dir / name).read_bytes() for name in TRAINING_FILES}


def test_a_run_folder_evaluates_the_planner_the_run_reported_beside_it(finished):
    """README / docs/evaluation.md: ``planner.model=checkpoints/default`` is the run's rltf planner, whose checkpoint
    rotation keeps; one ``planner`` row for finetuned + rltf, the main job's rltf numbers; the
    files in ``<planner>/eval/``, the training run's files untouched."""
    args, summary, run_dir = finished
    before, listing = _training_files(run_dir), sorted(p.name for p in run_dir.iterdir())
    evaluated, out = _run_printing(evaluate_main, [*args, f"planner.model={run_dir}"])

    selected = summary["rltf_selection"]["step"]
    planner = run_dir / "rltf" / f"checkpoint-{selected}" / "planner"
    assert [s for s, _ in checkpoints(run_dir / "rltf")] == sorted({selected, 3})  # rotation kept it
    assert evaluated["planner"]["model"] == str(planner) and evaluated["planner"]["run"] == str(run_dir)
    assert evaluated["planner"]["selection"]["step"] == selected
    table, trained = evaluated["table"], summary["table"]
    assert list(table["rows"]) == ["planner", "reference"]  # finetuned and rltf: the same planner, one row
    assert table["rows"]["planner"] == trained["rows"]["rltf"]
    assert table["rows"]["reference"] == trained["rows"]["reference"]
    assert table["intervals"]["planner"] == trained["intervals"]["rltf"]
    assert evaluated["plans"]["planner"] == summary["plans"]["rltf"]

    md = (planner / "eval" / "eval.md").read_text()
    assert f"| planner ({planner}) |" in md and "| reference |" in md
    assert "| rltf" not in md and "| finetuned" not in md
    assert json.loads((planner / "eval" / "eval.json").read_text())["table"] == table
    assert out[-2].startswith(f"eval.md / eval.json written to: {planner / 'eval'}")
    assert out[-1] == f"held-out overall: planner={table['rows']['planner']['overall']:.4f}"
    assert _training_files(run_dir) == before and sorted(p.name for p in run_dir.iterdir()) == listing


def test_a_planner_folder_gets_rows_named_after_it(finished):
    """``planner.model=<run>/sft``: every schema asked for is computed for that planner, its rows
    named after the folder (zero / few: n/a for a planner without language pretraining); the
    fine-tuned planner gets the main job's finetuned row."""
    args, summary, run_dir = finished
    sft = run_dir / "sft"
    before = _training_files(run_dir)
    evaluated, out = _run_printing(evaluate_main, [*args, f"planner.model={sft}",
                                                   "eval.schemas=[zero,few,finetuned,reference]"])
    table = evaluated["table"]
    assert list(table["rows"]) == ["zero", "few", "planner", "reference"]
    assert table["rows"]["planner"] == summary["table"]["rows"]["finetuned"]
    assert evaluated["planner"] == {"model": str(sft), "run": None, "selection": None}
    md = (sft / "eval" / "eval.md").read_text()
    for row in (f"zero-shot ({sft})", f"few-shot ({sft})", f"planner ({sft})", "reference"):
        assert f"| {row} |" in md, row
    assert out[-1].startswith("held-out overall: zero=n/a few=n/a planner=")
    assert _training_files(run_dir) == before


def test_a_named_planner_is_evaluated_into_its_own_run_folder_on_validation_and_test(finished):
    """``embedded`` (a hub id likewise): ``<output_dir>/<run_name>/eval.json``, on the union of the
    validation and test tasks, each row with its bootstrap interval."""
    args, _, run_dir = finished
    summary, out = _run_printing(evaluate_main, [*args, "run_name=ev", "eval.splits=[validation,test]",
                                                 "eval.schemas=[rltf,reference]"])
    split = envs.split_ids(load_config(args).env)
    held_out = {*split["validation"], *split["test"]}
    assert len(split["validation"]) > 0 and len(split["test"]) > 0 and not set(split["validation"]) & set(split["test"])
    table = summary["table"]
    assert table["n_tasks"]["overall"] == len(held_out) == len(split["validation"]) + len(split["test"])
    for row in ("planner", "reference"):
        assert {int(k) for k in summary["scores"][row]} == held_out
        lo, hi = table["intervals"][row]
        assert lo <= table["rows"][row]["overall"] <= hi
    folder = run_dir.parent / "ev"
    assert json.loads((folder / "eval.json").read_text())["table"]["intervals"] == table["intervals"]
    md = (folder / "eval.md").read_text()
    assert "embedded on validation+test" in md and "| planner (embedded) |" in md
    assert not (folder / "config.yaml").exists()
    assert out[-1] == f"held-out overall: planner={table['rows']['planner']['overall']:.4f}"


def test_a_named_planner_is_never_evaluated_into_a_training_runs_folder(finished):
    args, _, run_dir = finished  # run_name=tiny: the training run
    before = _training_files(run_dir)
    refused = rf"{re.escape(str(run_dir))} holds a training run \(rltf, sft, .*run_name="
    with pytest.raises(RunFolderError, match=refused):
        evaluate_main([*args, "planner.model=embedded"])
    assert _training_files(run_dir) == before and not (run_dir / "eval.json").exists()


# ------------------------------------------------------------------ planner.model resolved (files only)
def test_a_run_folder_that_reports_no_planner_is_refused_naming_its_planner_folders(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "sft").mkdir(parents=True)
    (run_dir / "config.yaml").write_text("seed: 0\n")
    unfinished = rf"without results\.json \(not finished\?\).*: {re.escape(str(run_dir / 'sft'))}$"
    with pytest.raises(PlannerError, match=unfinished):
        evaluated_planner(str(run_dir), tmp_path / "elsewhere")
    (run_dir / "results.json").write_text(json.dumps({"table": {}}))
    with pytest.raises(PlannerError, match=r"reports no RLTF planner \(no rltf_selection"):
        evaluated_planner(str(run_dir), tmp_path / "elsewhere")
    (run_dir / "results.json").write_text(json.dumps({"rltf_selection": {"select": "best_validation", "step": 7}}))
    with pytest.raises(PlannerError, match=r"step 7, but .*checkpoint-7/planner is missing"):
        evaluated_planner(str(run_dir), tmp_path / "elsewhere")
    (run_dir / "rltf" / "checkpoint-7" / "planner").mkdir(parents=True)
    (run_dir / "rltf" / "checkpoint-7" / "planner" / "config.json").write_text("{}")
    found = evaluated_planner(str(run_dir), tmp_path / "elsewhere")
    assert found.model == str(run_dir / "rltf" / "checkpoint-7" / "planner") and found.run == str(run_dir)
    assert found.out_dir == run_dir / "rltf" / "checkpoint-7" / "planner" / "eval"


def test_where_each_kind_of_planner_is_evaluated_to(tmp_path):
    planner = tmp_path / "my-planner"
    planner.mkdir()
    (planner / "config.json").write_text("{}")
    (planner / "config.yaml").write_text("a model's own file\n")  # a model folder, not a run folder
    assert evaluated_planner(str(planner), tmp_path / "out" / "default").out_dir == planner / "eval"
    hub = evaluated_planner("google/flan-t5-small", tmp_path / "out" / "flan")
    assert (hub.model, hub.out_dir, hub.run) == ("google/flan-t5-small", tmp_path / "out" / "flan", None)
    assert hub.row_labels()["planner"] == "planner (google/flan-t5-small)"
