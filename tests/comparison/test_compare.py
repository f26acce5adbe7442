"""The comparison runner (``rltf/comparison/``, ``train/compare.py``; issue #15 item 2): the preset
suite's arms are valid configs, run folders are aggregated over seeds (mean ± std, bootstrap
interval, curves vs plans sampled), runs are resumable and failures reported, and GRPO logs the
periodic held-out score RLTF logs."""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from rltf.comparison.aggregate import row_task_values
from rltf.comparison.report import write_report
from rltf.comparison.runs import run_suite
from rltf.comparison.suites import Row, check_arms, load_suite, suite_from_dict
from rltf.config.loading import ConfigError, RunConfig
from rltf.evaluation import schemas as ev

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


# ------------------------------------------------------------------------------ the preset suite
def test_the_openagi_grpo_preset_arms_are_valid_configs_with_one_budget():
    suite = load_suite("openagi-grpo")
    assert {a.name for a in suite.arms} == {"grpo", "rltf-causal", "rltf-t5", "bounds"} and suite.seeds == 3
    loaded = check_arms(suite)
    bounds = suite.arm("bounds")  # reference plans and oracle: no planner, one seed, train/evaluate.py
    assert bounds.seeds == 1 and bounds.results == "eval.json" and bounds.history is None
    assert loaded["bounds"].eval.schemas == ["reference", "oracle"]
    grpo_cfg = loaded["grpo"]
    assert isinstance(grpo_cfg, RunConfig) and grpo_cfg.grpo.warm_start == "text"
    cfgs = {"grpo": grpo_cfg, "rltf-causal": loaded["rltf-causal"], "rltf-t5": loaded["rltf-t5"]}
    assert cfgs["grpo"].planner.arch == cfgs["rltf-causal"].planner.arch == "causal"
    assert cfgs["rltf-t5"].planner.arch == "seq2seq"
    for name, cfg in cfgs.items():  # the same budget, held-out tasks and curve points for every arm
        assert (cfg.rltf.steps, cfg.rltf.tasks_per_batch, cfg.rltf.k_samples, cfg.rltf.lr) == (40, 8, 8, 3e-4), name
        assert cfg.eval.splits == ["validation", "test"] and cfg.rltf.eval_every == 5, name
    # every row reads an arm of the suite; every trained arm has a history file the curves come from
    assert all(r.arm in loaded for r in suite.rows)
    assert {r.arm for r in suite.rows if r.trained} == set(cfgs)
    assert suite.arm("grpo").history == "train_history.json"
    # the commands: seed, a run folder per arm and seed, the suite's overrides before the extra ones
    cmd = suite.arm("rltf-t5").command(suite.common, ["rltf.steps=2"], 1, Path("checkpoints/x/rltf-t5"))
    assert cmd[0] == "train/rltf.py" and cmd.index("planner.arch=seq2seq") < cmd.index("rltf.steps=2")
    assert cmd[-4:] == ["seed=1", "output_dir=checkpoints/x/rltf-t5", "run_name=seed1", "overwrite=true"]
    # a bad key in an arm fails before anything runs, naming the arm
    with pytest.raises(ConfigError, match="arm grpo .*rltf.bogus"):
        check_arms(suite, ["rltf.bogus=1"])


def test_a_suite_is_checked_when_read():
    arm = {"name": "a", "script": "train/rltf.py"}
    ok = suite_from_dict({"name": "s", "arms": [arm], "rows": [{"label": "A", "arm": "a", "schema": "rltf"}]})
    assert ok.arms[0].overrides == () and ok.rows[0].column == "overall"
    with pytest.raises(ConfigError, match=r"arms\[0\]: unknown key.*colour"):
        suite_from_dict({"name": "s", "arms": [{**arm, "colour": "red"}]})
    with pytest.raises(ConfigError, match="name an arm that is not in the suite"):
        suite_from_dict({"name": "s", "arms": [arm], "rows": [{"label": "B", "arm": "b", "schema": "rltf"}]})
    with pytest.raises(ConfigError, match="arm names repeat"):
        suite_from_dict({"name": "s", "arms": [arm, arm]})
    with pytest.raises(ConfigError, match="missing key.*script"):
        suite_from_dict({"name": "s", "arms": [{"name": "a"}]})
    with pytest.raises(ConfigError, match="no such suite; known suites: .*openagi-grpo"):
        load_suite("no-such-suite")


