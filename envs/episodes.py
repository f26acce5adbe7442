"""What an episode of a single-step plan env starts from: one task, named or drawn."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np


def episode_task(np_random: np.random.Generator, options: Mapping[str, Any] | None, key: str,
                 get: Callable[[Any], Any], by_id: Mapping[int, Any], ids: Sequence[int]) -> Any:
    """``get(options[key])`` when ``reset``'s options name the task (by id or text), else a task
    drawn uniformly from ``ids`` with the env's seeded generator (``Env.np_random``)."""
    if options and key in options:
        return get(options[key])
    return by_id[ids[int(np_random.integers(len(ids)))]]


def ansi_text(render_mode: str | None, header: Callable[[], str] | None, last: Any,
              describe_last: Callable[[Any], str]) -> str | None:
    """``render()`` of a plan env in ``ansi`` mode: the episode's task line (``header``; None
    before ``reset``), then what ``describe_last`` says of the last step's result, if any."""
    if render_mode != "ansi" or header is None:
        return None
    return header() + ("" if last is None else describe_last(last))
