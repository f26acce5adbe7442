"""``planner.model`` resolved once (:mod:`rltf.planners.source`): each kind on tiny local folders
built here (no download, no conversion), what the loader makes of it, and the one-line errors."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path

import pytest

from rltf.config.loading import LoraSettings, PlannerSettings, load_config
from rltf.planners import named
from rltf.planners.hf_models import PlannerError
from rltf.planners.loading import load_planner
from rltf.planners.source import (
    CHECKPOINT_PLANNER,
    EMBEDDED,
    RUN_RESULTS,
    PlannerSource,
    SourceKind,
    resolve_planner_source,
)
from rltf.planners.tokenizer import train_plan_tokenizer
from rltf.run.checkpoint import MODEL_DIR
from rltf.stages.describe import describe_run
from tests.tiny_models import tiny_t5

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["Given noisy blurry image, how to return the class label in English step by step?",
         "Image Denoising, Image Deblurring, Image Classification"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """A tiny T5 model folder, a LoRA adapter folder on it, and a finished run folder reporting each."""
    root = tmp_path_factory.mktemp("sources")
    tok = train_plan_tokenizer(TEXTS, vocab_size=300)
    tiny_t5(tok, d_model=16, layers=1).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    lora = load_planner(PlannerSettings(model=str(root / "model"), lora=LoraSettings(enabled=True, r=2)))
    lora.save_pretrained(root / "adapter")
    found = {"model": root / "model", "adapter": root / "adapter"}
    for kind in ("model", "adapter"):
        run = root / f"run-{kind}"
        shutil.copytree(found[kind], run / "rltf" / "checkpoint-2" / CHECKPOINT_PLANNER)
        (run / "sft").mkdir()
        (run / "config.yaml").write_text("seed: 0\n")
        (run / RUN_RESULTS).write_text(json.dumps(
            {"rltf_selection": {"select": "best_validation", "step": 2, "validation": [[0, 0.5], [2, 0.7]]}}))
        found[f"run-{kind}"] = run
    return found


# ------------------------------------------------------------------------------ each kind
def test_embedded():
    source = resolve_planner_source("embedded")
    assert (source.kind, source.value, source.name, source.location, source.folder) == (
        SourceKind.EMBEDDED, EMBEDDED, "embedded", None, None)
    with pytest.raises(PlannerError, match="built from planner.embedded"):
        source.load_path()


def test_a_named_model_is_fetched_on_load_never_on_resolve(folders, monkeypatch):
    fetched = []
    monkeypatch.setitem(named.NAMED_MODELS, "tinyt5", (lambda: fetched.append(1) or folders["model"], lambda: "t"))
    source = resolve_planner_source("tinyt5")
    assert (source.kind, source.name, source.location, source.folder, fetched) == (
        SourceKind.NAMED, "tinyt5", None, None, [])
    assert resolve_planner_source("smollm2").kind is SourceKind.NAMED  # the real one: nothing fetched either
    planner = load_planner(PlannerSettings(model="tinyt5"))
    assert fetched and planner.source == "tinyt5" and planner.is_encoder_decoder  # named after the name


def test_a_hub_id_is_left_to_transformers():
    source = resolve_planner_source("google/flan-t5-small")
    assert (source.kind, source.name, source.location, source.folder, source.adapter) == (
        SourceKind.HUB, "google/flan-t5-small", "google/flan-t5-small", None, False)
    assert resolve_planner_source("gpt2").kind is SourceKind.HUB


def test_a_model_folder(folders):
    source = resolve_planner_source(str(folders["model"]))
    assert (source.kind, source.adapter, source.folder, source.name) == (
        SourceKind.MODEL, False, folders["model"], str(folders["model"]))
    planner = load_planner(PlannerSettings(), source=source)  # the source, not settings.model, says what loads
    assert planner.source == str(folders["model"]) and not planner.is_peft


def test_an_adapter_folder(folders):
    source = resolve_planner_source(str(folders["adapter"]))
    assert (source.kind, source.adapter, source.folder) == (SourceKind.ADAPTER, True, folders["adapter"])
    planner = load_planner(PlannerSettings(model=str(folders["adapter"])))
    assert not planner.is_peft and planner.source == str(folders["adapter"])  # LoRA off: merged, the full model trains
    kept = load_planner(PlannerSettings(model=str(folders["adapter"]),
                                        lora=LoraSettings(enabled=True, merge_source_adapter=False)))
    assert kept.is_peft and kept.source == str(folders["adapter"])  # the adapter itself keeps training


def test_loading_or_wrapping_an_adapter_shows_no_peft_deprecation(folders):
    """PEFT reads ``is_gradient_checkpointing``, deprecated by transformers 5: the run logs must not show
    it (it came once per adapter loaded, merged or wrapped)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        load_planner(PlannerSettings(model=str(folders["adapter"])))  # merged
        load_planner(PlannerSettings(model=str(folders["adapter"]),  # merged + a fresh adapter
                                     lora=LoraSettings(enabled=True, r=2)))
        load_planner(PlannerSettings(model=str(folders["adapter"]),
                                     lora=LoraSettings(enabled=True, merge_source_adapter=False)))
    assert not [w for w in seen if "is_gradient_checkpointing" in str(w.message)]


