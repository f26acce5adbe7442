"""Algorithms as entries (issue 49 item 3): ``rltf.objective`` picks a registered objective — one
signature, the minibatch's exact log-probs and weights and the rule's settings -> loss and logged
values — or the user's own from an import path; ``auto`` (the default) derives what the older keys
implied, so every config without the key trains as before; a bad combination is one line naming the
key; "draw distinct plans" is the entry's property, asked in one place; the ``grpo`` entry's loss is
TRL's GRPO loss, checked by hand; a user's objective from a folder on ``PYTHONPATH`` trains a step of
``train/rltf.py`` and its failures are one ``error:`` line naming its path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml
from accelerate import Accelerator

from rltf.algorithms.baselines import BASELINES, Baseline
from rltf.algorithms.choice import (
    ObjectiveError,
    draws_distinct_plans,
    load_objective,
    objective_label,
    objective_of,
    objective_problem,
)
from rltf.algorithms.objectives import OBJECTIVES, Objective, ObjectiveSpec, Units
from rltf.config.loading import ConfigError, check_resume_config, config_to_yaml, load_config
from rltf.rl.trainer import RLTFTrainer
from rltf.stages.flow_job import check_flow_job
from tests import toy_run
from tests.recipe_batch import run_recipes
from tests.toy_env import toy_env
from tests.toy_run import make_planner

ROOT = Path(__file__).resolve().parents[2]
USER_MODULE = '''"""A user's objective, outside rltf: REINFORCE with its loss shifted by a constant (the same
gradient), logging a value of its own."""

from rltf.algorithms.objectives import Objective, ObjectiveSpec


def my_objective(units, rule):
    loss = -(units.weights.to(units.logp.device) * units.logp).sum() / max(1, units.samples)
    return Objective(loss + 1000.0, {"my_value": 7.0})


def broken(units, rule):
    raise RuntimeError("boom")


SPEC = ObjectiveSpec(my_objective, reuses_batch=False)
VERSION = 3
'''


@pytest.fixture(scope="module")
def user_pkg(tmp_path_factory) -> Path:
    """A folder holding ``myobjectives.py`` (the objectives above) and ``badobjectives.py`` (raises on import)."""
    root = tmp_path_factory.mktemp("userobjective")
    (root / "myobjectives.py").write_text(USER_MODULE)
    (root / "badobjectives.py").write_text('raise RuntimeError("cannot import me")\n')
    return root


def make_cfg(tmp_path, *overrides):
    """tests/toy_run.py's tiny run with 6 plans per task and no checkpoints."""
    return toy_run.make_cfg(tmp_path, "rltf.k_samples=6", "rltf.checkpoint_every=0", *overrides)


def rule(**kw):
    base = dict(objective="auto", baseline="moving_average", update_epochs=1, minibatches=1, clip_eps=0.2,
                ratio="trajectory")
    return SimpleNamespace(**{**base, **kw})


# ------------------------------------------------------------------------------ the entries
def test_the_registered_entries_and_their_properties():
    assert OBJECTIVES.names() == ("reinforce", "clipped", "unordered_set", "grpo")
    assert all(isinstance(spec, ObjectiveSpec) for spec in OBJECTIVES.values())
    assert [n for n, s in OBJECTIVES.items() if s.without_replacement] == ["unordered_set"]
    assert [n for n, s in OBJECTIVES.items() if not s.reuses_batch] == ["reinforce"]
    assert {n: s.baseline for n, s in OBJECTIVES.items()} == {"reinforce": None, "clipped": None,
                                                              "unordered_set": "unordered_set", "grpo": "grpo"}


