"""The travel configs over the benchmark's real tables (``configs/travel-*-real.yaml``, issue #36
item 3): one next to each travel config of the embedded planner, the same run but for the env's
tables and queries; each passes ``dry_run=true``; a very short run completes on the real tables
(skipped when they are absent: the ``real_travel_db`` fixture)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rltf.config.loading import load_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[2]
BASES = ("flat", "mtp", "okr", "react", "flat-flow")
TRAINED = ("flat", "mtp", "okr")  # the main job trains these; react and flat-flow are flow evaluations
REAL_ENV = {"database_dir": "../shared/data/travelplanner-db", "queries_source": "generated", "flights": "auto"}


def _tree(path: Path) -> dict:
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False)


@pytest.mark.parametrize("base", BASES)
def test_each_travel_config_has_a_real_twin_that_differs_only_in_its_tables(base):
    plain, real = _tree(ROOT / f"configs/travel-{base}.yaml"), _tree(ROOT / f"configs/travel-{base}-real.yaml")
    assert real["run_name"] == f"{plain['run_name']}-real"
    assert {k: v for k, v in real["env"]["travel"].items() if k in REAL_ENV} == REAL_ENV
    # the flat planner's grammar over the real tables keeps a sample of the options (env.travel.max_options,
    # max_cities: the real tables offer several hundred per city and twenty cities per state)
    caps = {k: real["env"]["travel"].pop(k) for k in ("max_options", "max_cities") if k in real["env"]["travel"]}
    assert caps == ({"max_options": 24, "max_cities": 4} if base == "flat" else {}), base
    for tree in (plain, real):
        tree.pop("run_name")
        for key in REAL_ENV:
            tree["env"]["travel"].pop(key, None)
    assert plain == real
    assert "env.travel.database_dir=" in (ROOT / f"configs/travel-{base}-real.yaml").read_text()  # how to override


@pytest.mark.parametrize("base", BASES)
def test_each_real_config_passes_a_dry_run(base, real_travel_db, tmp_path, capsys):
    args = [f"config=configs/travel-{base}-real.yaml", f"env.travel.database_dir={real_travel_db}",
            f"output_dir={tmp_path}", "dry_run=true"]
    if base in TRAINED:
        from train.rltf import main  # the recipe's entry (a script folder, not a package of the layers)

        assert main(args) is None
    else:
        from rltf.flows.evaluate import main  # the flow evaluation's entry

        assert main(args) is None
    out = capsys.readouterr().out
    assert "nothing was loaded" in out and "generated" in out and "real-seed0.json" in out


TINY = ["env.travel.days=[3]", "env.travel.levels=[easy]", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "sft.epochs=1", "sft.batch_size=16",
        "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.checkpoint_every=1",
        "logging.progress_bar=false"]


@pytest.mark.slow
def test_a_short_flat_run_completes_on_the_real_tables(tmp_path, real_travel_db):
    from train.rltf import run  # see above

    args = ["config=configs/travel-flat-real.yaml", f"env.travel.database_dir={real_travel_db}",
            f"output_dir={tmp_path}", "run_name=flat", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY,
            "rltf.eval_every=0", "eval.num_beams=1", "eval.splits=[test]", "eval.schemas=[finetuned,rltf,oracle]"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run(load_config(args))
    assert out.getvalue().strip().splitlines()[-1].startswith("held-out final pass: finetuned=")
    table = json.loads((tmp_path / "flat" / "results.json").read_text())["table"]["rows"]
    assert table["rltf"]["delivery"] == 1.0 and table["oracle"]["final pass"] == 1.0


@pytest.mark.slow
# configs/travel-mtp-real.yaml cuts its prompts to 160 tokens by design (they keep their end, the options)
@pytest.mark.filterwarnings("ignore::constrained_decoding.prompts.PromptTruncationWarning")
def test_a_short_mtp_run_completes_on_the_real_tables(tmp_path, real_travel_db):
    from train.rltf import run  # see above

    args = ["config=configs/travel-mtp-real.yaml", f"env.travel.database_dir={real_travel_db}",
            f"output_dir={tmp_path}", "run_name=mtp", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY,
            "planner.embedded.vocab_size=2000", "flow.limit=2", "flow.trace_queries=1"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        summary = run(load_config(args))
    assert out.getvalue().strip().splitlines()[-1].startswith("held-out final pass: finetuned=")
    assert set(summary["table"]) == {"finetuned", "rltf", "solver"}
    assert summary["table"]["solver"]["final pass"] == 1.0


SMOLLM2_REAL = {"mtp": ("configs/travel-mtp-smollm2-real.yaml", "configs/travel-mtp-smollm2-rl.yaml"),
                "flat": ("configs/travel-flat-smollm2-real.yaml", "configs/smollm2-lora.yaml")}


@pytest.mark.parametrize("base", sorted(SMOLLM2_REAL))
def test_the_smollm2_real_configs_train_smollm2_with_lora_over_the_real_tables(base, real_travel_db, tmp_path,
                                                                             capsys):
    """Item 8's SmolLM2 rows: the SmolLM2 recipe's planner (LoRA) over the real tables with the embedded real
    config's env, a CPU budget stated in the file; each passes a dry run."""
    path, recipe = SMOLLM2_REAL[base]
    real, smol = _tree(ROOT / path), _tree(ROOT / recipe)
    embedded_real = _tree(ROOT / f"configs/travel-{base}-real.yaml")
    assert real["planner"]["model"] == "smollm2" and real["planner"]["lora"] == smol["planner"]["lora"]
    assert {k: v for k, v in real["env"]["travel"].items() if k in REAL_ENV} == REAL_ENV
    # the env of the embedded planner's real config, but for the days a CPU budget affords
    same_env = {k: v for k, v in real["env"]["travel"].items() if k != "days"}
    assert same_env == {k: v for k, v in embedded_real["env"]["travel"].items() if k != "days"}
    if base == "mtp":
        assert real["flow"]["mtp"] == smol["flow"]["mtp"] and real["flow"]["limit"] == 24
    else:
        assert real["env"]["travel"]["days"] == [3] and real["eval"] == embedded_real["eval"]
    from train.rltf import main  # see above

    assert main([f"config={path}", f"env.travel.database_dir={real_travel_db}", f"output_dir={tmp_path}",
                 "dry_run=true"]) is None
    out = capsys.readouterr().out
    assert "smollm2" in out and "real-seed0.json" in out and "nothing was loaded" in out