@pytest.mark.parametrize("reported", ["model", "adapter"])
def test_a_run_folder_is_the_planner_it_reported(folders, reported):
    run = folders[f"run-{reported}"]
    planner_dir = run / "rltf" / "checkpoint-2" / CHECKPOINT_PLANNER
    source = resolve_planner_source(str(run))
    assert source.kind is SourceKind.RUN and source.adapter == (reported == "adapter")
    assert (source.value, source.run, source.location, source.name, source.folder) == (
        str(run), str(run), str(planner_dir), str(planner_dir), planner_dir)
    assert source.selection == {"select": "best_validation", "step": 2}  # the validation curve left out
    planner = load_planner(PlannerSettings(model=str(run)))
    assert planner.source == str(planner_dir)


def test_the_checkpoint_folder_name_is_the_one_checkpoints_are_written_with():
    assert MODEL_DIR == CHECKPOINT_PLANNER


# ------------------------------------------------------------------------------ errors: one line
def _one_line(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text
    return text


def test_a_value_that_is_none_of_them_is_one_line_naming_it_and_what_was_expected(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    with pytest.raises(PlannerError) as e:
        resolve_planner_source(str(empty))
    assert _one_line(e) == (f"planner.model {str(empty)!r} is a directory with neither config.json (a model folder) "
                            "nor "
                            "adapter_config.json (an adapter folder) nor config.yaml (a training run's folder); "
                            "it holds: notes.txt")
    expected = ("expected 'embedded', a named model ('smollm2'), a model, adapter or training run folder, or a hub id "
                "such as 'google/flan-t5-large'")
    for value in ("./no/such/model", "checkpoints/run/step-50", "not a model"):
        with pytest.raises(PlannerError) as e:
            resolve_planner_source(value)
        assert _one_line(e) == f"planner.model {value!r}: no such directory, and not a hub model id ({expected})"
    with pytest.raises(PlannerError) as e:
        resolve_planner_source(str(empty / "notes.txt"))
    assert _one_line(e) == f"planner.model {str(empty / 'notes.txt')!r} is a file; {expected}"


def test_a_run_folder_that_reports_no_planner(tmp_path, folders):
    run = tmp_path / "run"
    (run / "sft").mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 0\n")
    sft = re.escape(str(run / "sft"))
    for results, why in [(None, r"without results\.json \(not finished\?\)"),
                         ("{not json", r"results\.json \(the run's results\) is damaged \(JSONDecodeError"),
                         ("[1, 2]", r"reports no RLTF planner \(no rltf_selection"),
                         (json.dumps({"table": {}}), r"reports no RLTF planner \(no rltf_selection"),
                         (json.dumps({"rltf_selection": {"step": 7}}),
                          r"step 7, but .*checkpoint-7/planner is missing")]:
        if results is not None:
            (run / RUN_RESULTS).write_text(results)
        with pytest.raises(PlannerError, match=why) as e:
            resolve_planner_source(str(run))
        assert re.search(rf"planner folders: {sft}$", _one_line(e))
    (run / "rltf" / "checkpoint-7" / CHECKPOINT_PLANNER).mkdir(parents=True)  # reported, but holds no model
    with pytest.raises(PlannerError, match=r"has neither config\.json .* nor adapter_config\.json") as e:
        resolve_planner_source(str(run))
    _one_line(e)


# ------------------------------------------------------------------------------ resolved in one place
def test_no_stage_compares_planner_model_strings():
    """The kinds are told apart by :func:`resolve_planner_source` only: no ``.model == "..."``
    anywhere else, and nothing rewrites ``cfg.planner.model`` after loading."""
    compare = re.compile(r"""\.model\s*[!=]=|[!=]=\s*["']embedded["']|["']embedded["']\s*[!=]=""")
    rewrite = re.compile(r"\bcfg\.planner\.model\s*=[^=]")
    offenders = []
    for path in [*(ROOT / "rltf").rglob("*.py"), *(ROOT / "train").glob("*.py")]:
        if path == ROOT / "rltf" / "planners" / "source.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if compare.search(line) or rewrite.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders


def test_sources_are_values():
    a, b = resolve_planner_source("google/flan-t5-small"), resolve_planner_source("google/flan-t5-small")
    assert a == b and isinstance(a, PlannerSource)
    with pytest.raises(AttributeError):
        a.value = "other"  # frozen


def test_dry_run_describes_each_kind_loading_nothing(folders, tmp_path):
    def planner_line(value: str) -> str:
        text = describe_run(load_config([f"output_dir={tmp_path}", f"planner.model={value}"]))
        return next(line for line in text.splitlines() if line.startswith("planner "))

    run, reported = folders["run-adapter"], folders["run-adapter"] / "rltf" / "checkpoint-2" / CHECKPOINT_PLANNER
    assert planner_line(str(run)).endswith(f"{run} (a training run's folder; the planner it reported, step 2): "
                                           f"{reported} (LoRA adapter directory)")
    assert planner_line(str(folders["model"])).endswith(f"{folders['model']} (model directory, t5)")
    assert planner_line(str(folders["adapter"])).endswith(f"{folders['adapter']} (LoRA adapter directory)")
    assert planner_line("google/flan-t5-small").endswith(
        "google/flan-t5-small (hub id: downloaded at the start of the run)")
    assert "embedded" in planner_line("embedded")
    with pytest.raises(PlannerError, match=r"'\./nope': no such directory"):  # what the run would refuse
        planner_line("./nope")