@pytest.mark.parametrize("baseline", BASELINES.names())
@pytest.mark.parametrize("epochs, minibatches", [(1, 1), (2, 1), (1, 2), (3, 2)])
def test_auto_is_what_the_older_keys_implied(baseline, epochs, minibatches):
    """The choice before rltf.objective existed: update.py's 'reinforce' for one pass of one minibatch,
    'clipped' otherwise; the sampler drew without replacement exactly for the unordered_set baseline."""
    r = rule(baseline=baseline, update_epochs=epochs, minibatches=minibatches)
    implied = "reinforce" if epochs == 1 and minibatches == 1 else "clipped"
    assert objective_label(r) == ("unordered_set" if baseline == "unordered_set" else implied)
    assert draws_distinct_plans(r) is (baseline == "unordered_set")
    assert objective_problem(r) is None
    units = Units(torch.tensor([-1.0, -2.0], requires_grad=True), torch.tensor([-1.0, -2.0]),
                  torch.tensor([0.5, -1.0]), 2)
    expected = OBJECTIVES[implied].loss(units, r)
    got = objective_of(r).loss(units, r)  # the unordered_set entry: the rule the epochs imply, on its weights
    assert torch.equal(got.loss, expected.loss) and got.logs == expected.logs


@pytest.mark.parametrize("overrides, key, says", [
    (["rltf.objective=grpo"], "'rltf.objective' 'grpo'", "set rltf.baseline=grpo"),
    (["rltf.objective=unordered_set"], "'rltf.objective' 'unordered_set'", "set rltf.baseline=unordered_set"),
    (["rltf.objective=clipped", "rltf.baseline=unordered_set"], "'rltf.baseline' 'unordered_set'",
     "set rltf.objective=auto"),
    (["rltf.objective=reinforce", "rltf.update_epochs=2"], "'rltf.objective' 'reinforce'", "set both to 1"),
    (["rltf.objective=ppo"], "bad value for 'rltf.objective': 'ppo'", "expected one of auto, reinforce, clipped, "
                                                                       "unordered_set, grpo, or an import path"),
])
def test_a_bad_combination_is_one_line_naming_the_key(tmp_path, overrides, key, says):
    with pytest.raises(ConfigError) as e:
        load_config([f"output_dir={tmp_path}", *overrides])
    assert "\n" not in str(e.value) and key in str(e.value) and says in str(e.value), str(e.value)


def test_a_run_saved_before_the_key_existed_resumes_as_auto(tmp_path):
    cfg = load_config([f"output_dir={tmp_path}"])
    saved = yaml.safe_load(config_to_yaml(cfg))
    assert saved["rltf"]["objective"] == "auto"
    del saved["rltf"]["objective"]  # a config.yaml written before rltf.objective
    check_resume_config(saved, cfg, "config.yaml")  # absent reads as auto: what that run trained with
    with pytest.raises(ConfigError, match=r"rltf.objective: 'auto' -> 'clipped'"):
        check_resume_config(saved, load_config([f"output_dir={tmp_path}", "rltf.objective=clipped"]), "config.yaml")


def test_the_flow_job_refuses_distinct_plans_through_the_same_question(tmp_path):
    cfg = load_config([f"output_dir={tmp_path}", "config=configs/travel-mtp.yaml", "rltf.baseline=unordered_set"])
    assert draws_distinct_plans(cfg.rltf)
    with pytest.raises(ConfigError, match="'rltf.objective' 'unordered_set' .* draws distinct plans"):
        check_flow_job(cfg)


# ------------------------------------------------------------------------------ grpo by hand
def test_the_grpo_entrys_loss_is_trls_grpo_loss_by_hand():
    """Two tasks of two plans: A from the grpo baseline, (R − group mean) / (group std + 1e-4); each
    plan's −min(r·A, clip(r, 0.8, 1.2)·A), r = exp(log π_c − log π_c,old), averaged over the plans."""
    rewards, ids = np.array([1.0, 0.0, 0.25, 0.75]), np.array([3, 3, 5, 5])
    adv, _ = Baseline("grpo").advantages(rewards, ids)
    std = np.std([1.0, 0.0], ddof=1)  # 0.7071...; the second group's: np.std([0.25, 0.75], ddof=1)
    a = [0.5 / (std + 1e-4), -0.5 / (std + 1e-4), -0.25 / (np.std([0.25, 0.75], ddof=1) + 1e-4),
         0.25 / (np.std([0.25, 0.75], ddof=1) + 1e-4)]
    np.testing.assert_allclose(adv, a, rtol=1e-12)
    old = [-1.0, -2.0, -0.5, -3.0]
    now = [-0.5, -2.5, -0.5, -2.9]  # r = e^0.5 (clipped at 1.2, A > 0), e^-0.5 (clipped at 0.8, A < 0), 1, e^0.1
    logp = torch.tensor(now, dtype=torch.float64, requires_grad=True)
    out = OBJECTIVES["grpo"].loss(Units(logp, torch.tensor(old, dtype=torch.float64),
                                        torch.tensor(adv, dtype=torch.float64), 4), rule(baseline="grpo"))
    r = np.exp(np.array(now) - np.array(old))
    terms = [min(ri * ai, min(max(ri, 0.8), 1.2) * ai) for ri, ai in zip(r, a)]
    assert out.loss.item() == pytest.approx(-sum(terms) / 4, rel=1e-12)
    assert out.logs["clip_fraction"] == pytest.approx(2 / 4)  # the first two left the range their A pushes
    out.loss.backward()
    grads = [0.0, 0.0, -r[2] * a[2] / 4, -r[3] * a[3] / 4]  # clipped terms have no gradient
    np.testing.assert_allclose(logp.grad.numpy(), grads, rtol=1e-12)


