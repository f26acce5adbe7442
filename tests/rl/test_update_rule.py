"""One update rule for both trainers (issue 35): :func:`rltf.rl.update.policy_update` takes a flat
batch as one decision per sample; the config's allowed algorithm names are the registries' names;
a trajectory's log π_c is the sum of its decisions' with their gradients."""

from __future__ import annotations

import typing

import numpy as np
import pytest
import torch
from accelerate import Accelerator

from rltf.algorithms.baselines import BASELINES, Baseline
from rltf.algorithms.credit import CREDITS
from rltf.algorithms.objectives import OBJECTIVES, RATIOS, objective_name
from rltf.algorithms.registry import Registry
from rltf.config.flow import FlowSettings
from rltf.config.loading import ConfigError, load_config
from rltf.config.sections import RltfSettings
from rltf.flows.training.trajectory import trajectory_logprobs
from rltf.rl.update import Updater, policy_update
from rltf.run.distributed import Sharding


# ------------------------------------------------------------------------------ registries
def test_the_config_accepts_exactly_the_registries_names():
    rltf_hints, flow_hints = typing.get_type_hints(RltfSettings), typing.get_type_hints(FlowSettings)
    assert typing.get_args(rltf_hints["baseline"]) == BASELINES.names()
    assert typing.get_args(rltf_hints["ratio"]) == RATIOS.names()
    assert typing.get_args(flow_hints["credit"]) == CREDITS.names()
    assert {objective_name(1, 1), objective_name(2, 1)} == {"reinforce", "clipped"} <= set(OBJECTIVES)


@pytest.mark.parametrize("name", BASELINES.names())
def test_a_group_baseline_needs_two_samples_per_task(name, tmp_path):
    overrides = [f"output_dir={tmp_path}", f"rltf.baseline={name}", "rltf.k_samples=1"]
    if BASELINES[name].group:
        with pytest.raises(ConfigError, match="expected k_samples >= 2"):
            load_config(overrides)
    else:
        assert load_config(overrides).rltf.baseline == name


def test_an_unknown_name_lists_the_registered_ones():
    registry = Registry("widget", {"a": len, "b": abs})
    assert registry.names() == ("a", "b") and "a" in registry and "c" not in registry and registry["b"] is abs
    with pytest.raises(ValueError, match="unknown widget 'c'; expected one of a, b"):
        registry.lookup("c")
    with pytest.raises(ValueError, match="unknown baseline 'mean'"):
        Baseline("mean")


# ------------------------------------------------------------------------ trajectory log π_c
def test_a_trajectorys_logprob_is_the_sum_of_its_decisions_with_their_gradients():
    logp = torch.tensor([-1.0, -2.0, -0.5, -0.25], requires_grad=True)
    owner = torch.tensor([0, 0, 2, 2])
    traj = trajectory_logprobs(logp, owner, 3)
    assert traj.tolist() == [-3.0, 0.0, -0.75]  # trajectory 1 made no decision
    traj.sum().backward()
    assert logp.grad.tolist() == [1.0, 1.0, 1.0, 1.0]


# ------------------------------------------------------------------------------ update rule
def _linear(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    acc = Accelerator(cpu=True)
    return Updater(model, optimizer, scheduler, Sharding("replicated", acc), acc, max_grad_norm=10.0)


class Rule:
    objective, baseline, update_epochs, minibatches, clip_eps, ratio = "auto", "moving_average", 2, 2, 0.2, "trajectory"


@pytest.mark.parametrize("chunk", [None, 2])
def test_a_flat_batch_is_the_flow_case_of_one_decision_per_sample(chunk):
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(1))
    weights = torch.linspace(-1, 1, 6)
    done = []
    for owner in (None, torch.arange(6)):  # flat plans; a flow whose trajectories are one decision each
        updater = _linear()

        def score(rows, model=updater.model):
            return model(x[rows]).squeeze(1)

        logp = score(list(range(6)))
        if chunk is not None:
            logp = logp.detach()
        applied = policy_update(logp, weights, 6, score, Rule, updater, seed=0, step=3, owner=owner, chunk=chunk)
        done.append((applied, [p.detach().clone() for p in updater.model.parameters()]))
    (a, pa), (b, pb) = done
    assert set(a.passes) == set(b.passes) == {f"train/epoch{e}/{k}" for e in (1, 2)
                                              for k in ("clip_fraction", "approx_kl")}
    assert a.update.skipped == b.update.skipped == 0.0
    np.testing.assert_allclose(a.update.grad_norm, b.update.grad_norm, rtol=1e-6)
    for p, q in zip(pa, pb):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)