# ------------------------------------------------------------------------------ aggregation
TASKS = [SimpleNamespace(id=i, metric="m") for i in range(12)]
SUITE = suite_from_dict({
    "name": "toy", "seeds": 2,
    "arms": [{"name": "rl", "script": "x.py"}, {"name": "base", "script": "y.py", "history": None}],
    "rows": [{"label": "fine-tuned", "arm": "rl", "schema": "finetuned", "valid": 1.0},
             {"label": "RL", "arm": "rl", "schema": "rltf", "trained": True, "valid": 1.0},
             {"label": "baseline", "arm": "base", "schema": "zero"}]})


def _write_run(run_dir: Path, schemas: dict[str, dict[int, float]], history: list[dict] | None = None,
               plans=(2, 4)) -> None:
    """A run folder as the entry points write it: ``results.json`` (``rltf.stages.plan_job.report``'s
    format, the table from ``rltf.evaluation.schemas.results_table``), ``config.yaml``, the history."""
    run_dir.mkdir(parents=True)
    results = [ev.SchemaResult(s, scores=sc) for s, sc in schemas.items()]
    summary = {"table": ev.results_table(results, TASKS), "scores": {r.schema: r.scores for r in results},
               "seconds": 12.5}
    (run_dir / "results.json").write_text(json.dumps(summary))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"rltf": {"tasks_per_batch": plans[0], "k_samples": plans[1]}}))
    if history is not None:
        (run_dir / "rltf_history.json").write_text(json.dumps(history))


def test_aggregate_over_seeds_from_run_folders(tmp_path):
    rng = np.random.default_rng(0)
    per_seed = {}
    for seed in (0, 1):
        ft = {t.id: float(rng.uniform(0.3, 0.7)) for t in TASKS}
        rl = {k: min(1.0, v + 0.1 + 0.05 * seed) for k, v in ft.items()}
        hist = [{"step": s, "train/reward": 0.4 + 0.01 * s + 0.1 * seed, "train/valid": 1.0,
                 **({"eval/validation/score": 0.5 + 0.02 * s} if s % 5 == 0 else {})} for s in range(1, 21)]
        _write_run(tmp_path / "rl" / f"seed{seed}", {"finetuned": ft, "rltf": rl}, hist)
        per_seed[seed] = (ft, rl)
    _write_run(tmp_path / "base" / "seed0", {"zero": {t.id: 0.1 for t in TASKS}})  # one seed only
    (tmp_path / "rl" / "seed1.run.json").write_text(json.dumps({"args": [], "wall_s": 30.0, "returncode": 0}))

    summary = write_report(SUITE, tmp_path, log=lambda _: None)
    rows = {r["label"]: r for r in summary["rows"]}
    rl = rows["RL"]
    seed_means = [float(np.mean(list(per_seed[s][1].values()))) for s in (0, 1)]
    assert rl["n_seeds"] == 2 and rl["values"] == {"0": pytest.approx(seed_means[0]), "1": pytest.approx(seed_means[1])}
    assert rl["mean"] == pytest.approx(np.mean(seed_means)) and rl["std"] == pytest.approx(np.std(seed_means, ddof=1))
    pooled = [np.mean([per_seed[s][1][t.id] for s in (0, 1)]) for t in TASKS]
    assert rl["interval"] == list(ev.bootstrap_interval(pooled)) and rl["interval"][0] < rl["mean"] < rl["interval"][1]
    assert rl["n_tasks"] == 12 and rl["valid_held_out"] == 1.0 and rl["valid_train"] == 1.0
    # train reward vs plans sampled: 20 steps x 8 plans; first / last 10% (2 steps) of the seed mean
    assert rl["plans_sampled"] == 160
    assert rl["train_reward_first"] == pytest.approx(np.mean([0.41 + 0.05, 0.42 + 0.05]))
    assert rl["train_reward_last"] == pytest.approx(np.mean([0.59 + 0.05, 0.60 + 0.05]))
    # wall time: the recorded one (seed 1), else the run's own seconds (seed 0)
    assert rl["wall_s"]["mean"] == pytest.approx((12.5 + 30.0) / 2)
    curve = summary["curves"]["rl"]["score"]
    assert curve["plans"] == [40, 80, 120, 160] and curve["mean"] == pytest.approx([0.6, 0.7, 0.8, 0.9])
    assert summary["curves"]["rl"]["reward"]["plans"][:2] == [8, 16]
    base = rows["baseline"]
    assert base["n_seeds"] == 1 and base["std"] == 0.0 and base["mean"] == pytest.approx(0.1)
    assert base["valid_held_out"] is None and "train_reward_first" not in base

    # another column gets an interval when the reader gives its per-task values (travel: final pass)
    row = Row("pass", "rl", "rltf", column="final pass")
    per_query = {"0": 1.0, "1": 0.0, "2": 1.0, "3": 1.0}
    assert row_task_values({"task_values": {"rltf": {"final pass": per_query}}}, row) == per_query
    assert row_task_values({"scores": {"rltf": {"0": 0.5}}}, row) == {}  # scores are rewards, not passes

    md = (tmp_path / "compare.md").read_text()
    lo, hi = rl["interval"]
    assert f"| RL | {rl['mean']:.4f} ± {rl['std']:.4f} (n=2) | [{lo:.2f}, {hi:.2f}] |" in md
    assert "| baseline | 0.1000 (n=1) |" in md
    assert json.loads((tmp_path / "compare.json").read_text())["rows"][1]["label"] == "RL"
    assert (tmp_path / "compare.png").stat().st_size > 10_000
    assert "Every metric" not in md

    # further columns of the results tables, every row, mean ± std over seeds (travel: every metric)
    summary = write_report(dataclasses.replace(SUITE, metrics=("overall", "no such column")), tmp_path,
                                   log=lambda _: None)
    rl_metrics = {r["label"]: r for r in summary["rows"]}["RL"]["metrics"]
    assert rl_metrics["overall"] == {"mean": pytest.approx(rl["mean"]), "std": pytest.approx(rl["std"]), "n_seeds": 2}
    assert "no such column" not in rl_metrics
    md = (tmp_path / "compare.md").read_text()
    assert "| | overall | no such column |" in md
    assert f"| RL | {rl['mean']:.4f} ± {rl['std']:.4f} | — |" in md and "| baseline | 0.1000 | — |" in md


