"""``train/evaluate.py`` on a folder of PDDL problems the planner never saw (issue #50: "scores a folder of
PDDL problems it has never seen"): a tiny pddl run is trained on generated Blocksworld instances, then
evaluated on a fresh PlanBench-like folder (other seeds, more blocks, a plan file) given on the command
line as ``env.pddl.domain=<file> env.pddl.problems=<folder>``. Its first line names where it writes, its
bars name the planner it evaluates and the oracle (issue #52 item 9), and a bad folder is one line,
exit 2, with nothing written."""

from __future__ import annotations

import contextlib
import io
import json
import random

import pytest

from envs.pddl.generators import blocksworld
from envs.pddl.instances import shipped_domain
from envs.pddl.writing import problem_text
from rltf.config.loading import load_config
from rltf.run import tracking
from rltf.run.cli import run_cli
from tests.stages.test_main_job import _run_printing
from train.evaluate import main as evaluate_main
from train.rltf import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "planner.embedded.vocab_size=300",
        "sft.epochs=1", "sft.batch_size=4", "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2",
        "rltf.eval_every=2", "rltf.checkpoint_every=2", "eval.num_beams=2", "logging.progress_bar=false",
        "logging.report_to=none", "eval.chunk_tasks=2"]
TRAINED_ON = ["env.name=pddl", "env.pddl.train_size=6", "env.pddl.validation_size=2", "env.pddl.test_size=2",
              "env.pddl.test_long_size=0", "env.pddl.sizes=[3,4]", "env.pddl.max_plan_length=12"]
FOLDER_IDS = (3, 5, 8, 9, 12)  # instance numbers of the unseen folder


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished tiny pddl run: ``(common args, run folder)``."""
    root = tmp_path_factory.mktemp("pddl-evaluate")
    args = [f"output_dir={root}", f"planner.embedded.dir={root / 'emb'}", *TINY]
    _run_printing(run, load_config([*args, *TRAINED_ON, "run_name=bw"]))
    return args, root / "bw"


@pytest.fixture
def unseen(tmp_path, blocks):
    """A PlanBench-like folder never trained on: its own domain file, problems of 4-5 blocks drawn with
    another seed, a ground-truth plan for one of them, no split.json."""
    folder = tmp_path / "unseen"
    folder.mkdir()
    (folder / "domain.pddl").write_text(shipped_domain("blocksworld").read_text())
    rng = random.Random(1234)
    for k in FOLDER_IDS:
        problem = blocksworld(blocks, 4 + k % 2, rng, f"unseen-{k}")
        (folder / f"instance-{k}.pddl").write_text(problem_text(problem, False))
    return folder


def _evaluate(args: list[str], monkeypatch) -> tuple[dict, list[str], list[str]]:
    """``train/evaluate.py args``: its summary, stdout lines and stderr lines (every progress line)."""
    monkeypatch.setattr(tracking, "PLAIN_PROGRESS_EVERY_S", 0.0)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        summary, out = _run_printing(evaluate_main, args)
    return summary, out, err.getvalue().splitlines()


def test_a_trained_run_scores_every_problem_of_a_folder_it_never_saw(trained, unseen, monkeypatch):
    args, run_dir = trained
    domain = unseen / "domain.pddl"
    summary, out, err = _evaluate([*args, f"planner.model={run_dir}", "env.name=pddl", f"env.pddl.domain={domain}",
                                   f"env.pddl.problems={unseen}", "eval.splits=[train,validation,test]",
                                   "eval.schemas=[rltf,oracle]"], monkeypatch)
    table = summary["table"]
    assert set(table["n_tasks"].values()) == {len(FOLDER_IDS)}  # every problem of the folder, no training one
    for row in ("planner", "oracle"):
        assert sorted(int(k) for k in summary["scores"][row]) == list(FOLDER_IDS)
    assert table["rows"]["oracle"]["goal rate"] == 1.0 and 0 <= table["rows"]["planner"]["goal rate"] <= 1
    assert summary["data"]["grammar"] == "syntax" and str(unseen) in summary["data"]["problems"]
    planner = run_dir / "rltf" / f"checkpoint-{summary['planner']['selection']['step']}" / "planner"
    assert json.loads((planner / "eval" / "eval.json").read_text())["table"] == table
    # item 9: the first line names where it writes; the bars name what they evaluate
    assert out[0].startswith(f"evaluate {planner} -> {planner / 'eval'}  (1 process(es)"), out[0]
    step = summary["planner"]["selection"]["step"]
    planner_bar = [line for line in err if line.startswith(f"eval rltf planner of bw (step {step}): ")]
    assert planner_bar and planner_bar[-1].split("|")[2].split()[0] == f"{len(FOLDER_IDS)}/{len(FOLDER_IDS)}", err
    assert not any(line.startswith(("eval finetuned", "eval rltf:")) for line in err), err
    oracle = list(dict.fromkeys(line.split("|")[2].split()[0] for line in err if line.startswith("eval oracle: ")))
    assert oracle == ["0/5", "2/5", "4/5", "5/5"], err  # ticked after every eval.chunk_tasks=2 tasks


def test_a_planner_folders_bar_names_the_folder(trained, monkeypatch):
    args, run_dir = trained
    _, out, err = _evaluate([*args, f"planner.model={run_dir / 'sft'}", *TRAINED_ON, "eval.schemas=[finetuned]"],
                            monkeypatch)
    assert out[0].startswith(f"evaluate {run_dir / 'sft'} -> {run_dir / 'sft' / 'eval'}  ("), out[0]
    assert any(line.startswith("eval planner bw/sft: ") for line in err), err


@pytest.mark.parametrize("fault, expected", [
    ("empty", "no instance-<k>.pddl problem in the folder"),
    ("plan", "instance-3.plan:2: action 2 (teleport b c) is not an action of the problem"),
    ("types", "object 'a' has the type 'brick', which domain"),
])
def test_a_bad_folder_is_one_line_exit_2_writing_nothing(trained, unseen, fault, expected, capsys):
    args, run_dir = trained
    if fault == "empty":
        for p in unseen.glob("instance-*.pddl"):
            p.unlink()
    elif fault == "plan":
        (unseen / "instance-3.plan").write_text("(unstack b a)\n(teleport b c)\n")
    else:
        (unseen / "instance-5.pddl").write_text(
            "(define (problem typed) (:domain blocksworld-4ops)\n (:objects a - brick b)\n"
            " (:init (arm-empty) (on-table a) (clear a) (on-table b) (clear b))\n (:goal (on a b)))\n")
    listing = sorted(p.name for p in run_dir.rglob("*"))
    with pytest.raises(SystemExit) as stopped:
        run_cli(evaluate_main, [*args, f"planner.model={run_dir}", "env.name=pddl", f"env.pddl.problems={unseen}"])
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], captured.err
    assert captured.out == "" and sorted(p.name for p in run_dir.rglob("*")) == listing
