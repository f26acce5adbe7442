"""RLTF on one page, CleanRL-style: sample plans from the constrained decoder, score them with the env,
update the planner with REINFORCE, evaluate. Every piece is the toolkit's; the loop is all here.

    python examples/rltf_minimal.py            # ~20 s on one CPU core

The env is ``examples/minimal_env.py`` (spell a word backwards: an action is an arrangement of the
word's letters, the reward the fraction of letters in place), the planner a tiny T5 built from scratch
with a tokenizer trained on the env's texts (``rltf.planners.embedded``). The full trainer
(``rltf/rl/trainer.py``: baselines, KL, entropy, checkpoints, several processes) is this loop grown up.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from constrained_decoding import greedy_plans, plan_logprobs, sample_plans  # noqa: E402
from examples.minimal_env import SPLIT, BackwardsEnv  # noqa: E402
from rltf.algorithms.baselines import leave_one_out  # noqa: E402
from rltf.algorithms.objectives import reinforce  # noqa: E402
from rltf.config.sections import EmbeddedSettings  # noqa: E402
from rltf.planners.embedded import build_embedded_planner  # noqa: E402

SEED = 0
STEPS = 60  # policy updates
TASKS_PER_STEP = 8  # tasks drawn per update
K = 8  # plans sampled per task
LR = 3e-3


def evaluate(model, tokenizer, env, tasks) -> float:
    """Mean reward of the planner's greedy plan per task (the constrained argmax: always a valid plan)."""
    plans = greedy_plans(model, tokenizer, [t.description for t in tasks], [env.grammar(tokenizer, t) for t in tasks])
    return float(np.mean([r.reward for r in env.reward_plans([(t, p.plan) for t, p in zip(tasks, plans)])]))


def main(steps: int = STEPS) -> dict[str, float]:
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    env, held_out = BackwardsEnv(SEED, "train"), BackwardsEnv(SEED, "all")
    test_tasks = [held_out.get_task(i) for i in SPLIT["test"]]
    planner = build_embedded_planner(EmbeddedSettings(d_model=64, d_ff=128, num_layers=1, num_heads=2,
                                                      vocab_size=300, seed=SEED), env.tokenizer_texts())
    model, tokenizer = planner.model, planner.tokenizer
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    before = evaluate(model, tokenizer, env, env.tasks()), evaluate(model, tokenizer, held_out, test_tasks)
    print(f"before: train {before[0]:.3f}  test {before[1]:.3f}  (greedy plans' mean reward)")

    for step in range(1, steps + 1):
        # 1. draw tasks; each task's grammar holds exactly its valid plans
        tasks = [env.tasks()[i] for i in rng.choice(len(env.tasks()), TASKS_PER_STEP, replace=False)]
        prompts, grammars = [t.description for t in tasks], [env.grammar(tokenizer, t) for t in tasks]
        # 2. sample K plans per task from the constrained policy pi_c (every sample is a valid plan)
        model.eval()  # no dropout: sampling and scoring evaluate the same function
        samples = sample_plans(model, tokenizer, prompts, grammars, k=K, seed=SEED * 10_000 + step)
        # 3. score them with the env: the reward of each (task, plan)
        rewards = np.array([[r.reward for r in env.reward_plans([(t, p.plan) for p in plans])]
                            for t, plans in zip(tasks, samples)])
        # 4. REINFORCE with a leave-one-out baseline: maximise mean (R - b) * log pi_c(plan | task)
        advantages = np.concatenate([r - leave_one_out(r) for r in rewards])
        flat = [p for plans in samples for p in plans]  # DecodedPlans: their rows are teacher-forced as decoded
        logp = plan_logprobs(model, tokenizer, [t.description for t in tasks for _ in range(K)],
                             [p.grammar for p in flat], flat)
        loss = -reinforce(logp, torch.tensor(advantages, dtype=logp.dtype)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step:3d}  reward {rewards.mean():.3f}  loss {loss.item():+.4f}")

    # 5. evaluate: greedy plans on the train tasks and on held-out words
    after = evaluate(model, tokenizer, env, env.tasks()), evaluate(model, tokenizer, held_out, test_tasks)
    print(f"after:  train {after[0]:.3f}  test {after[1]:.3f}")
    return {"before_train": before[0], "before_test": before[1], "train": after[0], "test": after[1]}


if __name__ == "__main__":
    main()
