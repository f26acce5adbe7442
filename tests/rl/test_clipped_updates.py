"""Several exact updates per batch (issue 26 item 1): ``rltf.update_epochs`` passes of
``rltf.minibatches`` steps on the clipped ratio surrogate of the constrained policy. One pass of one
minibatch is today's REINFORCE step, bit for bit; the first minibatch's ratio is exactly 1; unclipped,
the surrogate's gradient is REINFORCE's (importance-weighted off-policy); the clip zeroes the gradient
of a sample pushed out of the range in its advantage's direction; a killed two-epoch run resumes
exactly; the flow trainer takes several updates per batch too."""

import numpy as np
import pytest
import torch
from accelerate import Accelerator

import rltf.algorithms.objectives as objectives
from constrained_decoding.decode import sample_plans
from constrained_decoding.logprobs import plan_logprobs
from rltf.algorithms.baselines import Baseline
from rltf.algorithms.objectives import clipped_surrogate, decision_log_ratios
from rltf.config.loading import load_config
from rltf.planners.planner import Planner
from rltf.rl.steps import draw_step
from rltf.rl.trainer import RLTFTrainer
from rltf.rl.update import Updater, minibatches
from tests.flows.test_flow_rl import _trainer as flow_trainer
from tests.flows.test_flow_rl import _weights, world  # noqa: F401  (world: the flow tests' fixture)
from tests.tiny_models import tiny_t5, unigram_tokenizer
from tests.toy_env import toy_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_cfg(tmp_path, *overrides):
    return load_config([f"output_dir={tmp_path}", "run_name=toy", "rltf.tasks_per_batch=2", "rltf.k_samples=6",
                        "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=0", "logging.progress_bar=false",
                        *overrides])


def make_planner(seed=0):
    tok = unigram_tokenizer()
    return Planner(tiny_t5(tok, seed=seed), tok, True, "tiny-t5")


def params(planner):
    return {k: v.detach().clone() for k, v in planner.model.state_dict().items()}


# -------------------------------------------------------------- 1. one pass is REINFORCE
def reinforce_by_hand(cfg, planner, env):
    """The REINFORCE step rltf took before update_epochs existed, written out: draw, sample, reward,
    score, advantage against the moving average, −mean(A·log π_c), clip, AdamW."""
    rl = cfg.rltf
    draw = draw_step(cfg.seed, 0, [t.id for t in env.tasks()], rl.tasks_per_batch)
    tasks = [env.get_task(i) for i in draw.task_ids]
    planner.model.eval()
    decoded = sample_plans(planner.model, planner.tokenizer, [t.description for t in tasks],
                           [env.grammar(planner.tokenizer, t) for t in tasks], rl.k_samples, rl.temperature,
                           seed=draw.sample_seed)
    plan_tasks = [t for t, ds in zip(tasks, decoded) for _ in ds]
    plans = [d for ds in decoded for d in ds]
    rewards = np.array([r.reward for r in env.reward_plans([(t, d.plan) for t, d in zip(plan_tasks, plans)],
                                                           rng=draw.env_rng)])
    logp = plan_logprobs(planner.model, planner.tokenizer, [t.description for t in plan_tasks],
                         [d.grammar for d in plans], plans, rl.temperature)
    adv, _ = Baseline(rl.baseline, rl.baseline_decay).advantages(rewards, [t.id for t in plan_tasks])
    shaped = adv - rl.entropy_coef * logp.detach().float().numpy().astype(np.float64)
    loss = -(torch.as_tensor(shaped, dtype=torch.float32) * logp).mean()
    trainable = [p for p in planner.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=rl.lr, weight_decay=0.0)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainable, rl.max_grad_norm)
    optimizer.step()


def test_one_pass_of_one_minibatch_is_todays_reinforce_step_bit_for_bit(tmp_path):
    cfg = make_cfg(tmp_path, "rltf.entropy_coef=0.01")
    assert (cfg.rltf.update_epochs, cfg.rltf.minibatches) == (1, 1)  # the defaults
    start = params(make_planner())
    trained, env = make_planner(), toy_env()
    trainer = RLTFTrainer(cfg, trained, env, Accelerator(cpu=True))
    row = trainer.train_step()
    assert not any(k.startswith("train/epoch") for k in row)  # REINFORCE logs no ratio statistics
    by_hand = make_planner()
    reinforce_by_hand(cfg, by_hand, toy_env())
    after, expected = params(trained), params(by_hand)
    assert any(not torch.equal(after[k], start[k]) for k in after)
    for k in after:
        assert torch.equal(after[k], expected[k]), k


