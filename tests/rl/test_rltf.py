"""RLTF trainer: baselines, the direction of one update, determinism, kill-and-resume equality.

Uses a tiny random T5 planner and a small real environment of string tools (tests/toy_env.py).
"""

import numpy as np
import pytest
import torch
from accelerate import Accelerator

from constrained_decoding.logprobs import plan_logprobs
from envs.openagi.grammar import plan_grammars
from envs.openagi.plans import enumerate_plans
from rltf.algorithms.baselines import Baseline
from rltf.config.loading import load_config
from rltf.planners.planner import Planner
from rltf.rl.trainer import RLTFTrainer
from tests.tiny_models import tiny_t5, unigram_tokenizer
from tests.toy_env import toy_env


def test_moving_average_baseline_uses_only_previous_rewards():
    b = Baseline("moving_average", decay=0.5)
    adv, base = b.advantages([1.0, 0.0], [0, 0])
    assert base.tolist() == [0.0, 1.0] and adv.tolist() == [1.0, -1.0]  # first batch: the others' mean
    adv, base = b.advantages([1.0, 1.0], [0, 0])
    assert base.tolist() == [0.5, 0.5]  # the previous average, not this batch
    assert b.value == pytest.approx(0.75)


def test_rloo_and_per_task_baselines():
    adv, base = Baseline("rloo").advantages([1.0, 0.0, 0.5, 0.2, 0.4], [0, 0, 0, 1, 1])
    assert base.tolist() == pytest.approx([0.25, 0.75, 0.5, 0.4, 0.2])
    b = Baseline("per_task", decay=0.0)
    b.advantages([1.0, 0.0], [3, 4])
    adv, base = b.advantages([0.0, 0.0], [3, 4])
    assert base.tolist() == [1.0, 0.0]
    state = b.state_dict()
    c = Baseline("per_task", decay=0.0)
    c.load_state_dict(state)
    assert c.per_task == b.per_task
    with pytest.raises(ValueError, match="unknown baseline 'mean'"):
        Baseline("mean")


def make_cfg(tmp_path, *overrides):
    return load_config([f"output_dir={tmp_path}", "run_name=toy", "rltf.tasks_per_batch=2", "rltf.k_samples=6",
                        "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=2", "logging.progress_bar=false",
                        *overrides])


def make_planner(seed=0):
    tok = unigram_tokenizer()
    return Planner(tiny_t5(tok, seed=seed), tok, True, "tiny-t5")


def expected_reward(planner, env, task):
    plans = list(enumerate_plans(env.registry, task.inputs, task.target, env.limits))
    with torch.no_grad():
        lp = plan_logprobs(planner.model, planner.tokenizer, [task.description] * len(plans),
                           plan_grammars(planner.tokenizer, [(task.inputs, task.target)] * len(plans), env.registry,
                                         env.limits), plans)
    rewards = torch.tensor([r.reward for r in env.reward_plans([(task, p) for p in plans])])
    # Σ π_c = 1: each term off by its log-probability's float32 error (~1e-5 relative at most), the
    # float32 sum of n terms by up to n roundings
    assert float(lp.exp().sum()) == pytest.approx(1.0, rel=0, abs=1e-5 + len(plans) * torch.finfo(torch.float32).eps)
    return float((lp.exp() * rewards).sum())


def test_one_step_moves_the_policy_along_the_advantage(tmp_path):
    cfg = make_cfg(tmp_path, "rltf.lr=0.001", "rltf.max_grad_norm=0")
    planner, env = make_planner(), toy_env()
    trainer = RLTFTrainer(cfg, planner, env, Accelerator(cpu=True))
    before = [expected_reward(planner, env, t) for t in env.tasks()]
    trainer.train_step()
    b = trainer.last_batch
    assert np.abs(b.advantages).sum() > 0, "the batch needs plans of different rewards"

    def objective():  # sum_i A_i log pi(plan_i): what one REINFORCE step increases
        with torch.no_grad():
            grammars = [env.grammar(planner.tokenizer, i) for i in b.task_ids]
            lp = plan_logprobs(planner.model, planner.tokenizer, b.prompts, grammars, b.plans)
        return float((torch.as_tensor(b.advantages) * lp).sum())

    # undo and redo the update to compare the objective before and after it
    after_obj = objective()
    fresh = make_planner()
    planner_state = {k: v.clone() for k, v in planner.model.state_dict().items()}
    planner.model.load_state_dict(fresh.model.state_dict())
    before_obj = objective()
    planner.model.load_state_dict(planner_state)
    assert after_obj > before_obj
    after = [expected_reward(planner, env, t) for t in env.tasks()]
    assert sum(after) > sum(before)