def test_the_grpo_entry_averages_a_trajectorys_decisions_first():
    """A flow: TRL averages a completion's tokens, here a trajectory's decisions (3 and 1 of them)."""
    logp = torch.tensor([-1.0, -1.0, -1.0, -2.0], dtype=torch.float64, requires_grad=True)
    weights = torch.tensor([1.0, 1.0, 1.0, -2.0], dtype=torch.float64)
    owner = torch.tensor([0, 0, 0, 1])
    out = OBJECTIVES["grpo"].loss(Units(logp, logp.detach(), weights, 2, owner, 2), rule(baseline="grpo"))
    assert out.loss.item() == pytest.approx(-((1 + 1 + 1) / 3 + (-2.0)) / 2)  # r = 1 exactly
    assert OBJECTIVES["clipped"].loss(Units(logp, logp.detach(), weights, 2, owner, 2), rule()).loss.item() == \
        pytest.approx(-(3.0 - 2.0) / 2)  # the clipped entry sums a trajectory's decisions


def test_a_grpo_run_takes_a_step(tmp_path):
    cfg = make_cfg(tmp_path, "rltf.objective=grpo", "rltf.baseline=grpo")
    row = RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True)).train_step()
    assert row["train/epoch1/clip_fraction"] == 0.0 and row["train/epoch1/approx_kl"] == 0.0  # r ≡ 1 on one pass
    assert np.isfinite(row["train/loss"]) and row["train/grad_norm"] > 0


# ------------------------------------------------------------------------ a user's objective
def test_a_users_objective_loads_by_import_path_and_trains_a_step(user_pkg, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(user_pkg))
    cfg = make_cfg(tmp_path, "rltf.objective=myobjectives:my_objective")
    assert cfg.rltf.objective == "myobjectives:my_objective" and not draws_distinct_plans(cfg.rltf)
    row = RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True)).train_step()
    assert row["train/epoch1/my_value"] == 7.0 and row["train/loss"] > 900  # its loss, its logged value
    spec = load_objective("myobjectives:SPEC")  # a spec keeps its properties
    assert not spec.reuses_batch and isinstance(spec.loss(
        Units(torch.zeros(1, requires_grad=True), torch.zeros(1), torch.ones(1), 1), cfg.rltf), Objective)
    with pytest.raises(ConfigError, match="'myobjectives:SPEC' takes one step per sampled batch"):
        make_cfg(tmp_path, "rltf.objective=myobjectives:SPEC", "rltf.minibatches=2")


def test_a_users_objective_that_raises_is_one_line_naming_it(user_pkg, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(user_pkg))
    cfg = make_cfg(tmp_path, "rltf.objective=myobjectives:broken")
    with pytest.raises(ObjectiveError) as e:
        RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True)).train_step()
    assert str(e.value) == "the objective myobjectives:broken (rltf.objective) raised RuntimeError: boom"


def _rltf_env(pkg: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(pkg), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               WANDB_MODE="offline")
    return env


def _rltf(args: list[str], pkg: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "train" / "rltf.py"), *args], env=_rltf_env(pkg), cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


