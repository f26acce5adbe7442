"""flow.score_batch: a flow step re-scores its decisions N at a time (values first, then the loss's
backward chunk by chunk) and lands on the parameters of the one-forward step, with at most N
decisions in any forward pass (the trainer's, the clipped epochs' and the KL reference's)."""

from __future__ import annotations

import copy

import pytest
import torch

import envs as env_factory
import rltf.flows.backends.planner as planner_backend
from rltf.config.loading import ConfigError, load_config
from rltf.planners.loading import load_planner
from rltf.planners.tokenizer import tokenizer_texts_for
from rltf.rl.update import Updater
from rltf.run.distributed import Sharding
from tests.flows.test_flow_rl import tiny_cfg

# the travel flows cut their prompts to planner.max_prompt_tokens by design (their recipe,
# rltf/flows/evaluate.py, filters the same class); tests/rl/test_rl_correctness.py asserts the warning itself
pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::constrained_decoding.prompts.PromptTruncationWarning")]

CHUNK = 3


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flow_chunks")
    cfg = tiny_cfg(tmp)
    train, _ = env_factory.make_train_and_held_out(cfg.env)
    return tmp, train, load_planner(cfg.planner, tokenizer_texts_for(train))


@pytest.fixture
def forward_sizes(monkeypatch):
    """The number of decisions in every re-scoring forward pass (every path calls plan_logprobs)."""
    sizes: list[int] = []
    real = planner_backend.plan_logprobs

    def recorded(model, tokenizer, prompts, *args, **kwargs):
        sizes.append(len(prompts))
        return real(model, tokenizer, prompts, *args, **kwargs)

    monkeypatch.setattr(planner_backend, "plan_logprobs", recorded)
    return sizes


def _trained(world, tmp, steps, *extra):
    """The planner's weights after ``steps`` flow steps, and the step rows."""
    from accelerate import Accelerator

    from rltf.flows.training.trainer import FlowRLTFTrainer

    _, train, base = world
    planner = copy.deepcopy(base)
    cfg = tiny_cfg(tmp, "run_name=flow", "rltf.tasks_per_batch=1", *extra)  # 2 passes of one query: ~24 decisions
    trainer = FlowRLTFTrainer(cfg, planner, train, Accelerator(cpu=True))
    rows = [trainer.train_step() for _ in range(steps)]
    return torch.cat([p.detach().flatten() for p in planner.model.parameters()]), rows


@pytest.mark.parametrize("extra, steps", [
    ((), 1),  # REINFORCE
    (("rltf.update_epochs=2", "rltf.minibatches=2", "rltf.kl_coef=0.5"), 2),  # clipped epochs, KL reference
], ids=["reinforce", "clipped-kl"])
def test_chunked_rescoring_gives_the_one_forward_step(world, tmp_path, forward_sizes, extra, steps):
    whole, whole_rows = _trained(world, tmp_path / "whole", steps, *extra)
    assert max(forward_sizes) > CHUNK  # the unchunked step puts more decisions than a chunk in one forward
    forward_sizes.clear()
    chunked, chunked_rows = _trained(world, tmp_path / "chunked", steps, f"flow.score_batch={CHUNK}", *extra)
    assert forward_sizes and max(forward_sizes) <= CHUNK
    assert not torch.equal(whole, torch.cat([p.detach().flatten() for p in world[2].model.parameters()]))
    # Adam's first step is ~lr·sign(g) (lr 0.01), so a weight whose gradient is ~eps moves by float noise
    # in it; atol 1e-4 is 1% of a step
    torch.testing.assert_close(chunked, whole, rtol=1e-4, atol=1e-4)
    for a, b in zip(whole_rows, chunked_rows):
        for key in ("train/loss", "train/reward", "train/kl", "train/grad_norm"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key


def _linear_state(on_nonfinite="stop", sharding="replicated"):
    """An :class:`~rltf.rl.update.Updater` around a linear model scoring 7 samples."""
    from accelerate import Accelerator

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # (Adam's first step would see only the signs)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    acc = Accelerator(cpu=True)
    return Updater(model, optimizer, scheduler, Sharding(sharding, acc), acc, max_grad_norm=0.5,
                   on_nonfinite=on_nonfinite, lr=0.1)


def test_apply_in_chunks_is_the_chain_rule_of_apply():
    x = torch.randn(7, 4, generator=torch.Generator().manual_seed(1))
    weights = torch.linspace(-1, 1, 7)

    def loss_of(scores):  # not linear in the scores: the chunks must be weighted by d loss / d scores
        return -(weights * scores).sum() + (scores**2).mean()

    whole = _linear_state()
    reference = whole.apply(loss_of(whole.model(x).squeeze(1)), step=0)
    chunked = _linear_state()
    values = chunked.model(x).squeeze(1).detach().requires_grad_(True)
    seen: list[int] = []

    def rescore(rows):
        seen.append(len(rows))
        return chunked.model(x[rows]).squeeze(1)

    done = chunked.apply_in_chunks(loss_of(values), values, range(7), rescore, 3, step=0)
    assert seen == [3, 3, 1] and done.skipped == 0.0 and done.grad_norm == pytest.approx(reference.grad_norm, rel=1e-6)
    for p, q in zip(chunked.model.parameters(), whole.model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_apply_in_chunks_skips_a_nonfinite_loss_without_running_the_model():
    state = _linear_state("skip")
    before = [p.detach().clone() for p in state.model.parameters()]
    values = torch.tensor([float("nan"), 1.0], requires_grad=True)
    with pytest.warns(RuntimeWarning, match="step skipped"):
        done = state.apply_in_chunks(values.sum(), values, [0, 1], lambda rows: pytest.fail("re-scored"), 1, step=0)
    assert done.skipped == 1.0 and all(torch.equal(p, q) for p, q in zip(state.model.parameters(), before))


def test_apply_in_chunks_refuses_sharded_processes():
    state = _linear_state(sharding="fsdp")
    values = torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="fsdp sharding"):
        state.apply_in_chunks(values.sum(), values, [0, 1], lambda rows: values[rows], 1, step=0)


def test_score_batch_must_be_positive(tmp_path):
    with pytest.raises(ConfigError, match="flow.score_batch"):
        load_config(["config=configs/travel-mtp.yaml", "flow.score_batch=0", f"output_dir={tmp_path}"])
