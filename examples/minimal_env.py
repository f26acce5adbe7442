"""A minimal env: spell a word backwards. All a new env writes: tasks, grammar, reward, formatting.

An action is an arrangement of the word's letters (the grammar, a choice among every distinct one
built on constrained_decoding's row languages, so the decoder writes nothing else); the reward is the
fraction of letters in their place. :class:`envs.base.RLTFEnvBase` answers the rest of the env
interface. Train it from the command line (``env.name`` loads the EnvSpec :func:`spec` returns)::

    python train/rltf.py env.name=examples.minimal_env:spec run_name=backwards rltf.steps=50
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from common.config_fields import bound_errors, num
from envs.base import RLTFEnvBase
from envs.registry import EnvSpec
from rltf.flows.engine.choice import choice_grammar

WORDS = ("bird", "calm", "dust", "fern", "gold", "harp", "iron", "jolt", "kelp", "lamp", "mint", "nest",
         "opal", "pint", "quiz", "rust", "salt", "tusk", "vest", "wolf", "yarn", "zinc", "band", "cork")
SPLIT = {"train": list(range(16)), "validation": list(range(16, 20)), "test": list(range(20, 24))}


@dataclass(frozen=True)
class Task:
    id: int
    description: str  # the planner's prompt
    reference_plan: str  # what fine-tuning imitates: the word reversed
    metric: str = "backwards"  # the task's group in a results table


@dataclass(frozen=True)
class Result:
    reward: float
    valid: bool
    plan_text: str
    error: str | None = None
    sample_errors: tuple = ()  # nothing is executed


class BackwardsEnv(RLTFEnvBase):
    def __init__(self, seed: int, split: str):
        super().__init__()
        words = np.random.default_rng(seed).permutation(WORDS)  # the seed deals the words to the splits
        self.all = [Task(i, f"spell backwards: {w}", str(w)[::-1]) for i, w in enumerate(words)]
        self.ids = sum(SPLIT.values(), []) if split == "all" else SPLIT[split]

    def tasks(self):
        return [self.all[i] for i in self.ids]

    def grammar(self, tokenizer, task):  # built once per (tokenizer, options): the decoder caches by identity
        letters = self.get_task(task).reference_plan
        return choice_grammar(tokenizer, sorted({"".join(p) for p in itertools.permutations(letters)}))

    def reward_plans(self, pairs, rng=None):
        out = []
        for ref, plan in pairs:
            task, text = self.get_task(ref), self.format_plan(plan)
            right = [a == b for a, b in zip(text, task.reference_plan)]
            valid = sorted(text) == sorted(task.reference_plan)
            out.append(Result(float(np.mean(right)) if valid else 0.0, valid, text,
                              None if valid else "not an arrangement of the word's letters"))
        return out

    def format_plan(self, plan):
        return str(plan)

    def plan_instructions(self):
        return "Answer with the letters of the word in reverse order, nothing else."


@dataclass
class Section:
    """The run config's ``env:`` section: ``env.name`` and this env's keys (``env.seed``)."""

    name: str = "backwards"
    seed: int = num(0, ge=0)  # deals the words to the splits

    def validate(self, prefix: str = "env") -> None:
        for message in bound_errors(self, f"{prefix}."):
            raise ValueError(message)


def spec() -> EnvSpec:
    """What ``env.name=examples.minimal_env:spec`` names (rltf registers it under ``backwards``)."""
    return EnvSpec(name="backwards", section=Section, make=lambda s, split="train", **_: BackwardsEnv(s.seed, split),
                   make_train_and_held_out=lambda s, **_: (BackwardsEnv(s.seed, "train"), BackwardsEnv(s.seed, "all")),
                   split_ids=lambda s: {k: list(v) for k, v in SPLIT.items()},
                   describe=lambda s: [f"env         spell a word backwards: {len(WORDS)} words, seed {s.seed}"])
