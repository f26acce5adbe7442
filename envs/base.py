"""The base class of an env: the optional members of :class:`envs.protocol.RLTFEnv` answered, and
Gymnasium's one-step episode, so a new env writes its tasks, grammar, reward and formatting only.

In the manner of ``gymnasium.Env``: subclass :class:`RLTFEnvBase`, write the abstract methods
(:meth:`~RLTFEnvBase.tasks`, :meth:`~RLTFEnvBase.grammar`, :meth:`~RLTFEnvBase.reward_plans`,
:meth:`~RLTFEnvBase.format_plan`, :meth:`~RLTFEnvBase.plan_instructions`), call
``super().__init__()`` and override a default only where the env has the feature (an oracle, columns
of its own, an execution cache, free text to map onto a plan, reward workers). ``examples/minimal_env.py``
is a whole env in this style; :func:`envs.checker.check_rltf_env` and Gymnasium's ``check_env`` check one.

The defaults are the protocol's defined "not available" answers (``envs/protocol.py``): no oracle
(``None``: the table shows ``n/a``), no columns of its own (``{}``), no execution cache (``None``), no
expert failures (``(0.0, [])``), free text read as it is, the ``overall`` headline, an ``oracle`` row,
and no reward workers. :meth:`~RLTFEnvBase.get_task` looks an id up among :meth:`~RLTFEnvBase.tasks`
and :meth:`~RLTFEnvBase.tokenizer_texts` gives the tasks' descriptions and reference plans.
"""

from __future__ import annotations

import abc
import string
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from constrained_decoding.protocol import Grammar
from envs.episodes import ansi_text
from envs.protocol import RewardResult, Task

CHARSET = frozenset(string.printable)  # what a task's description and a plan's text may hold