ONE_STEP = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
            "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "planner.embedded.vocab_size=300",
            "sft.enabled=false", "rltf.steps=1", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=0",
            "rltf.checkpoint_every=0", "eval.num_beams=2", "eval.splits=[test]", "eval.schemas=[rltf]",
            "logging.progress_bar=false", "logging.report_to=none"]


@pytest.mark.slow  # a train/rltf.py subprocess: one RLTF step and the rltf row on the tiny settings
def test_train_rltf_py_trains_a_step_with_an_objective_from_outside_the_package(user_pkg, tmp_path):
    done = _rltf(["rltf.objective=myobjectives:my_objective", f"output_dir={tmp_path}", "run_name=mine",
                  f"planner.embedded.dir={tmp_path / 'emb'}", *ONE_STEP], user_pkg)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("held-out overall: rltf=")
    (row,) = json.loads((tmp_path / "mine" / "rltf_history.json").read_text())
    assert row["train/epoch1/my_value"] == 7.0 and row["train/loss"] > 900  # the user's loss was the update's
    saved = yaml.safe_load((tmp_path / "mine" / "config.yaml").read_text())
    assert saved["rltf"]["objective"] == "myobjectives:my_objective"  # a resumed run imports it again


IMPORT_FAILURES = [
    ("nopkg_rltf_test.objectives:mine", "cannot import module 'nopkg_rltf_test.objectives' (ModuleNotFoundError: "),
    ("badobjectives:mine", "cannot import module 'badobjectives' (RuntimeError: cannot import me)"),
    ("myobjectives:nothing", "module 'myobjectives' has no attribute 'nothing'"),
    ("myobjectives:VERSION", "myobjectives:VERSION is a int; expected an ObjectiveSpec or a callable"),
]


@pytest.fixture(scope="module")
def import_failures(user_pkg) -> list:
    """Each failing import path's ``dry_run=true`` of ``train/rltf.py``, all in one child process
    (tests/recipe_batch.py: one start-up instead of four); what importing the recipe printed is empty."""
    startup, done = run_recipes([("rltf.py", [f"rltf.objective={value}", "dry_run=true"])
                                 for value, _ in IMPORT_FAILURES], _rltf_env(user_pkg), timeout=300)
    assert startup.returncode == 0 and startup.stdout == startup.stderr == "", startup
    return done


@pytest.mark.parametrize("case", range(len(IMPORT_FAILURES)), ids=[v for v, _ in IMPORT_FAILURES])
def test_an_import_path_that_fails_is_one_error_line_naming_it(import_failures, case):
    (value, reason), done = IMPORT_FAILURES[case], import_failures[case]
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: bad value for 'rltf.objective': {value!r}; {reason}"), lines[0]


@pytest.mark.slow  # train/rltf.py up to its RLTF step
def test_an_objective_that_raises_while_training_is_one_error_line(user_pkg, tmp_path, monkeypatch, capsys):
    """train/rltf.py's ``__main__`` block (``run_cli(main, args, ...)``) in this process: the test above runs
    the entry point as a subprocess with the user's package on PYTHONPATH; this one needs the exit status
    and stderr of a run whose objective raises (issue #52 item 2: ~8 CPU s of imports fewer)."""
    import torch
    from accelerate.state import AcceleratorState

    from rltf.run.cli import RESUME_ADVICE, run_cli
    from train.rltf import main  # a recipe (train/ is not a package of the layers): its main, in process

    monkeypatch.syspath_prepend(str(user_pkg))
    monkeypatch.chdir(ROOT)
    threads = torch.get_num_threads()
    AcceleratorState._reset_state(True)
    capsys.readouterr()
    try:
        with pytest.raises(SystemExit) as info:
            run_cli(main, ["rltf.objective=myobjectives:broken", f"output_dir={tmp_path}", "run_name=broken",
                           f"planner.embedded.dir={tmp_path / 'emb'}", *ONE_STEP], interrupted=RESUME_ADVICE)
    finally:
        AcceleratorState._reset_state(True)
        torch.set_num_threads(threads)
    done = subprocess.CompletedProcess([], info.value.code, *capsys.readouterr())
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == "error: the objective myobjectives:broken (rltf.objective) raised RuntimeError: boom", \
        done.stderr[-2000:]
