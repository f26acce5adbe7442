"""Fingerprint of the RL update: a few steps of both trainers, every step metric and the trained weights.

Not a speed benchmark: a behaviour check. A refactor of the update path (issue 35) must leave every
number a step computes unchanged bit for bit, so this prints, as JSON, for each case

* every metric of every step (``train/...`` rows) except the timings (``train/plans_per_s``), as
  ``repr`` of the float (bit-exact);
* the sha256 of the trained weights (every tensor of the state dict, in order) after the steps.

Cases: 3 flat steps (the embedded default planner of ``configs/default.yaml``, MiniLM encoder and a
small T5 decoder, untrained: no SFT, on OpenAGI-Lite) and 3 flow steps (the ``configs/travel-mtp.yaml``
shape, tiny), each with the REINFORCE default and the clipped path (``rltf.update_epochs=2``,
``rltf.minibatches=2``, with a KL reference), the flow also with its chunked backward
(``flow.score_batch=4``), the decision ratio and ``local+global`` credit; plus the advantages of
every baseline on fixed rewards. Run it before and after a change and compare the files::

    PYTHONPATH=. python benchmarks/step_fingerprint.py > /tmp/fingerprint.json

One torch thread (float sums in one order), a few minutes on a CPU.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from accelerate import Accelerator

import envs as env_factory
from rltf.algorithms.baselines import Baseline
from rltf.config.loading import load_config
from rltf.flows.training.trainer import FlowRLTFTrainer
from rltf.planners.loading import load_planner
from rltf.planners.tokenizer import tokenizer_texts_for
from rltf.rl.trainer import RLTFTrainer

ROOT = Path(__file__).resolve().parents[1]
os.chdir(ROOT)  # the configs are read relative to the repository
sys.path.insert(0, str(ROOT))

STEPS = 3
TIMINGS = ("train/plans_per_s",)

FLAT = ["config=configs/default.yaml", "sft.enabled=false", "rltf.tasks_per_batch=2", "rltf.k_samples=4",
        "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=0", "env.samples_per_step=2",
        "logging.progress_bar=false"]
FLAT_CASES = {
    "reinforce": [],
    "clipped+kl": ["rltf.update_epochs=2", "rltf.minibatches=2", "rltf.kl_coef=0.1"],
    "rloo+normalized": ["rltf.baseline=rloo", "rltf.normalize_rewards=true"],
}
FLOW = ["config=configs/travel-mtp.yaml", "env.travel.days=[3]", "env.travel.levels=[easy]",
        "planner.embedded.d_model=32", "planner.embedded.d_ff=64", "planner.embedded.num_layers=1",
        "planner.embedded.num_heads=2", "planner.embedded.vocab_size=2000", "rltf.tasks_per_batch=2",
        "rltf.k_samples=2", "rltf.lr=0.01", "rltf.checkpoint_every=0", "rltf.entropy_coef=0.05",
        "flow.limit=2", "logging.progress_bar=false"]
FLOW_CASES = {
    "okr": ["flow.methods=[okr]"],
    "okr-clipped-decision-ratio": ["flow.methods=[okr]", "rltf.update_epochs=2", "rltf.minibatches=2",
                                   "rltf.ratio=decision"],
    "okr-chunked+rloo": ["flow.methods=[okr]", "flow.score_batch=3", "rltf.baseline=rloo"],
    "reinforce": [],
    "clipped+kl": ["rltf.update_epochs=2", "rltf.minibatches=2", "rltf.kl_coef=0.1"],
    "clipped-decision-ratio": ["rltf.update_epochs=2", "rltf.minibatches=2", "rltf.ratio=decision"],
    "chunked": ["flow.score_batch=4"],
    "chunked+clipped+kl": ["flow.score_batch=4", "rltf.update_epochs=2", "rltf.minibatches=2", "rltf.kl_coef=0.1"],
    "local+global": ["flow.credit=local+global", "rltf.baseline=grpo"],
}


def weights_sha(model) -> str:
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def numbers(row: dict) -> dict:
    return {k: repr(float(v)) for k, v in sorted(row.items()) if k not in TIMINGS}


def run_case(trainer_cls, cfg, planner, env, **kwargs) -> dict:

    trainer = trainer_cls(cfg, planner, env, Accelerator(cpu=True), **kwargs)
    rows = [numbers(trainer.train_step()) for _ in range(STEPS)]
    return {"rows": rows, "weights_sha256": weights_sha(planner.model)}


def cases(tmp: Path, kind: str, args: list[str], variants: dict[str, list[str]], trainer_cls,
          env_per_case: bool) -> dict:
    """Each variant of ``args`` trained for :data:`STEPS` steps from one copy of the same planner
    (``env_per_case``: each with an env of its own, so no execution cache is shared)."""
    where = [f"output_dir={tmp}", f"planner.embedded.dir={tmp / 'embedded'}"]
    train, _ = env_factory.make_train_and_held_out(load_config([*args, *where]).env)
    base = load_planner(load_config([*args, *where]).planner, tokenizer_texts_for(train))
    out = {}
    for name, extra in variants.items():
        cfg = load_config([*args, *where, f"run_name={kind}-{name}", *extra])
        env = env_factory.make_train_and_held_out(cfg.env)[0] if env_per_case else train
        out[name] = run_case(trainer_cls, cfg, copy.deepcopy(base), env)
    return out


def baseline_cases() -> dict:
    """Every baseline's (advantages, baselines) over three batches of fixed rewards (a repeated task,
    a task seen once, one of a single sample)."""

    rng = np.random.default_rng(0)
    batches = [(rng.random(8), np.array([0, 0, 0, 0, 1, 1, 1, 1])),
               (rng.random(6), np.array([1, 1, 2, 2, 2, 3])),
               (rng.random(4), np.array([0, 0, 3, 3]))]
    out = {}
    for kind in ("moving_average", "per_task", "rloo", "grpo", "dr_grpo"):
        b = Baseline(kind, 0.8)
        out[kind] = [[repr(float(x)) for part in b.advantages(r, ids) for x in part] for r, ids in batches]
    return out


def main() -> None:
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        result = {"baselines": baseline_cases(),
                  "flat": cases(Path(tmp) / "flat", "flat", FLAT, FLAT_CASES, RLTFTrainer, True),
                  "flow": cases(Path(tmp) / "flow", "flow", FLOW, FLOW_CASES, FlowRLTFTrainer, False)}
    print(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