class RLTFEnvBase(gym.Env, abc.ABC):
    """An env of :class:`envs.protocol.RLTFEnv` with the optional members' defaults; also a
    ``gymnasium.Env`` whose episode is one task: ``reset`` gives a task's description (the one
    ``options={"task": id}`` names, else one drawn with the env's seeded ``np_random``), ``step(plan)``
    scores the plan (:meth:`reward_plans`) and ends the episode."""

    metadata = {"render_modes": ["ansi"]}
    headline = "overall"
    """The results-table column the main job's last line reports."""
    oracle_name = "oracle"
    """What the ``oracle`` row of a table is called."""

    def __init__(self, render_mode: str | None = None, max_text: int = 4096):
        self.render_mode = render_mode
        self.observation_space = spaces.Text(max_length=max_text, charset=CHARSET)
        self.action_space = spaces.Text(max_length=max_text, charset=CHARSET)
        self.task: Task | None = None
        self._last: RewardResult | None = None

    # ------------------------------------------------------------------- what an env writes
    @abc.abstractmethod
    def tasks(self) -> list[Task]:
        """The tasks of this env's split, in a fixed order (:meth:`envs.protocol.RLTFEnv.tasks`)."""

    @abc.abstractmethod
    def grammar(self, tokenizer: Any, task: Any) -> Grammar:
        """The grammar of ``task``'s valid actions over ``tokenizer``'s ids, the same object per
        (tokenizer, task) (:meth:`envs.protocol.RLTFEnv.grammar`)."""

    @abc.abstractmethod
    def reward_plans(self, pairs: Sequence[tuple[Any, Any]],
                     rng: np.random.Generator | None = None) -> list[RewardResult]:
        """One result per (task or id, action) pair; never raises on an action
        (:meth:`envs.protocol.RLTFEnv.reward_plans`)."""

    @abc.abstractmethod
    def format_plan(self, plan: Any) -> str:
        """An action as the text a planner writes (:meth:`envs.protocol.RLTFEnv.format_plan`)."""

    @abc.abstractmethod
    def plan_instructions(self) -> str:
        """The action space and the plan format in a few lines (:meth:`envs.protocol.RLTFEnv.plan_instructions`)."""

    # -------------------------------------------------------------------------- the defaults
    def get_task(self, task: Any) -> Task:
        """The task of an id among :meth:`tasks`; a task object whose id is among them is returned as it
        is (a copy with another description, e.g. a rewording, stays the copy)."""
        by_id = {int(t.id): t for t in self.tasks()}
        if isinstance(task, (int, np.integer)) and not isinstance(task, (bool, np.bool_)) and int(task) in by_id:
            return by_id[int(task)]
        if not isinstance(task, (int, np.integer, str)) and getattr(task, "id", None) in by_id:
            return task
        raise ValueError(f"unknown task {task!r}; expected a task id in {min(by_id)}..{max(by_id)}")

    def tokenizer_texts(self, task_ids: Sequence[int] | None = None) -> list[str]:
        """The descriptions of ``task_ids`` (default: this env's tasks) and the text of every one of
        this env's reference plans: an action space that the reference plans spell out whole."""
        ids = [t.id for t in self.tasks()] if task_ids is None else list(task_ids)
        texts = [self.get_task(i).description for i in ids]
        texts += [self.format_plan(t.reference_plan) for t in self.tasks() if t.reference_plan is not None]
        return list(dict.fromkeys(texts))

    def cache_stats(self) -> Any:
        """None: the env executes nothing cached."""
        return None

    def expert_failures(self, results: Sequence[RewardResult]) -> tuple[float, list[str]]:
        """``(0.0, [])``: nothing executed can fail."""
        return 0.0, []

    def parse_free_text(self, task: Any, text: str) -> Any:
        """The text itself: the env reads text (text that is no valid action scores 0)."""
        return text

    def oracle_plans(self, tasks: Sequence[Task]) -> list[tuple[str, float]] | None:
        """None: no oracle (the table shows ``n/a``)."""
        return None

    def table_columns(self, tasks: Sequence[Task], plans: dict[int, str]) -> dict[str, float]:
        """``{}``: the table shows the mean reward per ``task.metric`` and ``overall``."""
        return {}

    def reward_workers_unsupported(self) -> str | None:
        """Why forked reward workers cannot score this env's plans: the env draws no sample subsets
        that :meth:`drawn_samples` and :meth:`cut_task` replay."""
        return f"the {type(self).__name__} env does not draw its plans' sample subsets the way workers replay them"

    def drawn_samples(self, tasks: Sequence[Task], rng: np.random.Generator | None) -> dict[int, list[int]]:
        """Not available (:meth:`reward_workers_unsupported` says why): raises ``NotImplementedError``."""
        raise NotImplementedError(self.reward_workers_unsupported())

    def cut_task(self, task: Task, indices: Sequence[int]) -> Task:
        """Not available (:meth:`reward_workers_unsupported` says why): raises ``NotImplementedError``."""
        raise NotImplementedError(self.reward_workers_unsupported())

    def split_reward_plans(self, pairs: Sequence[tuple[Any, Any]], rng: np.random.Generator, exchange,
                           process: int, processes: int) -> list[RewardResult]:
        """This process's pairs scored here (:meth:`reward_plans`): the env shares no execution out."""
        return self.reward_plans(pairs, rng=rng)

    def flow_domain(self) -> Any:
        """None: the env has no agent flows (:meth:`envs.protocol.RLTFEnv.flow_domain`)."""
        return None

    # ------------------------------------------------------------------------- Gymnasium's API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        tasks = self.tasks()
        if options and "task" in options:
            self.task = self.get_task(options["task"])
        else:
            self.task = tasks[int(self.np_random.integers(len(tasks)))]
        self._last = None
        return self.task.description, {"task_id": int(self.task.id)}

    def step(self, action: Any):
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        result = self._last = self.reward_plans([(self.task, action)])[0]
        info = {"task_id": int(self.task.id), "plan": result.plan_text, "valid": bool(result.valid),
                "error": result.error}
        return self.task.description, float(result.reward), True, False, info

    def render(self) -> str | None:
        task = self.task
        return ansi_text(self.render_mode, task and (lambda: f"task {task.id}: {task.description}"), self._last,
                         lambda r: f"\nplan: {r.plan_text}\nreward: {r.reward:.4f}"
                                   + (f" (invalid: {r.error})" if r.error else ""))
