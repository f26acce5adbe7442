"""The travel env's settings: what :func:`envs.travel.factory.make_envs` builds.

A run config reads them under ``env.travel`` (with ``env.name: travel``)::

    env:
      name: travel
      travel:
        seed: 0                 # the synthetic sandbox and its queries (split: envs/travel/splits/)
        days: [3, 5, 7]         # keep queries of these lengths
        reward: {final_pass: 0.5, commonsense: 0.25, hard: 0.25}
        database_dir: null      # the real TravelPlanner database (the public repository's CSVs)

:meth:`TravelEnvConfig.validate` names the bad key (``'env.travel.days'``) in its error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from envs.config_fields import bound_errors, num

LEVELS = ("easy", "medium", "hard")
DAYS = (3, 5, 7)


class TravelConfigError(ValueError):
    """A travel env config that cannot run; the message names the key."""


@dataclass
class RewardSettings:
    """The shaped reward's weights (:class:`envs.travel.env.RewardWeights`)."""

    final_pass: float = num(0.5, ge=0)
    commonsense: float = num(0.25, ge=0)
    hard: float = num(0.25, ge=0)


@dataclass
class TravelEnvConfig:
    seed: int = num(0, ge=0)  # the synthetic sandbox + queries; the split is persisted per seed
    days: list[int] = field(default_factory=lambda: list(DAYS))  # keep queries of these lengths
    levels: list[str] = field(default_factory=lambda: list(LEVELS))  # keep queries of these levels
    max_attractions: int = num(2, ge=1)  # attractions per stay day in the plan grammar
    reward: RewardSettings = field(default_factory=RewardSettings)
    official_quirks: bool = False  # reproduce the official evaluator's known bugs (envs/travel/eval_mode.py)
    # the real benchmark: the public repository's database CSVs, and the queries of the hub dataset
    # (or a local copy in its columns); its queries are split train/validation/test by `seed`
    database_dir: Optional[str] = None
    queries_source: str = "osunlp/TravelPlanner"
    queries_split: str = "validation"

    def validate(self, section: str = "env.travel") -> None:
        for message in bound_errors(self, f"{section}."):
            raise TravelConfigError(message)
        bad_days = [d for d in self.days if d not in DAYS]
        if not self.days or bad_days:
            raise TravelConfigError(f"bad value for '{section}.days': {list(self.days)!r}; expected a non-empty "
                                    f"list drawn from {list(DAYS)}")
        bad_levels = [v for v in self.levels if v not in LEVELS]
        if not self.levels or bad_levels:
            raise TravelConfigError(f"bad value for '{section}.levels': {list(self.levels)!r}; expected a "
                                    f"non-empty list drawn from {list(LEVELS)}")
        r = self.reward
        if r.final_pass + r.commonsense + r.hard <= 0:
            raise TravelConfigError(f"'{section}.reward' weights sum to 0; expected a positive sum")

    def reward_weights(self):
        from envs.travel.env import RewardWeights

        return RewardWeights(self.reward.final_pass, self.reward.commonsense, self.reward.hard)