def test_the_curves_are_also_drawn_against_each_runs_cpu_seconds(tmp_path):
    from matplotlib.image import imread

    from rltf.comparison.plots import cpu_axis, cpu_clock, final_points, panels_of, summary_clocks
    from rltf.comparison.plots import main as redraw

    # a run's CPU time spread over its steps by their durations (plans / plans_per_s), else evenly
    timed = [{"step": s, "train/reward": 0.1 * s, "train/plans_per_s": r} for s, r in zip((1, 2, 3, 4), (8, 4, 8, 8))]
    clock = cpu_clock(timed, 50.0)
    assert clock["steps"] == [1, 2, 3, 4] and clock["spread"] == "step durations"
    assert clock["cpu_s"] == pytest.approx([10.0, 30.0, 40.0, 50.0])
    untimed = [{k: v for k, v in h.items() if k != "train/plans_per_s"} for h in timed]
    assert cpu_clock(untimed, 50.0)["cpu_s"] == pytest.approx([12.5, 25.0, 37.5, 50.0])
    assert cpu_clock(untimed, None) is None and cpu_clock([], 50.0) is None
    # a curve's points: the mean over its seeds of their clocks at its steps (step 0: 0 s)
    curve = {"steps": [0, 2, 4], "seeds": {"0": {}, "1": {}}}
    other = cpu_clock(untimed, 30.0)
    assert cpu_axis(curve, {"0": clock, "1": other}) == pytest.approx([0.0, (30.0 + 15.0) / 2, (50.0 + 30.0) / 2])
    assert cpu_axis(curve, {"0": clock}) is None  # a seed without a CPU time: no time axis

    # the report records each run's clock and draws a second row of panels against it
    for seed, cpu in ((0, 40.0), (1, 80.0)):
        hist = [{"step": s, "train/reward": 0.4 + 0.01 * s, "train/plans_per_s": 8.0,
                 **({"eval/validation/score": 0.5 + 0.02 * s} if s % 5 == 0 else {})} for s in range(1, 21)]
        _write_run(tmp_path / "rl" / f"seed{seed}", {"finetuned": {t.id: 0.5 for t in TASKS},
                                                     "rltf": {t.id: 0.6 for t in TASKS}}, hist)
        (tmp_path / "rl" / f"seed{seed}.run.json").write_text(json.dumps({"args": [], "wall_s": cpu, "cpu_s": cpu}))
    _write_run(tmp_path / "base" / "seed0", {"zero": {t.id: 0.1 for t in TASKS}})
    summary = write_report(SUITE, tmp_path, log=lambda _: None)
    clocks = {r["seed"]: r["clock"] for r in summary["runs"]["rl"]}
    assert clocks[1]["cpu_s"][9] == pytest.approx(40.0) and clocks[0]["cpu_s"][-1] == pytest.approx(40.0)
    assert clocks[0]["spread"] == "step durations"
    assert cpu_axis(summary["curves"]["rl"]["score"], summary_clocks(summary)["rl"]) == \
        pytest.approx([15.0, 30.0, 45.0, 60.0])
    curves = [("plans", "score"), ("plans", "reward"), ("cpu", "score"), ("cpu", "reward")]
    assert panels_of(summary) == [*curves, ("final", "plans"), ("final", "cpu")]
    # the final panels: the trained row's held-out score (mean ± std over seeds) at its plans and CPU per run
    (final,) = final_points(summary)
    assert (final["arm"], final["mean"], final["n"], final["cpu_s"]) == ("rl", pytest.approx(0.6), 2, 60.0)
    assert final["plans"] == summary["rows"][1]["plans_sampled"] and final["cpu_std"] == pytest.approx(28.28, abs=0.01)
    assert imread(tmp_path / "compare.png").shape[0] > 3 * 4.2 * 120  # three rows of 4.2 in at 120 dpi, the legend

    # redrawn from compare.json alone (no run folders); one written before the clocks spreads evenly
    old = json.loads((tmp_path / "compare.json").read_text())
    for runs in old["runs"].values():
        for r in runs:
            r.pop("clock")
    assert summary_clocks(old)["rl"]["1"]["cpu_s"][9] == pytest.approx(40.0)
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert redraw([str(tmp_path / "old.json"), str(tmp_path / "old.png")]) == tmp_path / "old.png"
    assert panels_of(old) == panels_of(summary) and imread(tmp_path / "old.png").shape[0] > 3 * 4.2 * 120
    # without CPU times: the panels against plans sampled only
    for r in [r for runs in old["runs"].values() for r in runs] + old["rows"]:
        r["cpu_s"] = None
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert panels_of(old) == [("plans", "score"), ("plans", "reward"), ("final", "plans")]
    redraw([str(tmp_path / "old.json"), str(tmp_path / "two_rows.png")])
    assert 2 * 4.2 * 120 < imread(tmp_path / "two_rows.png").shape[0] < 3 * 4.2 * 120


