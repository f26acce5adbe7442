"""``benchmarks/final_diversity.py`` (issue #37): the diversity of pi_c for every run of a comparison suite, its
start and its final planner, over a suite folder of two real tiny training runs (the main job's tiny config)
that share their SFT start."""

import contextlib
import io
import json

import pytest

from benchmarks import final_diversity as fd
from rltf.config.loading import ConfigError, load_config
from rltf.evaluation.diversity import policy_diversity
from rltf.planners.loading import load_planner
from rltf.stages import plan_job as stages
from tests.stages.test_main_job import TINY
from train.rltf import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SAMPLES = 4


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """``<root>/suite/{rltf,short}/seed0``: two tiny RLTF runs of seed 0 (2 and 1 steps) from one SFT start."""
    root = tmp_path_factory.mktemp("diversity")
    for arm, steps in (("rltf", 2), ("short", 1)):
        args = [f"output_dir={root / 'suite' / arm}", "run_name=seed0", f"planner.embedded.dir={root / 'embedded'}",
                *TINY, "rltf.eval_every=0", "eval.schemas=[finetuned,rltf]", f"rltf.steps={steps}"]
        with contextlib.redirect_stdout(io.StringIO()):
            run(load_config(args))
    return root / "suite"


@pytest.mark.slow
def test_every_runs_start_and_final_planner_is_measured_and_shared_starts_once(suite, tmp_path, capsys):
    assert [(a, s) for a, s, _ in fd.run_folders(suite)] == [("rltf", 0), ("short", 0)]
    folders = fd.planner_folders(suite / "rltf" / "seed0")
    assert folders["start"] == suite / "rltf" / "seed0" / "sft"
    assert folders["final"].parts[-3:] == ("rltf", "checkpoint-2", "planner")  # rltf.select=last: the last step
    assert fd.main([str(suite), "--samples", str(SAMPLES), "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "diversity.json").read_text())
    planners = {(p["arm"], p["stage"]): p for p in result["planners"]}
    assert set(planners) == {("rltf", "start"), ("rltf", "final"), ("short", "start"), ("short", "final")}
    # one SFT start, byte for byte: measured once, the other run's start points at it
    assert planners[("short", "start")]["same_as"] == "rltf seed 0"
    assert planners[("short", "start")]["means"] == planners[("rltf", "start")]["means"]
    assert "same_as" not in planners[("short", "final")]
    for p in result["planners"]:
        m = p["means"]
        assert 1 <= m["distinct_plans"] <= SAMPLES and 0 < m["top_plan_prob"] <= 1 and m["entropy"] >= 0
        assert p["n_tasks"] == 10  # eval.splits=[test]: the lite suite's 10 tasks
        assert "same_as" in p or (len(p["tasks"]) == 10 and not any("top_plan" in t for t in p["tasks"]))
    # the figures are policy_diversity's on the run's held-out tasks, as the run's config says
    cfg = load_config([f"config={suite / 'rltf' / 'seed0' / 'config.yaml'}", "logging.progress_bar=false"])
    job = stages.start(cfg, write_config=False)
    envs = stages.build_envs(job)
    tasks = envs.tasks(cfg.eval.splits)
    final = load_planner(cfg.planner, source=fd.resolve_planner_source(str(folders["final"])))
    direct = policy_diversity(final.model, final.tokenizer, [t.description for t in tasks],
                              [envs.held_out.grammar(final.tokenizer, t) for t in tasks], samples=SAMPLES,
                              seed=cfg.seed, keys=[t.id for t in tasks], max_plans=100,
                              num_beams=cfg.eval.num_beams, temperature=cfg.rltf.temperature)
    assert planners[("rltf", "final")]["means"] == pytest.approx(direct.means(), rel=1e-6)
    assert [t["distinct_plans"] for t in planners[("rltf", "final")]["tasks"]] == \
        [t.distinct_plans for t in direct.tasks]  # per task too (the plans' text with --top-plans only)
    arms = result["arms"]
    assert arms["rltf"]["final"]["distinct_plans"]["n"] == 1 and arms["rltf"]["final"]["distinct_plans"]["std"] == 0
    md = (tmp_path / "diversity.md").read_text()
    assert "| rltf | start | 1 |" in md and "| short | final | 1 |" in md and "Starts shared: 1 runs'" in md
    # resumable: a second call over the same runs measures nothing again and writes the same figures
    capsys.readouterr()
    assert fd.main([str(suite), "--samples", str(SAMPLES), "--out", str(tmp_path)]) == 0
    assert "seed 0 final: " not in capsys.readouterr().out  # the line each measured planner prints
    assert json.loads((tmp_path / "diversity.json").read_text()) == result
    # a call over some arms tables those and keeps the others' measurements for a later call
    assert fd.main([str(suite), "--arms", "short", "--samples", str(SAMPLES), "--out", str(tmp_path)]) == 0
    part = json.loads((tmp_path / "diversity.json").read_text())
    assert set(part["arms"]) == {"short"} and {p["folder"] for p in part["kept"]} == \
        {planners[("rltf", "final")]["folder"]}
    assert fd.main([str(suite), "--samples", str(SAMPLES), "--out", str(tmp_path)]) == 0
    assert "seed 0 final: " not in capsys.readouterr().out
    assert json.loads((tmp_path / "diversity.json").read_text())["arms"] == result["arms"]
    # ... unless the settings differ: then every planner is measured afresh
    assert fd.earlier(tmp_path / "diversity.json", SAMPLES + 1, 100) == {}
    assert len(fd.earlier(tmp_path / "diversity.json", SAMPLES, 100)) == 3  # 2 finals and the one start


def test_a_bad_suite_folder_or_arm_is_one_line_naming_it(tmp_path, capsys):
    from rltf.run.cli import run_cli

    with pytest.raises(SystemExit) as e:
        run_cli(fd.main, [str(tmp_path / "nowhere")])
    assert e.value.code == 2 and "nowhere" in capsys.readouterr().err
    (tmp_path / "arm" / "seed0").mkdir(parents=True)
    (tmp_path / "arm" / "seed0" / "config.yaml").write_text("seed: 0\n")
    assert fd.run_folders(tmp_path) == []  # a run still going (no results.json yet) is left out
    (tmp_path / "arm" / "seed0" / "results.json").write_text("{}")
    assert fd.run_folders(tmp_path) == [("arm", 0, tmp_path / "arm" / "seed0")]
    with pytest.raises(ConfigError, match="--arms other: no finished run"):
        fd.run_folders(tmp_path, ["other"])
    assert fd.planner_folders(tmp_path / "arm" / "seed0") == {}  # no planner folder: nothing to measure
    with pytest.raises(ConfigError, match="no run with a planner folder"):
        fd.main([str(tmp_path)])
    with pytest.raises(ConfigError, match="--samples 0"):
        fd.main([str(tmp_path), "--samples", "0"])