def test_training_learns_and_is_deterministic(tmp_path):
    runs = []
    for i in range(2):  # 8 steps: the expected reward gains ~0.87 by step 4 already (seed 0)
        cfg = make_cfg(tmp_path / str(i), "rltf.steps=8", "rltf.checkpoint_every=0")
        planner, env = make_planner(), toy_env()
        before = [expected_reward(planner, env, t) for t in env.tasks()]
        hist = RLTFTrainer(cfg, planner, env, Accelerator(cpu=True)).train()
        after = [expected_reward(planner, env, t) for t in env.tasks()]
        runs.append(([h["train/reward"] for h in hist], after))
    assert runs[0] == runs[1]  # same config + seed -> same numbers
    assert sum(after) > sum(before) + 0.1
    assert all(h["train/valid"] == 1.0 for h in hist)
    # sampler vs teacher-forced scorer: other reduction orders, float32 agreement; log-probabilities
    # here are >= -10, so 1e-4 is the scorer tests' rtol=1e-5, atol=1e-5 (seen: < 1e-6)
    assert max(h["train/logprob_mismatch"] for h in hist) < 1e-4


class Killed(Exception):
    pass


def test_kill_and_resume_gives_the_same_final_state(tmp_path):
    def run(cfg, kill_at=None):
        planner, env = make_planner(), toy_env()
        calls = {"n": 0}

        def evaluate(_):
            calls["n"] += 1
            if kill_at is not None and calls["n"] == kill_at:
                raise Killed
            return {}

        cfg.rltf.eval_every = 1
        trainer = RLTFTrainer(cfg, planner, env, Accelerator(cpu=True), validate=evaluate)
        resumed = trainer.resume()
        hist = trainer.train()
        return trainer, planner, hist, resumed

    full = run(make_cfg(tmp_path / "a", "rltf.steps=5", "rltf.baseline=per_task", "rltf.lr_schedule=linear"))
    cfg_b = make_cfg(tmp_path / "b", "rltf.steps=5", "rltf.baseline=per_task", "rltf.lr_schedule=linear")
    with pytest.raises(Killed):
        run(cfg_b, kill_at=4)  # dies in step 3 (calls: step 0, 1, 2, 3), after the checkpoint of step 2
    assert (cfg_b.run_dir / "rltf" / "latest").read_text().strip() == "checkpoint-2"
    again = run(cfg_b)
    assert again[3] is True
    assert [h["train/reward"] for h in again[2]] == [h["train/reward"] for h in full[2]]
    for (k, a), (_, b) in zip(full[1].model.state_dict().items(), again[1].model.state_dict().items()):
        assert torch.equal(a, b), k
    assert full[0].state.baseline.state_dict() == again[0].state.baseline.state_dict()


@pytest.fixture
def fresh_accelerate_state():
    """Accelerate's state is a process-wide singleton; a mixed-precision test needs its own."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    yield
    AcceleratorState._reset_state(True)


def test_bf16_mixed_precision_step(tmp_path, fresh_accelerate_state):
    """accelerate's bf16 autocast: the scorer runs in bf16, the update stays finite and moves the policy."""
    from rltf.run.distributed import sharding_for

    acc = Accelerator(cpu=True, mixed_precision="bf16")
    assert sharding_for(acc).kind == "replicated"
    planner, env = make_planner(), toy_env()
    before = [p.detach().clone() for p in planner.model.parameters()]
    trainer = RLTFTrainer(make_cfg(tmp_path, "rltf.steps=2"), planner, env, acc)
    stats = trainer.train_step()
    assert np.isfinite(stats["train/loss"]) and np.isfinite(stats["train/grad_norm"])
    assert stats["train/logprob_mismatch"] < 0.2  # bf16 scoring vs fp32 sampling: close, not equal
    assert any(not torch.equal(a, b) for a, b in zip(before, planner.model.parameters()))
    assert all(p.dtype == torch.float32 for p in planner.model.parameters())  # master weights stay fp32


def test_fp16_without_loss_scaling_is_refused(fresh_accelerate_state):
    from rltf.run.distributed import sharding_for

    class FakeFp16:  # accelerate refuses fp16 on CPU itself; the check only reads these two fields
        mixed_precision = "fp16"
        distributed_type = Accelerator(cpu=True).distributed_type

    with pytest.raises(ValueError, match="fp16.*bf16"):
        sharding_for(FakeFp16())
