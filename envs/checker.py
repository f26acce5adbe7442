"""Check an env against the rltf env protocol (:class:`envs.protocol.RLTFEnv`) on its real tasks.

:func:`check_rltf_env` is to rltf's interface what Gymnasium's
``gymnasium.utils.env_checker.check_env`` is to ``reset`` / ``step`` (run both on a new env): every
member is present and returns the declared types, the grammar of a task builds and holds the
task's reference plan, the reference plan is a valid action with a reward in [0, 1], an invalid
action scores 0 without raising, and the optional features answer in their declared form (an env
built on :class:`envs.base.RLTFEnvBase` answers them with the base's defaults).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from constrained_decoding.protocol import Grammar
from envs.protocol import RewardResult, RLTFEnv, Task

NOT_A_PLAN = "\x00 this is not a plan \x00"


class EnvCheckError(AssertionError):
    """An env that breaks the protocol; the message names the member and what was expected."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise EnvCheckError(message)


def protocol_members(protocol: type) -> list[str]:
    """The attributes and methods a protocol class declares."""
    declared = set(getattr(protocol, "__annotations__", {}))
    declared |= {k for k, v in vars(protocol).items() if callable(v) and not k.startswith("_")}
    return sorted(declared)


def _missing(obj: Any, protocol: type) -> list[str]:
    return [m for m in protocol_members(protocol) if not hasattr(obj, m)]


def check_task(task: Any) -> None:
    """``task`` has the :class:`envs.protocol.Task` members with their types."""
    _require(not _missing(task, Task), f"task {task!r} lacks {_missing(task, Task)}")
    _require(isinstance(task.id, (int, np.integer)) and not isinstance(task.id, bool),
             f"task.id {task.id!r} is not an int")
    _require(isinstance(task.description, str) and task.description.strip() != "",
             f"task {task.id}: description {task.description!r} is not a non-empty str")
    _require(isinstance(task.metric, str), f"task {task.id}: metric {task.metric!r} is not a str")


def check_result(result: Any, what: str) -> None:
    """``result`` has the :class:`envs.protocol.RewardResult` members with their types, reward in [0, 1]."""
    _require(not _missing(result, RewardResult), f"{what}: the result lacks {_missing(result, RewardResult)}")
    _require(isinstance(result.reward, (float, int)) and math.isfinite(result.reward) and 0 <= result.reward <= 1,
             f"{what}: reward {result.reward!r} is not a number in [0, 1]")
    _require(isinstance(result.valid, (bool, np.bool_)), f"{what}: valid {result.valid!r} is not a bool")
    _require(isinstance(result.plan_text, str), f"{what}: plan_text {result.plan_text!r} is not a str")
    _require(result.error is None or isinstance(result.error, str), f"{what}: error {result.error!r} is not a str")
    _require(all(e is None or isinstance(e, str) for e in result.sample_errors),
             f"{what}: sample_errors {list(result.sample_errors)!r} are not str or None")


def check_rltf_env(env: Any, tokenizer: Any, n_tasks: int = 2) -> None:
    """Raise :class:`EnvCheckError` where ``env`` breaks :class:`envs.protocol.RLTFEnv`, checked on its
    first ``n_tasks`` tasks that have a reference plan; ``tokenizer`` builds their grammars (one
    that can write the env's plans: e.g. an embedded planner's, trained on ``env.tokenizer_texts()``)."""
    _require(not _missing(env, RLTFEnv),
             f"{type(env).__name__} lacks {_missing(env, RLTFEnv)} of envs.protocol.RLTFEnv")
    for attr in ("headline", "oracle_name"):
        _require(isinstance(getattr(env, attr), str), f"env.{attr} {getattr(env, attr)!r} is not a str")

    tasks = env.tasks()
    _require(isinstance(tasks, list) and len(tasks) > 0, f"env.tasks() returned {type(tasks).__name__} "
                                                         f"{tasks!r:.80}; expected a non-empty list")
    for t in tasks:
        check_task(t)
    ids = [int(t.id) for t in tasks]
    _require(len(set(ids)) == len(ids), f"env.tasks() repeats ids: {sorted(i for i in ids if ids.count(i) > 1)[:5]}")
    _require(int(env.get_task(ids[0]).id) == ids[0], f"env.get_task({ids[0]}) is another task")
    try:
        env.get_task(max(ids) + 10**6)
    except ValueError:
        pass
    else:
        raise EnvCheckError(f"env.get_task({max(ids) + 10**6}) of an unknown id did not raise ValueError")

    texts = env.tokenizer_texts()
    _require(isinstance(texts, list) and texts and all(isinstance(x, str) for x in texts),
             "env.tokenizer_texts() is not a non-empty list of str")
    _require(texts == env.tokenizer_texts(), "env.tokenizer_texts() is not deterministic")

    with_reference = [t for t in tasks if t.reference_plan is not None][:n_tasks]
    _require(bool(with_reference), "no task of env.tasks() has a reference_plan: nothing to fine-tune on")
    for task in with_reference:
        _check_task_actions(env, tokenizer, task)

    results = env.reward_plans([(t, t.reference_plan) for t in with_reference] +
                               [(with_reference[0], NOT_A_PLAN)], rng=np.random.default_rng(0))
    rate, warnings = env.expert_failures(results)
    _require(isinstance(rate, float) and 0 <= rate <= 1, f"env.expert_failures(...) rate {rate!r} is not in [0, 1]")
    _require(isinstance(warnings, list) and all(isinstance(w, str) for w in warnings),
             f"env.expert_failures(...) warnings {warnings!r} are not a list of str")

    plans = {t.id: r.plan_text for t, r in zip(with_reference, results)}
    columns = env.table_columns(with_reference, plans)
    _require(isinstance(columns, dict) and all(isinstance(k, str) and isinstance(v, (float, int))
                                               for k, v in columns.items()),
             f"env.table_columns(...) returned {columns!r}; expected a dict of str -> float ({{}}: none)")
    if columns:
        _require(env.headline in columns, f"env.headline {env.headline!r} is not among table_columns {list(columns)}")

    oracle = env.oracle_plans(with_reference[:1])
    if oracle is not None:
        _require(isinstance(oracle, list) and len(oracle) == 1, f"env.oracle_plans([task]) returned {oracle!r}; "
                                                                "expected one (plan text, reward) or None")
        plan, reward = oracle[0]
        _require(isinstance(plan, str) and isinstance(reward, (float, int)) and 0 <= reward <= 1,
                 f"env.oracle_plans: {oracle[0]!r} is not (plan text, reward in [0, 1])")
        _require(reward >= results[0].reward - 1e-9,
                 f"env.oracle_plans: the oracle's {reward} is below the reference plan's {results[0].reward}")

    stats = env.cache_stats()
    _require(stats is None or isinstance(getattr(stats, "hit_rate", None), float),
             f"env.cache_stats() returned {stats!r}; expected None or an object with a float hit_rate")
    _check_reward_workers(env, with_reference[0])


