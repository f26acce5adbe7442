"""Periodic validation of a trained agent flow (issue 26 item 3, flows): with ``rltf.eval_every > 0``
the flow job's ``validate`` (:func:`rltf.stages.flow_job.flow_validation`: the flow with greedy
decisions on ``flow.validation_queries`` validation queries, final pass with the mean reward as
tie-breaker) scores the planner at step 0 and every ``eval_every`` steps; ``rltf.select:
best_validation`` hands on the best step's weights, ``last`` the last, and a resumed run selects
what the uninterrupted one did."""

import copy
import dataclasses
import json
import re
import time

import pytest
import torch
from accelerate import Accelerator

import envs as env_factory
from envs.travel.flows.domain import TRAVEL_FLOWS
from rltf.config.loading import ConfigError
from rltf.flows.evaluation import table_columns, validation_ids
from rltf.flows.training.trainer import FlowRLTFTrainer
from rltf.planners.loading import load_planner
from rltf.planners.planner import Planner
from rltf.planners.tokenizer import tokenizer_texts_for
from rltf.rl.training_state import VALIDATION_SCORE, VALIDATION_TIEBREAK, Selection
from rltf.run.checkpoint import MODEL_DIR, checkpoints
from rltf.run.distributed import Sharding
from rltf.stages import flow_job
from rltf.stages import plan_job as stages
from tests.flows.test_flow_rl import tiny_cfg

# the travel flows cut their prompts to planner.max_prompt_tokens by design (their recipe,
# rltf/flows/evaluate.py, filters the same class); tests/rl/test_rl_correctness.py asserts the warning itself
pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::constrained_decoding.prompts.PromptTruncationWarning")]

VALIDATES = ("rltf.eval_every=1", "flow.validation_queries=2")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The tiny travel config's envs and an embedded planner (tests copy it before training)."""
    tmp = tmp_path_factory.mktemp("flow_validation")
    cfg = tiny_cfg(tmp)
    train, held = env_factory.make_train_and_held_out(cfg.env)
    return tmp, train, held, load_planner(cfg.planner, tokenizer_texts_for(train))


def _job(world, tmp, *extra):
    """The flow job's run and envs for a tiny config (one process, replicated)."""
    _, train, held, _ = world
    cfg = tiny_cfg(tmp, "run_name=flowval", *extra)
    acc = Accelerator(cpu=True)
    return stages.Run(cfg, acc, Sharding("replicated", acc), time.perf_counter()), stages.Envs(train, held, {})


def _trainer(world, tmp, *extra, validate=None):
    """A flow trainer on a copy of the planner; ``validate`` default: the flow job's, counting its calls."""
    run, envs = _job(world, tmp, *extra)
    planner = copy.deepcopy(world[3])
    calls = []
    if validate is None:
        real = flow_job.flow_validation(run, envs, "mtp")

        def validate(p):
            calls.append(None)
            return real(p)
    trainer = FlowRLTFTrainer(run.cfg, planner, envs.train, run.acc, validate=validate)
    return trainer, planner, run.cfg.run_dir / "rltf", calls


def _weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _saved(rdir, step):
    return _weights(Planner.from_pretrained(rdir / f"checkpoint-{step}" / MODEL_DIR).model)


def test_validation_queries_come_from_the_validation_split_only(world, tmp_path):
    run, envs = _job(world, tmp_path, "flow.validation_queries=3")
    parts = env_factory.split_ids(run.cfg.env)
    ids = validation_ids(run.cfg, run.cfg.flow, envs.held_out)
    assert len(ids) == 3 and set(ids) <= set(parts["validation"]) and not set(ids) & set(parts["test"])
    everything = validation_ids(run.cfg, dataclasses.replace(run.cfg.flow, validation_queries=None), envs.held_out)
    assert everything == list(parts["validation"])
    with pytest.raises(ConfigError, match=re.escape("'flow.validation_queries': 0")):
        tiny_cfg(tmp_path, "flow.validation_queries=0")


def test_the_flow_is_validated_at_step_0_and_every_eval_every_steps(world, tmp_path):
    trainer, _, _, calls = _trainer(world, tmp_path, "rltf.steps=3", "rltf.eval_every=2", "flow.validation_queries=2")
    history = trainer.train()
    rows = trainer.state.validation_rows()
    assert [r["step"] for r in rows] == [0, 2] and len(calls) == 2
    assert [VALIDATION_SCORE in r for r in history] == [False, True, False]
    for row in (trainer.state.initial_validation, history[1]):
        assert 0.0 <= row[VALIDATION_SCORE] <= 1.0 and 0.0 <= row[VALIDATION_TIEBREAK] <= 1.0
    # the score is the greedy flow's final pass on those queries, the tie-breaker its mean reward
    run, envs = _job(world, tmp_path / "again", "flow.validation_queries=2")
    row, _ = flow_job.evaluate_flow(run, world[3], envs, "mtp",
                                    validation_ids(run.cfg, run.cfg.flow, envs.held_out), "check")
    assert trainer.state.initial_validation == {VALIDATION_SCORE: row["final pass"], VALIDATION_TIEBREAK: row["reward"]}