def test_the_first_minibatch_has_ratio_exactly_one_and_takes_the_reinforce_step(tmp_path, monkeypatch):
    """update_epochs=2, minibatches=1: the first update's r is exactly 1 and its step is the REINFORCE
    step of the same batch; the second pass re-scores the moved policy (r ≠ 1) and logs its statistics."""
    ratios, snapshots = [], []
    surrogate, apply = objectives.clipped_surrogate, Updater.apply

    def recording_surrogate(log_ratio, weights, clip_eps):
        ratios.append(log_ratio.detach().clone())
        return surrogate(log_ratio, weights, clip_eps)

    def recording_apply(updater, loss, step):
        applied = apply(updater, loss, step)
        snapshots.append({k: v.detach().clone() for k, v in updater.model.state_dict().items()})
        return applied

    monkeypatch.setattr(objectives, "clipped_surrogate", recording_surrogate)  # what the clipped entry computes
    monkeypatch.setattr(Updater, "apply", recording_apply)  # every optimizer step of the update rule
    cfg = make_cfg(tmp_path, "rltf.update_epochs=2", "rltf.entropy_coef=0.01")
    row = RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True)).train_step()
    assert len(ratios) == len(snapshots) == 2
    assert torch.equal(ratios[0].exp(), torch.ones_like(ratios[0]))  # exactly 1, not approximately
    assert ratios[1].abs().max() > 0  # the second pass sees the updated policy
    by_hand = make_planner()
    reinforce_by_hand(cfg, by_hand, toy_env())
    expected = params(by_hand)
    for k, v in snapshots[0].items():
        torch.testing.assert_close(v, expected[k], rtol=1e-6, atol=1e-9)
    assert row["train/epoch1/clip_fraction"] == 0.0 and row["train/epoch1/approx_kl"] == 0.0
    assert 0.0 <= row["train/epoch2/clip_fraction"] <= 1.0 and row["train/epoch2/approx_kl"] >= 0.0


# ------------------------------------------------------------ 2. the surrogate's gradient
def _policy(n=6, seed=0):
    """n samples' log-probabilities under a small softmax policy with a shared parameter vector."""
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(4, 5, generator=g, requires_grad=True)
    picks = torch.randint(0, 5, (n,), generator=g)
    rows = torch.arange(n) % 4
    return theta, lambda: torch.log_softmax(theta, -1)[rows, picks]


@pytest.mark.parametrize("shift", [0.0, 0.05])
def test_unclipped_the_surrogate_gradient_is_the_importance_weighted_reinforce_gradient(shift):
    theta, logp_of = _policy()
    adv = torch.tensor([1.0, -0.5, 0.25, -2.0, 0.75, 0.3], dtype=torch.float64)
    logp = logp_of()
    old = logp.detach() - shift * torch.tensor([1.0, -1.0, 0.5, -0.5, 1.0, -1.0])  # |log r| ≤ 0.05: inside ±0.2
    (-clipped_surrogate(logp - old, adv, 0.2).objective.mean()).backward()
    surrogate_grad = theta.grad.clone()
    theta.grad = None
    ratio = (logp.detach() - old).exp().double()
    (-((ratio * adv).float() * logp_of()).mean()).backward()  # REINFORCE, weighted by r (1 when on-policy)
    torch.testing.assert_close(surrogate_grad, theta.grad, rtol=1e-5, atol=1e-8)


def test_clipping_zeroes_the_gradient_of_a_sample_pushed_out_in_its_advantages_direction():
    logp = torch.zeros(4, requires_grad=True)  # each sample its own parameter: the gradient is per sample
    log_r = torch.log(torch.tensor([1.5, 1.5, 0.5, 0.5]))
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0])
    out = clipped_surrogate(logp + log_r, adv, 0.2)
    out.objective.sum().backward()
    # r = 1.5 with A > 0 and r = 0.5 with A < 0: clipped, no gradient; the others: r·A
    assert logp.grad.tolist() == pytest.approx([0.0, -1.5, 0.0, 0.5], rel=1e-6)
    assert out.clip_fraction == 0.5
    assert out.approx_kl == pytest.approx(float(((log_r.exp() - 1) - log_r).mean()), rel=1e-6)
    with pytest.raises(ValueError, match="clip_eps=1.5"):
        clipped_surrogate(logp, adv, 1.5)