def _check_reward_workers(env: Any, task: Any) -> None:
    """``reward_workers_unsupported`` is None or a reason; with None, the draw :meth:`drawn_samples`
    makes and :meth:`cut_task` replays scores the reference plan as ``reward_plans`` with that ``rng``."""
    why = env.reward_workers_unsupported()
    _require(why is None or isinstance(why, str) and why.strip() != "",
             f"env.reward_workers_unsupported() returned {why!r}; expected None or a non-empty str")
    if why is not None:
        return
    subsets = env.drawn_samples([task], np.random.default_rng(0))
    _require(isinstance(subsets, dict) and list(subsets) == [task.id]
             and all(isinstance(i, (int, np.integer)) for i in subsets[task.id]),
             f"env.drawn_samples([task {task.id}], rng) returned {subsets!r}; expected {{{task.id}: [sample indices]}}")
    direct = env.reward_plans([(task, task.reference_plan)], rng=np.random.default_rng(0))[0]
    replayed = env.reward_plans([(env.cut_task(task, subsets[task.id]), task.reference_plan)])[0]
    _require(math.isclose(direct.reward, replayed.reward, rel_tol=1e-6, abs_tol=1e-9),
             f"task {task.id}: scored on env.cut_task(task, drawn samples) the reference plan gets {replayed.reward}, "
             f"with the same rng {direct.reward}")


def _check_task_actions(env: Any, tokenizer: Any, task: Any) -> None:
    grammar = env.grammar(tokenizer, task)
    _require(isinstance(grammar, Grammar), f"env.grammar(tokenizer, task {task.id}) is a {type(grammar).__name__}, "
                                           "not a constrained_decoding.protocol.Grammar")
    _require(env.grammar(tokenizer, task) is grammar, f"env.grammar: task {task.id}'s grammar is rebuilt per call "
                                                      "(the decoder caches by grammar identity)")
    rows = grammar.rows_for(task.reference_plan)
    _require(isinstance(rows, list) and rows, f"task {task.id}: grammar.rows_for(reference_plan) gave no rows")

    text = env.format_plan(task.reference_plan)
    _require(isinstance(text, str) and text != "", f"env.format_plan(task {task.id}'s reference_plan) is {text!r}")
    ref, from_text, bad = env.reward_plans([(task, task.reference_plan), (task.id, text), (task, NOT_A_PLAN)])
    for result, what in ((ref, "reference plan"), (from_text, "reference plan as text"), (bad, "invalid action")):
        check_result(result, f"task {task.id}: {what}")
    _require(ref.valid, f"task {task.id}: its reference plan is not valid: {ref.error}")
    _require(from_text.valid and math.isclose(from_text.reward, ref.reward, rel_tol=1e-9, abs_tol=1e-12),
             f"task {task.id}: the reference plan's text scores {from_text.reward}, the plan {ref.reward}")
    _require(not bad.valid and bad.reward == 0 and isinstance(bad.error, str),
             f"task {task.id}: an invalid action scored {bad.reward} (valid={bad.valid}, error={bad.error!r})")

    parsed = env.parse_free_text(task, text)
    check_result(env.reward_plans([(task, parsed)])[0], f"task {task.id}: parse_free_text of the reference text")
    env.parse_free_text(task, NOT_A_PLAN)  # must not raise

