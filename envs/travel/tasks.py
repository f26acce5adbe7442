"""A travel query as a planning task: what rltf's trainer, SFT and evaluation read of any env.

The trainer sees every env through the same few attributes (``id``, ``description`` — the
prompt — and ``reference_plan`` — an action the env's grammar accepts, for supervised warm
start); OpenAGI's :class:`envs.openagi.tasks.Task` has them too.
"""

from __future__ import annotations

from dataclasses import dataclass

from envs.travel.query import QueryView, TravelQuery


@dataclass(frozen=True)
class TravelTask:
    query: TravelQuery | QueryView  # the benchmark track's: the view (text, level, days; envs/travel/tracks.py)
    reference_plan: str | None  # the exact solver's minimum-cost plan passing every constraint (text)

    @property
    def id(self) -> int:
        return self.query.id

    @property
    def description(self) -> str:
        """The prompt: the query's text; in the benchmark track (a :class:`QueryView`) the official
        sole-planning prompt of its text and own reference information (:attr:`QueryView.prompt`)."""
        return self.query.prompt if isinstance(self.query, QueryView) else self.query.query

    @property
    def metric(self) -> str:
        """The table's group: the query's level (as the benchmark reports easy / medium / hard)."""
        return self.query.level