def test_a_trajectorys_decisions_share_its_ratio_with_their_own_gradients():
    logp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    old = torch.tensor([-1.1, -1.8, -0.4])
    owner = torch.tensor([0, 0, 1])
    traj = decision_log_ratios(logp, old, owner, 2, "trajectory")
    torch.testing.assert_close(traj.detach(), torch.tensor([-0.1, -0.1, -0.1]), rtol=1e-6, atol=1e-7)
    jacobian = torch.stack([torch.autograd.grad(traj[i], logp, retain_graph=True)[0] for i in range(3)])
    assert torch.equal(jacobian, torch.eye(3))  # each decision's gradient: its own log π_c only
    own = decision_log_ratios(logp, old, owner, 2, "decision")
    torch.testing.assert_close(own.detach(), torch.tensor([0.1, -0.2, -0.1]), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="unknown ratio 'token'; expected one of trajectory, decision"):
        decision_log_ratios(logp, old, owner, 2, "token")


def test_minibatches_are_a_seeded_partition_of_equal_sizes():
    cuts = minibatches(10, 3, seed=0, step=4, epoch=1)
    assert sorted(np.concatenate(cuts).tolist()) == list(range(10)) and [len(c) for c in cuts] == [4, 3, 3]
    assert all(np.array_equal(a, b) for a, b in zip(cuts, minibatches(10, 3, seed=0, step=4, epoch=1)))
    assert not all(np.array_equal(a, b) for a, b in zip(cuts, minibatches(10, 3, seed=0, step=4, epoch=2)))
    with pytest.raises(ValueError, match="rltf.minibatches=11: expected 1 to 10"):
        minibatches(10, 11, seed=0, step=0, epoch=0)


def test_too_many_minibatches_for_the_batch_are_refused(tmp_path):
    cfg = make_cfg(tmp_path, "rltf.minibatches=13", "rltf.steps=1")  # 2 tasks x 6 samples = 12 per step
    with pytest.raises(ValueError, match="rltf.minibatches=13: expected at most 12"):
        RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True)).train()


# ----------------------------------------------------------------- 3. exact resume
class Killed(Exception):
    pass


def test_a_killed_two_epoch_run_resumes_exactly(tmp_path):
    overrides = ["rltf.steps=4", "rltf.update_epochs=2", "rltf.minibatches=3", "rltf.checkpoint_every=2",
                 "rltf.lr_schedule=linear", "rltf.baseline=grpo", "rltf.eval_every=1", "rltf.select=last"]

    def run(root, kill_at=None):
        planner, calls = make_planner(), {"n": 0}

        def evaluate(_):
            calls["n"] += 1
            if kill_at is not None and calls["n"] == kill_at:
                raise Killed
            return {}

        trainer = RLTFTrainer(make_cfg(root, *overrides), planner, toy_env(), Accelerator(cpu=True),
                              validate=evaluate)
        resumed = trainer.resume()
        return trainer, planner, trainer.train(), resumed

    full = run(tmp_path / "a")
    with pytest.raises(Killed):
        run(tmp_path / "b", kill_at=4)  # evaluations at steps 0, 1, 2, 3: dies in step 3, after checkpoint 2
    again = run(tmp_path / "b")
    assert again[3] is True and again[0].step == full[0].step == 4
    def numbers(history):  # every row's numbers but the speed and the (unsaved) execution cache's hit rate
        return [{k: v for k, v in row.items() if k not in ("train/plans_per_s", "train/cache_hit_rate")}
                for row in history]

    assert numbers(again[2]) == numbers(full[2])  # the per-epoch clip fractions and approximate KLs included
    assert all(0.0 <= row["train/epoch2/clip_fraction"] <= 1.0 for row in full[2])
    a, b = params(full[1]), params(again[1])
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # the schedule counted every optimizer step: 4 steps x 2 passes x 3 minibatches, decayed to 0
    assert full[0].state.scheduler.get_last_lr()[0] == 0.0


# ------------------------------------------------------------------------ 4. flows
@pytest.mark.parametrize("extra", [("rltf.minibatches=2",), ("rltf.ratio=decision",)])
# the travel flows cut their prompts to planner.max_prompt_tokens by design (as in tests/flows)
@pytest.mark.filterwarnings("ignore::constrained_decoding.prompts.PromptTruncationWarning")
def test_a_flow_trainer_step_with_two_epochs_runs(world, tmp_path, extra):  # noqa: F811
    trainer, planner = flow_trainer(world, tmp_path, "rltf.update_epochs=2", *extra)
    before = _weights(planner.model)
    row = trainer.train_step()
    assert trainer.step == 1
    if "rltf.minibatches=2" not in extra:  # one minibatch: the first pass is on-policy, r = 1 exactly
        assert row["train/epoch1/approx_kl"] == 0.0 and row["train/epoch1/clip_fraction"] == 0.0
    assert 0.0 <= row["train/epoch2/clip_fraction"] <= 1.0 and row["train/epoch2/approx_kl"] >= 0.0
    assert np.isfinite(row["train/loss"]) and row["train/skipped"] == 0.0
    assert not torch.equal(_weights(planner.model), before)
