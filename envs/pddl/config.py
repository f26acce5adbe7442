"""The pddl env's settings (``env.pddl``): the domain and its problems (a folder, or the generator's
splits), the grammar, the plan length cap and the reward shaping."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from common.config_fields import bound_errors, num
from envs.pddl.errors import PddlError
from envs.pddl.generators import DEPOTS_DEFAULTS, GENERATORS, LOGISTICS_DEFAULTS
from envs.pddl.instances import handed_renaming, load_folder

TEST_ROLES = ("test", "test-long")


class PddlConfigError(PddlError):
    """A bad ``env.pddl`` setting, named."""


@dataclass
class LogisticsSettings:
    """The Logistics generator's parameters besides the package count (the instance's size)."""

    airplanes: int = num(LOGISTICS_DEFAULTS["airplanes"], ge=1)
    """Airplanes (the IPC generator's -a)."""
    cities: int = num(LOGISTICS_DEFAULTS["cities"], ge=1)
    """Cities (-c), each with one truck."""
    city_size: int = num(LOGISTICS_DEFAULTS["city_size"], ge=1)
    """Locations per city (-s), the first of them an airport."""


@dataclass
class DepotsSettings:
    """The Depots generator's parameters besides the crate count (the instance's size); defaults: the IPC 2002
    set's smallest problem (PlanBench's Depots set: depots=3 distributors=1 trucks=3 pallets=4 hoists=4)."""

    depots: int = num(DEPOTS_DEFAULTS["depots"], ge=1)
    """Depots (the IPC generator's -e), each with a pallet and a hoist."""
    distributors: int = num(DEPOTS_DEFAULTS["distributors"], ge=1)
    """Distributors (-i), each with a pallet and a hoist."""
    trucks: int = num(DEPOTS_DEFAULTS["trucks"], ge=1)
    """Trucks (-t), each at a random place."""
    pallets: int = num(DEPOTS_DEFAULTS["pallets"], ge=1)
    """Pallets (-p; at least one per place: those beyond stand at random places)."""
    hoists: int = num(DEPOTS_DEFAULTS["hoists"], ge=1)
    """Hoists (-h; at least one per place: those beyond stand at random places)."""


@dataclass
class ShapingSettings:
    """Reward shaping for training; the table's headline stays the plain goal rate."""

    goal_fraction: float = num(0.0, ge=0, le=1)
    """An executable plan that misses the goal scores this times the share of goal literals true at its end."""
    step_cost: float = num(0.0, ge=0, le=1)
    """A plan that reaches the goal loses this per action beyond the reference plan's length (floor 0)."""


@dataclass
class PddlEnvConfig:
    """The pddl env's settings (``env.pddl``)."""

    domain: str = "blocksworld"
    """A shipped domain (blocksworld, logistics, depots: the generator's splits) or the path of a domain file:
    with problems it replaces the folder's own domain file; without, it must rename a shipped domain (found by
    matching, or given by renaming) and the generator's splits are written in its names."""
    problems: str | None = None
    """A folder of problems laid out like PlanBench's (domain file, instance-<k>.pddl, optional plans and
    split.json); None: the generator's persisted splits of the shipped domain."""
    grammar: str = "syntax"
    """The plan grammar: syntax (any sequence of the problem's ground actions, types respected) or legal (only
    actions applicable in the state the plan has reached; a plan may end anywhere)."""
    max_plan_length: int = num(32, ge=1)
    """The most actions the grammar lets a plan have."""
    seed: int = num(0, ge=0)
    """Seeds the generator (and a folder's split when it has no split.json)."""
    sizes: list[int] = field(default_factory=lambda: [3, 5])
    """[min, max] objects of the generated train / validation / test instances (blocks; Logistics: packages;
    Depots: crates)."""
    long_sizes: list[int] = field(default_factory=lambda: [6, 8])
    """[min, max] of the test-long split's instances: more than any training instance."""
    train_size: int = num(200, ge=1)
    """How many train instances the generator draws (sizes in sizes)."""
    validation_size: int = num(20, ge=0)
    """How many validation instances the generator draws (sizes in sizes)."""
    test_size: int = num(50, ge=0)
    """How many test instances the generator draws (sizes in sizes)."""
    test_long_size: int = num(20, ge=0)
    """How many test-long instances the generator draws (sizes in long_sizes)."""
    test_split: str = "test"
    """Which split the run's held-out test is: test, or test-long (the longer instances)."""
    obfuscation_seed: int | None = None
    """Rename every predicate, action and object with words drawn with this seed (Mystery-style); None: no."""
    renaming: str | None = None
    """A renaming file (JSON {predicates, actions, objects, types: {old: new}}) applied to the generated set; with
    a domain file as domain: how that file renames the shipped domain (instead of matching the two)."""
    logistics: LogisticsSettings = field(default_factory=LogisticsSettings)
    """The Logistics generator's parameters."""
    depots: DepotsSettings = field(default_factory=DepotsSettings)
    """The Depots generator's parameters."""
    shaping: ShapingSettings = field(default_factory=ShapingSettings)
    """Reward shaping (default off)."""
    optimal_nodes: int = num(50_000, ge=1)
    """States the breadth-first (optimal) search expands before the greedy search takes over."""
    greedy_nodes: int = num(50_000, ge=1)
    """States each satisficing search (best-first on g + h, then greedy) expands before giving up."""

    def validate(self, section: str = "env.pddl") -> None:
        """Raise :class:`PddlConfigError` naming ``<section>.<key>`` for settings that cannot run."""
        for message in bound_errors(self, f"{section}."):
            raise PddlConfigError(message)
        from envs.pddl.grammar import GRAMMAR_KINDS  # deferred: the grammars import constrained_decoding (torch)

        if self.grammar not in GRAMMAR_KINDS:
            raise PddlConfigError(f"bad value for '{section}.grammar': {self.grammar!r}; expected one of "
                                  f"{', '.join(GRAMMAR_KINDS)}")
        if self.test_split not in TEST_ROLES:
            raise PddlConfigError(f"bad value for '{section}.test_split': {self.test_split!r}; expected one of "
                                  f"{', '.join(TEST_ROLES)}")
        for key in ("sizes", "long_sizes"):
            value = getattr(self, key)
            if (not isinstance(value, (list, tuple)) or len(value) != 2 or not all(isinstance(x, int) and x >= 1
                                                                                 for x in value)
                    or value[0] > value[1]):
                raise PddlConfigError(f"bad value for '{section}.{key}': {value!r}; expected [min, max] object "
                                      "counts, 1 <= min <= max")
        if self.obfuscation_seed is not None and self.renaming is not None:
            raise PddlConfigError(f"'{section}.obfuscation_seed' and '{section}.renaming' both rename the set; "
                                  "give one")
        if self.renaming is not None and not Path(self.renaming).is_file():
            raise PddlConfigError(f"bad value for '{section}.renaming': {self.renaming!r}; expected a renaming file")
        if self.problems is None:
            if self.domain not in GENERATORS and not Path(self.domain).is_file():
                raise PddlConfigError(f"bad value for '{section}.domain': {self.domain!r}; without "
                                      f"{section}.problems expected a domain the env generates "
                                      f"({', '.join(GENERATORS)}) or a domain file that renames one")
            if self.domain not in GENERATORS:
                if self.obfuscation_seed is not None:
                    raise PddlConfigError(f"'{section}.obfuscation_seed' renames the set, but '{section}.domain' "
                                          f"({self.domain}) already fixes its names; give one")
                self.generated_domain()  # a file that renames no known domain stops the run here, named
            if self.long_sizes[0] <= self.sizes[1] and self.test_long_size:
                raise PddlConfigError(f"bad value for '{section}.long_sizes': {self.long_sizes!r}; expected more "
                                      f"objects than any training instance (> {self.sizes[1]})")
        elif not Path(self.problems).is_dir():
            raise PddlConfigError(f"bad value for '{section}.problems': {self.problems!r}; expected a folder of "
                                  "instance-<k>.pddl problems")
        else:  # read whole now, so that a bad file stops the run before it writes anything
            load_folder(self.problems, self.domain if Path(self.domain).is_file() else None, self.seed)

    def generated_domain(self) -> str:
        """The shipped domain whose generator draws the set: ``domain`` itself, or the one its file renames."""
        if self.domain in GENERATORS:
            return self.domain
        return handed_renaming(self.domain, self.renaming)[0]

    def generator_settings(self) -> tuple[tuple[str, int], ...]:
        """The generator's parameters besides the size (``env.pddl.<domain>``), sorted: part of the set's key."""
        settings = getattr(self, self.generated_domain(), None)
        return tuple(sorted(dataclasses.asdict(settings).items())) if dataclasses.is_dataclass(settings) else ()
