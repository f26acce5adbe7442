"""The best planner on validation (issue 26 item 3): ``rltf.select: best_validation`` scores the
starting planner at step 0 and every ``eval_every`` steps, keeps the best step's checkpoint through
rotation and resume (ties: the earliest) and hands its weights on; ``last`` hands on the last."""

import pytest
import torch
from accelerate import Accelerator

from rltf.planners.planner import Planner
from rltf.rl.trainer import RLTFTrainer
from rltf.rl.training_state import VALIDATION_SCORE
from rltf.run.checkpoint import MODEL_DIR, checkpoints, save_checkpoint
from tests.rl.test_clipped_updates import make_cfg, make_planner, params
from tests.toy_env import toy_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Killed(Exception):
    pass


def scripted(scores, kill_at=None):
    """An evaluate() returning ``scores`` in turn (one per validation: step 0, eval_every, ...)."""
    calls = []

    def evaluate(_planner):
        calls.append(len(calls))
        if kill_at is not None and len(calls) == kill_at:
            raise Killed
        return {VALIDATION_SCORE: scores[len(calls) - 1]}

    return evaluate


def train(root, scores, *overrides, kill_at=None, resume=False):
    cfg = make_cfg(root, "rltf.steps=6", "rltf.eval_every=2", "rltf.save_total_limit=1", *overrides)
    planner = make_planner()
    trainer = RLTFTrainer(cfg, planner, toy_env(), Accelerator(cpu=True), validate=scripted(scores, kill_at))
    if resume:
        assert trainer.resume()
    trainer.train()
    return trainer, planner, cfg.run_dir / "rltf"


def saved(rdir, step):
    return params(Planner.from_pretrained(rdir / f"checkpoint-{step}" / MODEL_DIR))


def same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


def test_the_best_validation_step_is_kept_and_handed_on_ties_to_the_earliest(tmp_path):
    trainer, planner, rdir = train(tmp_path, [0.5, 0.7, 0.7, 0.6])  # steps 0, 2, 4, 6
    sel = trainer.selection
    assert (sel.select, sel.step, sel.score, sel.note) == ("best_validation", 2, 0.7, "")
    assert sel.label == "rltf (best validation, step 2)"
    # rotation keeps the newest (save_total_limit=1) and the best
    assert [s for s, _ in checkpoints(rdir)] == [2, 6]
    assert same(params(planner), saved(rdir, 2)) and not same(params(planner), saved(rdir, 6))
    assert [(r["step"], r[VALIDATION_SCORE]) for r in trainer.state.validation_rows()] == [
        (0, 0.5), (2, 0.7), (4, 0.7), (6, 0.6)]
    assert [r["step"] for r in trainer.state.history] == [1, 2, 3, 4, 5, 6]  # step rows only


def test_the_starting_planner_wins_when_training_made_it_worse(tmp_path):
    start = params(make_planner())
    trainer, planner, rdir = train(tmp_path, [0.9, 0.1, 0.2, 0.3])
    assert trainer.selection.step == 0 and trainer.selection.label == "rltf (best validation, step 0)"
    assert [s for s, _ in checkpoints(rdir)] == [0, 6]
    assert same(params(planner), start) and same(saved(rdir, 0), start)


def test_select_last_hands_on_the_last_planner_and_still_keeps_the_best(tmp_path):
    trainer, planner, rdir = train(tmp_path, [0.9, 0.1, 0.2, 0.3], "rltf.select=last")
    assert (trainer.selection.select, trainer.selection.step, trainer.selection.score) == ("last", 6, 0.3)
    assert trainer.selection.label == "rltf"
    assert [s for s, _ in checkpoints(rdir)] == [0, 6]  # the best (step 0) kept for a resume under best_validation
    assert same(params(planner), saved(rdir, 6))


def test_without_validation_best_validation_falls_back_to_the_last_and_says_why(tmp_path):
    cfg = make_cfg(tmp_path, "rltf.steps=2")  # eval_every=0
    trainer = RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True), validate=scripted([1.0]))
    trainer.train()
    sel = trainer.selection
    assert sel.step == 2 and "rltf.eval_every=0" in sel.note and sel.label == "rltf"


def test_a_resumed_run_keeps_the_best(tmp_path):
    full, full_planner, _ = train(tmp_path / "a", [0.5, 0.8, 0.7, 0.6], "rltf.checkpoint_every=2")
    with pytest.raises(Killed):  # dies at step 6's validation, after checkpoint-4
        train(tmp_path / "b", [0.5, 0.8, 0.7, 0.6], "rltf.checkpoint_every=2", kill_at=4)
    again, planner, rdir = train(tmp_path / "b", [0.6], "rltf.checkpoint_every=2", resume=True)
    assert again.selection == full.selection and again.selection.step == 2
    assert [s for s, _ in checkpoints(rdir)] == [2, 6]
    assert same(params(planner), params(full_planner))


def test_rotation_never_deletes_a_protected_checkpoint(tmp_path):
    planner = make_planner()
    for step in (1, 2, 3, 4):
        save_checkpoint(tmp_path, step, planner, {}, keep=2, protect=(1,))
    assert [s for s, _ in checkpoints(tmp_path)] == [1, 3, 4]
    save_checkpoint(tmp_path, 5, planner, {}, keep=1, protect=(4,))  # a new best: the old one may go
    assert [s for s, _ in checkpoints(tmp_path)] == [4, 5]


def test_a_run_resumed_from_select_last_to_best_validation_reports_the_true_best(tmp_path):
    """Issue 38 item 6: trained under select=last, killed, resumed under best_validation: the best step
    (4, 0.8) was rotated away before the fix and step 6 was reported as the best."""
    scores = [0.5, 0.6, 0.8, 0.7]  # steps 0, 2, 4, 6
    with pytest.raises(Killed):  # dies at step 6's validation, after checkpoint-5
        train(tmp_path, scores, "rltf.select=last", "rltf.checkpoint_every=1", kill_at=4)
    again, planner, rdir = train(tmp_path, [0.7], "rltf.checkpoint_every=1", resume=True)
    sel = again.selection
    assert (sel.select, sel.step, sel.score) == ("best_validation", 4, 0.8)
    assert 4 in [s for s, _ in checkpoints(rdir)]
    assert same(params(planner), saved(rdir, 4))
