"""The pddl env built from its settings (:class:`envs.pddl.config.PddlEnvConfig`): the problem set (a
folder, or the generator's persisted splits), the reference plans (the folder's, else the planner's,
cached on disk), and the envs of a run's splits."""

from __future__ import annotations

from pathlib import Path

from envs.pddl.config import PddlEnvConfig
from envs.pddl.env import PddlEnv, Shaping
from envs.pddl.instances import GeneratedSettings, ProblemSet, generated_folder, load_folder
from envs.pddl.search import FoundPlan, reference_plan


def settings_of(config: PddlEnvConfig) -> GeneratedSettings:
    generator = config.generator_settings()
    return GeneratedSettings(config.domain, tuple(config.sizes), tuple(config.long_sizes),
                             (config.train_size, config.validation_size, config.test_size, config.test_long_size),
                             config.seed, generator, config.obfuscation_seed, config.renaming)


def problem_set(config: PddlEnvConfig) -> ProblemSet:
    """The folder's problems, or the generated set's (written on first use)."""
    if config.problems is not None:
        domain = config.domain if Path(config.domain).is_file() else None  # as PddlEnvConfig.validate reads it
        return load_folder(config.problems, domain, config.seed)
    return load_folder(generated_folder(settings_of(config)), None, config.seed)


def references(config: PddlEnvConfig, problems: ProblemSet, ids) -> dict[int, FoundPlan | None]:
    """The planner's plan of each task without a plan in its folder (disk-cached)."""
    by_id = {i.id: i for i in problems.instances}
    return {i: reference_plan(by_id[i].task, config.optimal_nodes, config.greedy_nodes)
            for i in ids if by_id[i].given_plan is None}


def split_ids(config: PddlEnvConfig, problems: ProblemSet | None = None) -> dict[str, list[int]]:
    """``train``, ``validation``, ``test`` (the ``test_split`` the config names: test or test-long)."""
    split = (problems or problem_set(config)).split
    return {"train": split["train"], "validation": split["validation"], "test": split[config.test_split]}


def _env(config: PddlEnvConfig, problems: ProblemSet, ids, split: str) -> PddlEnv:
    return PddlEnv(problems, ids, references(config, problems, ids), grammar=config.grammar,
                   max_plan_length=config.max_plan_length,
                   shaping=Shaping(config.shaping.goal_fraction, config.shaping.step_cost), split=split)


def make_envs(config: PddlEnvConfig) -> tuple[PddlEnv, PddlEnv]:
    """``(train env, held-out env)``: the held-out env holds every task of the set (train, validation, test
    and test-long; ``eval.splits=[non_train]`` evaluates all but train, so one run scores both test splits)."""
    problems = problem_set(config)
    parts = split_ids(config, problems)
    every = list(dict.fromkeys([*(i for ids in parts.values() for i in ids), *(i.id for i in problems.instances)]))
    return _env(config, problems, parts["train"], "train"), _env(config, problems, every, "all")


def make_env(config: PddlEnvConfig, split: str = "train") -> PddlEnv:
    """One env of ``split``: train, validation, test, test-long, or all (every task of the set)."""
    problems = problem_set(config)
    if split == "all":
        ids = [i.id for i in problems.instances]
    elif split in problems.split:
        ids = problems.split[split]
    else:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join([*problems.split, 'all'])}")
    return _env(config, problems, ids, split)


def describe_env(config: PddlEnvConfig) -> list[str]:
    """What :func:`make_envs` would load, loading nothing."""
    if config.problems is not None:
        source = f"the problems of {config.problems}"
    else:
        n = (config.train_size, config.validation_size, config.test_size, config.test_long_size)
        source = (f"{config.domain} instances generated with seed {config.seed}: {n[0]} train / {n[1]} validation "
                  f"/ {n[2]} test of {config.sizes[0]}-{config.sizes[1]} objects, {n[3]} test-long of "
                  f"{config.long_sizes[0]}-{config.long_sizes[1]}")
        if config.obfuscation_seed is not None or config.renaming is not None:
            source += f", renamed ({config.renaming or f'words drawn with seed {config.obfuscation_seed}'})"
    return [f"env         pddl: {source}",
            f"            grammar {config.grammar} (plans of at most {config.max_plan_length} actions), "
            f"held-out test: {config.test_split}"]