# ------------------------------------------------------------------------------ running
FAKE_ENTRY_POINT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    run_dir = Path(args["output_dir"]) / args["run_name"]
    with open(Path(args["output_dir"]).parent / "calls.txt", "a") as f:
        f.write(args["run_name"] + "\\n")
    if args.get("fail") == "true":
        print("error: this arm is broken", file=sys.stderr)
        sys.exit(2)
    run_dir.mkdir(parents=True, exist_ok=True)
    score = 0.5 + 0.1 * int(args["seed"]) + float(args.get("bonus", 0))
    table = {"rows": {"rltf": {"overall": score}}, "intervals": {"rltf": [score - 0.1, score + 0.1]}}
    (run_dir / "results.json").write_text(json.dumps({"table": table, "scores": {"rltf": {"0": score}}}))
""")


def test_run_suite_runs_each_arm_and_seed_once_and_reports_failures(tmp_path):
    script = tmp_path / "fake_entry.py"
    script.write_text(FAKE_ENTRY_POINT)
    suite = suite_from_dict({
        "name": "fake", "seeds": 2, "common": ["bonus=0.0"],
        "arms": [{"name": "good", "script": str(script), "history": None},
                 {"name": "bad", "script": str(script), "overrides": ["fail=true"], "history": None},
                 {"name": "once", "script": str(script), "history": None, "seeds": 1}],
        "rows": [{"label": "good", "arm": "good", "schema": "rltf", "trained": True},
                 {"label": "bad", "arm": "bad", "schema": "rltf"}, {"label": "once", "arm": "once", "schema": "rltf"}]})
    root = tmp_path / "cmp"
    records = run_suite(suite, root, log=lambda _: None)
    assert [(r.arm, r.seed, r.status) for r in records] == [("good", 0, "done"), ("bad", 0, "failed"),
                                                            ("once", 0, "done"),
                                                            ("good", 1, "done"), ("bad", 1, "failed")]
    assert records[0].cpu_s is not None and records[0].cpu_s >= 0
    assert "this arm is broken" in records[1].error and records[1].returncode == 2
    assert (root / "good" / "seed1.log").is_file() and records[0].wall_s > 0
    summary = write_report(suite, root, records, log=lambda _: None)
    good = {r["label"]: r for r in summary["rows"]}["good"]
    assert good["values"] == {"0": 0.5, "1": pytest.approx(0.6)} and good["wall_s"]["mean"] > 0
    assert {r["label"]: r for r in summary["rows"]}["bad"]["n_seeds"] == 0
    assert {r["label"]: r for r in summary["rows"]}["once"]["values"] == {"0": 0.5}
    assert "| bad | not run |" in (root / "compare.md").read_text()
    assert "Failed runs: bad seed 0" in (root / "compare.md").read_text()
    written = json.loads((root / "compare.json").read_text())  # paths relative to the comparison folder
    assert written["runs"]["good"][1]["run_dir"] == "good/seed1" and written["failed"][0]["run_dir"] == "bad/seed0"
    assert str(tmp_path) not in (root / "compare.json").read_text() + (root / "compare.md").read_text()
    calls = (tmp_path / "cmp" / "calls.txt").read_text().split()
    assert sorted(calls) == ["seed0", "seed0", "seed0", "seed1", "seed1"]

    # resumable: finished runs are not run again (the failed ones are)
    again = run_suite(suite, root, log=lambda _: None)
    assert [r.status for r in again] == ["reused", "failed", "reused", "reused", "failed"]
    assert again[0].wall_s == records[0].wall_s and again[0].cpu_s == records[0].cpu_s
    assert len((tmp_path / "cmp" / "calls.txt").read_text().split()) == 7
    # ... but not under other arguments: that would mix two different comparisons
    with pytest.raises(ConfigError, match="was run with other arguments"):
        run_suite(suite, root, ["bonus=0.5"], arms=["good"], log=lambda _: None)


def test_compare_recipe_arguments(tmp_path, capsys):
    from train.compare import main

    with pytest.raises(ConfigError, match="suite=<name> is required; known suites: .*openagi-grpo"):
        main([])
    with pytest.raises(ConfigError, match=r"arms=\['nope'\]: not in suite openagi-grpo"):
        main(["suite=openagi-grpo", "arms=[nope]"])
    with pytest.raises(ConfigError, match="seeds"):
        main(["suite=openagi-grpo", "seeds=[-1]"])
    assert main(["suite=openagi-grpo", "dry_run=true", "seeds=[2]", "arms=[grpo]", f"output_dir={tmp_path}",
                 "rltf.steps=3"]) == {}
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.endswith(f"train/grpo.py config=configs/grpo-lite.yaml eval.splits=[validation,test] "
                         f"rltf.eval_every=5 logging.progress_bar=false eval.schemas=[finetuned] rltf.steps=3 seed=2 "
                         f"output_dir={tmp_path}/openagi-grpo/grpo run_name=seed2 overwrite=true")
    assert line.startswith(sys.executable)


# ------------------------------------------------------------------------------ GRPO's held-out curve
def test_grpo_logs_the_periodic_held_out_score_as_rltf_does(tmp_path):
    from accelerate.state import AcceleratorState

    from rltf.comparison.grpo import PeriodicEval, make_grpo_trainer, training_curve
    from rltf.config.loading import EmbeddedSettings
    from rltf.planners.embedded import ensure_embedded_planner
    from rltf.planners.planner import Planner
    from tests.tiny_models import tokenizer_corpus
    from tests.toy_env import toy_env

    AcceleratorState._reset_state(True)
    env = toy_env(samples_per_step=2)
    tasks = env.tasks()
    planner = Planner.from_pretrained(ensure_embedded_planner(
        EmbeddedSettings(d_model=32, num_layers=1, num_heads=2, d_ff=64, vocab_size=500, dir=str(tmp_path / "emb")),
        tokenizer_corpus(), arch="causal"))
    cfg = RunConfig()
    cfg.logging.progress_bar = False
    cfg.rltf.steps, cfg.rltf.tasks_per_batch, cfg.rltf.k_samples, cfg.rltf.lr = 3, 2, 2, 1e-3
    cfg.planner.max_plan_tokens = 8
    seen = []

    def held_out_score():  # the constrained beam search RLTF's trainer is scored with
        seen.append(planner.model.training)
        r = ev.constrained_schema("rltf", planner, env, tasks, num_beams=2)
        return {"eval/validation/score": r.overall}

    periodic = PeriodicEval(2, held_out_score)
    trainer, _ = make_grpo_trainer(cfg, planner, env, tasks, tmp_path / "grpo", callbacks=[periodic])
    trainer.train()
    AcceleratorState._reset_state(True)
    assert [r["step"] for r in periodic.rows] == [2] and 0 <= periodic.rows[0]["eval/validation/score"] <= 1
    curve = training_curve(trainer, periodic.rows)
    assert [r["step"] for r in curve] == [1, 2, 3]
    assert all({"train/reward", "train/valid"} <= set(r) for r in curve)
    assert [("eval/validation/score" in r) for r in curve] == [False, True, False]
    assert PeriodicEval(0, held_out_score).every == 0  # rltf.eval_every=0: never
