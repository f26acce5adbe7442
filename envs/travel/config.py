"""The travel env's settings: what :func:`envs.travel.factory.make_envs` builds.

A run config reads them under ``env.travel`` (with ``env.name: travel``)::

    env:
      name: travel
      travel:
        seed: 0                 # the synthetic sandbox and its queries (split: envs/travel/splits/)
        days: [3, 5, 7]         # keep queries of these lengths
        reward: {final_pass: 0.5, commonsense: 0.25, hard: 0.25}
        database_dir: null      # the real TravelPlanner database (the public repository's CSVs)
        queries_source: osunlp/TravelPlanner   # or generated: queries generated over database_dir
        flights: auto           # database_dir: its flights file when present, else generated
        track: sandbox          # benchmark | scaffolded | sandbox (envs/travel/tracks.py)

:meth:`TravelEnvConfig.validate` names the bad key (``'env.travel.days'``) in its error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from common.config_fields import bound_errors, num
from common.errors import UserError
from envs.travel.tracks import BENCHMARK, CAP_KEEPS, SANDBOX, TRACKS, TRAIN_PLANS
from envs.travel.verdicts import CONSTRAINTS

LEVELS = ("easy", "medium", "hard")
FLIGHTS_MODES = ("auto", "generated", "file")
GENERATED = "generated"  # queries_source: queries generated over database_dir
DAYS = (3, 5, 7)


class TravelConfigError(UserError, ValueError):
    """A travel env config that cannot run; the message names the key."""


@dataclass
class RewardSettings:
    """The shaped reward's weights, which the env (``TravelPlannerEnv(reward_weights=...)``), the
    factory and the run config share; the formula is :func:`envs.travel.reward.plan_reward`. A
    delivered plan's reward is the weighted mean of the terms below (a plan that is not
    delivered scores 0); the weights need not sum to 1, only to more than 0."""

    final_pass: float = num(0.5, ge=0)
    """Weight of final pass: 1 when the plan meets every commonsense and hard constraint, else 0."""
    commonsense: float = num(0.25, ge=0)
    """Weight of the fraction of the commonsense constraints the plan meets."""
    hard: float = num(0.25, ge=0)
    """Weight of the fraction of the query's applicable hard constraints (budget, cuisine, room rules,
    transport, ...) the plan meets."""
    constraints: float = num(0.0, ge=0)
    """Weight of the plan's official micro pass fraction (0, the default: no such term): the verdicts
    passed over every constraint the plan is judged on as eval.py counts them -- the 8 commonsense
    constraints, the budget and the local constraints of the query's level it sets
    (official_metrics.counted_constraints); a hard constraint not judged counts as failed. Each
    constraint weighs constraint_weights[name] (1 when not named)."""
    constraint_weights: dict[str, float] = field(default_factory=dict)
    """The constraints term's weight per constraint, by the evaluator's names (envs/travel/verdicts.py:
    minimum_nights_stay, diverse_restaurants, budget, cuisine, ...): a weighted micro pass fraction
    that puts the gradient on the named constraints; a constraint not named weighs 1, 0 leaves it out."""

    @property
    def total(self) -> float:
        """The weights' sum: what a delivered plan's weighted terms are divided by."""
        return self.final_pass + self.commonsense + self.hard + self.constraints

    def validate(self, section: str = "reward") -> None:
        """Raise :class:`TravelConfigError` (a ``ValueError``) naming ``<section>.<key>`` for weights
        that cannot score: negative, not finite, or summing to 0."""
        for message in bound_errors(self, f"{section}."):
            raise TravelConfigError(message)
        if self.total <= 0:
            raise TravelConfigError(f"'{section}' weights sum to 0; expected a positive sum")
        for name, w in dict(self.constraint_weights).items():
            if name not in CONSTRAINTS:
                raise TravelConfigError(f"unknown constraint {name!r} in '{section}.constraint_weights'; expected "
                                        f"one of {', '.join(CONSTRAINTS)}")
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
                raise TravelConfigError(f"bad value for '{section}.constraint_weights.{name}': {w!r}; expected a "
                                        "number >= 0")


@dataclass
class TravelEnvConfig:
    """The travel sandbox's settings (``env.travel``): which sandbox and queries, the plan grammar,
    the reward."""

    seed: int = num(0, ge=0)
    """Seeds the synthetic sandbox and its queries (the real benchmark: its queries' split); the
    train / validation / test split is persisted per seed in envs/travel/splits/."""
    days: list[int] = field(default_factory=lambda: list(DAYS))
    """Keep only queries of these trip lengths in days: any of 3, 5, 7."""
    levels: list[str] = field(default_factory=lambda: list(LEVELS))
    """Keep only queries of these difficulty levels: any of easy, medium, hard."""
    max_attractions: int = num(2, ge=1)
    """The most attractions the plan grammar allows per stay day (1 to this many)."""
    max_options: int = num(0, ge=0)
    """The most options the flat planner's grammar offers a query per city and kind (restaurants,
    attractions, accommodations) and per leg and day (transport): a seeded sample of the query's
    options -- with cap_keep: train_plans, a train query's solver's plan's options first (0: every
    option). The real tables offer several hundred per city and their grammars hold tens of MB each;
    the evaluator, the solver and the flows always see every option."""
    max_cities: int = num(0, ge=0)
    """The most route cities the flat planner's grammar offers a query: a seeded sample of the
    route's cities -- with cap_keep: train_plans, a train query's solver's plan's cities first (0:
    every city of the destination state). A state's 5-7 day real query may route over twenty cities
    and four hundred legs (a 40k-state grammar)."""
    cap_keep: str = TRAIN_PLANS
    """What an option cap (max_options, max_cities) keeps before its seeded sample: train_plans -- the
    solver's plan's options of the train queries only (the plans the warm start teaches stay inside
    their grammars; a validation or test query's cap never reads a plan); sample -- nothing, every
    query's cap is the seeded sample alone. The benchmark track needs sample."""
    track: str = SANDBOX
    """What a planner may read and what may touch its plan, named in every result (envs/travel/tracks.py):
    benchmark -- TravelPlanner's sole-planning track: the planner reads the query's text, level, days and its
    own reference_information only (no structured field, no other query's rows, no plan), nothing repairs,
    filters or re-ranks its plan (the scaffolded flows are refused); scaffolded -- the benchmark's queries
    with the project's scaffolds (MTP repair and filters, OKR evaluator reviews, ReAct look-ahead) and the
    structured fields; sandbox -- the project's own setting (synthetic or generated queries), all of it."""
    reward: RewardSettings = field(default_factory=RewardSettings)
    """The weights of the shaped reward's terms."""
    official_quirks: bool = False
    """Score plans as the official evaluator's code does, known bugs included
    (envs/travel/eval_mode.py); false: the rules as intended."""
    database_dir: Optional[str] = None
    """The real benchmark: the folder of the public TravelPlanner repository's database CSVs (its
    queries come from queries_source); null: the synthetic sandbox built from seed."""
    queries_source: str = "osunlp/TravelPlanner"
    """database_dir set: the hub dataset id the queries are read from (the local cache), or a local
    copy in its columns; generated: 360 queries generated over database_dir's cities (a sandbox over
    the real tables, split envs/travel/splits/real-seed<seed>.json; envs/travel/real_sandbox.py)."""
    flights: str = "auto"
    """database_dir set: auto -- the folder's flights/clean_Flights_2022.csv when present, else
    flights generated from seed (envs/travel/flights.py; the public tables have none); generated --
    always generated; file -- the file (an error when it is missing)."""
    queries_split: str = "validation"
    """database_dir set (hub queries): hub -- the run's train / validation / test are the hub's own
    splits; train, validation or test -- that hub split re-split by seed into <split>:re-split:train /
    validation / test (the names envs.make, gym.make and flow.splits take; envs/travel/hub.py)."""

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
        self.reward.validate(f"{section}.reward")
        if self.flights not in FLIGHTS_MODES:
            raise TravelConfigError(f"bad value for '{section}.flights': {self.flights!r}; expected one of "
                                    f"{list(FLIGHTS_MODES)}")
        if self.track not in TRACKS:
            raise TravelConfigError(f"bad value for '{section}.track': {self.track!r}; expected one of {list(TRACKS)}")
        if self.cap_keep not in CAP_KEEPS:
            raise TravelConfigError(f"bad value for '{section}.cap_keep': {self.cap_keep!r}; expected one of "
                                    f"{list(CAP_KEEPS)}")
        if self.track == BENCHMARK:
            self._check_benchmark(section)
        if self.queries_source == GENERATED and self.database_dir is None:
            raise TravelConfigError(f"'{section}.queries_source: generated' needs '{section}.database_dir' (the "
                                    "folder of the real tables the queries are generated over)")

    def _check_benchmark(self, section: str) -> None:
        """The benchmark track reads hub queries with their reference_information and no plan."""
        if self.database_dir is None or self.queries_source == GENERATED:
            what = "generated" if self.database_dir else "synthetic"
            raise TravelConfigError(f"'{section}.track: benchmark' needs the benchmark's queries with their "
                                    f"reference_information ('{section}.database_dir' set, "
                                    f"'{section}.queries_source' a hub dataset or copy), not {what} queries")
        if (self.max_options or self.max_cities) and self.cap_keep == TRAIN_PLANS:
            raise TravelConfigError(f"'{section}.cap_keep: train_plans' makes the option caps (max_options "
                                    f"{self.max_options}, max_cities {self.max_cities}) keep the solver's plans; "
                                    f"'{section}.track: benchmark' reads no plan: set {section}.cap_keep=sample or "
                                    "the caps to 0")