def _scripted(scores):
    """A validate() returning ``(final pass, reward)`` pairs in turn (step 0, eval_every, ...)."""
    left = list(scores)
    return lambda _planner: dict(zip((VALIDATION_SCORE, VALIDATION_TIEBREAK), left.pop(0)))


def test_best_validation_hands_on_the_best_steps_weights_the_reward_breaking_ties(world, tmp_path):
    scores = [(0.0, 0.30), (0.5, 0.40), (0.5, 0.45)]  # steps 0, 1, 2: step 2 ties step 1's pass, better reward
    trainer, planner, rdir, _ = _trainer(world, tmp_path, "rltf.steps=3", "rltf.eval_every=1",
                                         "rltf.checkpoint_every=0", "rltf.save_total_limit=1",
                                         validate=_scripted([*scores, (0.0, 0.9)]))
    trainer.train()
    assert trainer.state.selection == Selection("best_validation", 2, 0.5)
    assert [s for s, _ in checkpoints(rdir)] == [2, 3]  # the best kept through rotation, and the last
    torch.testing.assert_close(_weights(planner.model), _saved(rdir, 2), rtol=0, atol=0)
    assert not torch.equal(_weights(planner.model), _saved(rdir, 3))


def test_select_last_hands_on_the_last_planner(world, tmp_path):
    trainer, planner, rdir, _ = _trainer(world, tmp_path, "rltf.steps=2", "rltf.eval_every=1",
                                         "rltf.select=last", validate=_scripted([(1.0, 1.0), (0.0, 0.0), (0.0, 0.0)]))
    trainer.train()
    assert (trainer.state.selection.select, trainer.state.selection.step) == ("last", 2)
    assert [s for s, _ in checkpoints(rdir)] == [0, 1, 2]  # checkpoint_every=1, and the best (step 0) kept
    torch.testing.assert_close(_weights(planner.model), _saved(rdir, 2), rtol=0, atol=0)


def test_a_resumed_flow_run_selects_what_the_uninterrupted_one_did(world, tmp_path):
    full, full_planner, full_dir, _ = _trainer(world, tmp_path / "a", "rltf.steps=2", *VALIDATES)
    full.train()
    killed, _, _, _ = _trainer(world, tmp_path / "b", "rltf.steps=1", *VALIDATES)  # stops after step 1
    killed.train()
    again, planner, rdir, calls = _trainer(world, tmp_path / "b", "rltf.steps=2", *VALIDATES)
    assert again.resume() and again.step == 1
    again.train()
    assert len(calls) == 1  # step 2 only: steps 0 and 1 were validated before the kill
    assert again.state.selection == full.state.selection
    assert again.state.validation_rows() == full.state.validation_rows()
    torch.testing.assert_close(_weights(planner.model), _weights(full_planner.model), rtol=1e-5, atol=1e-7)
    step = full.state.selection.step
    torch.testing.assert_close(_weights(planner.model), _saved(rdir, step), rtol=0, atol=0)


def test_the_report_names_the_selected_step_and_draws_the_validation_curve(world, tmp_path):
    run, _ = _job(world, tmp_path)
    stages.note_selection(run, Selection("best_validation", 1, 0.5),
                          [{"step": 0, VALIDATION_SCORE: 0.0}, {"step": 1, VALIDATION_SCORE: 0.5}])
    row = {c: 0.5 for c in table_columns(TRAVEL_FLOWS)}
    history = [{"step": 1, "train/reward": 0.2, VALIDATION_SCORE: 0.5}, {"step": 2, "train/reward": 0.3}]
    summary = flow_job.report(run, {"finetuned": row, "rltf": row}, {"finetuned": [], "rltf": []}, [1, 2], "mtp",
                              history)
    md = (run.run_dir / "flow_results.md").read_text()
    assert "| rltf (best validation, step 1) |" in md and "| finetuned |" in md
    saved = json.loads((run.run_dir / "flow_results.json").read_text())
    assert set(saved["table"]) == {"finetuned", "rltf"} == set(summary["table"])
    assert saved["rltf_selection"]["step"] == 1 and [r["step"] for r in saved["rltf_selection"]["validation"]] == [0, 1]
    assert (run.run_dir / "rewards.png").stat().st_size > 0
