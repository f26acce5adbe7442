"""A comparison suite (issue #15): its arms and table rows, read from YAML and checked.

A **suite** (``configs/compare/<name>.yaml``, or any YAML file) is data, not code:

* ``arms``: the runs, each a ``name``, an entry-point ``script`` (``train/rltf.py``,
  ``train/grpo.py``, ...) and its ``overrides`` (``key=value`` arguments); optionally the
  ``results`` file it writes (``results.json``), its per-step ``history`` file
  (``rltf_history.json``; null: none), the history keys of the train reward / valid-plan rate /
  periodic held-out score, the config keys whose product is the number of plans sampled per step,
  the ``loader`` that checks its arguments (``module:function``, default
  ``rltf.config.loading:load_config``), ``seeds`` (run only the first n seeds: a deterministic arm,
  e.g. the reference plans and the oracle, needs one), ``start_from`` (an earlier arm whose warm start it
  shares: :attr:`Arm.start_from`) and a ``reader`` (``module:function``, ``reader(run_dir, arm)``
  -> ``{"rows": {schema: {column: value}}, "scores": {schema: {task: score}}, "seconds": s}``,
  optionally ``"task_values": {schema: {column: {task: value}}}`` for an interval on another column)
  for an entry point whose results file is not the ``{"table": {"rows": ...}, "scores": ...}``
  of ``rltf.stages.plan_job.report``;
* ``rows``: the comparison table's lines, each a ``label``, the ``arm`` it comes from and the
  ``schema`` (row of that arm's results table) and ``column`` (``overall``) it reads; ``trained``
  marks the arm's trained policy (it gets the train reward vs plans sampled, the training
  valid-plan rate, the wall time and a curve in the plot); ``valid`` is the held-out valid-plan
  rate when the results table has no ``valid`` column (1.0 for constrained decoding);
* ``common``: overrides for every arm; ``seeds``: how many (seeds ``0 .. seeds-1``);
* ``metrics``: optional further columns of the arms' results tables (e.g. every metric of the
  travel evaluator) tabulated for every row, mean ± std over seeds, in a second table;
* ``held_out``: the held-out set every arm is evaluated on, set for all of them at once
  (``eval.splits=[<held_out>]`` after ``common``; no arm may set ``eval.splits`` itself):
  ``non_train`` (every task of the env's suite not in its train split) or splits
  (``validation,test``); unset: whatever the arms' own overrides say;
* ``splits``: optional, the env's splits the table reports every row on separately (``[test, test-long]``:
  pddl's two test splits): each run's per-task plans are re-scored by the env of each split
  (``envs.make(<the run's env section>, split)``, :mod:`rltf.comparison.env_values`), so the arms must have
  evaluated those tasks (``held_out: non_train``); a table, a paired comparison and a metrics table per split;
* a row's ``column: headline`` reads the env's declared headline metric (``env.headline``: pddl's plain
  ``goal rate``, travel's ``final pass``, OpenAGI's ``overall``) per task, from the env's ``table_columns``
  over the run's plans, not the (possibly shaped) reward;
* ``paired_reference``: the arm every other arm is compared with, per ``(task, seed)``
  (:mod:`rltf.comparison.paired`); unset: the constrained GRPO arm (``grpo.sampling=constrained``
  in its overrides) where there is one, else the first arm.

:func:`load_suite` finds and checks one; :func:`check_arms` passes every arm's arguments through its
entry point's ``loader`` before anything runs; :func:`resolve` turns a ``module:function`` string
(an arm's ``loader`` or ``reader``) into the function.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from common.errors import user_code_failure
from rltf.config.loading import CONFIG_DIR, REPO_ROOT, ConfigError
from rltf.rl.score_keys import VALIDATION_SCORE

SUITE_DIR = CONFIG_DIR / "compare"
CONSTRAINED_GRPO = "grpo.sampling=constrained"  # the override that makes an arm the default paired reference
HELD_OUT_KEY = "eval.splits"  # the run-config key a suite's held_out sets for every arm
HEADLINE = "headline"  # a row's column that reads the env's declared headline metric (rltf.comparison.env_values)


@dataclass(frozen=True)
class Arm:
    """One recipe of a comparison: an entry point and its arguments (run once per seed)."""

    name: str
    script: str
    overrides: tuple[str, ...] = ()
    results: str = "results.json"
    history: str | None = "rltf_history.json"
    reward_key: str = "train/reward"
    valid_key: str = "train/valid"
    score_key: str = VALIDATION_SCORE  # the periodic held-out score (RLTF's rltf.eval_every)
    plans_per_step: tuple[str, ...] = ("rltf.tasks_per_batch", "rltf.k_samples")  # config keys, multiplied
    loader: str = "rltf.config.loading:load_config"
    reader: str | None = None
    seeds: int | None = None  # run only seeds below this (e.g. 1 for a deterministic arm); None: every seed
    start_from: str | None = None
    """An earlier arm of the suite whose fine-tuned planner (``<its arm folder>/seed<k>/sft``, the same seed)
    this arm starts from, with its own SFT stage off (``planner.model=<that folder> sft.enabled=false``): arms
    that would fit the same plans from the same seed share one warm start -- the same weights, one SFT's CPU
    (counted in that arm's runs) instead of one per arm. The arm it names must write ``sft/`` (an entry point
    with an SFT stage, ``sft.enabled`` on)."""

    def command(self, common: Sequence[str], extra: Sequence[str], seed: int, arm_dir: Path) -> list[str]:
        """The arguments after the interpreter (the run folder is ``arm_dir/seed<k>``)."""
        start = [] if self.start_from is None else [f"planner.model={self.start_dir(arm_dir, seed)}",
                                                    "sft.enabled=false"]
        return [self.script, *common, *self.overrides, *extra, *start, f"seed={seed}", f"output_dir={arm_dir}",
                f"run_name=seed{seed}", "overwrite=true"]

    def start_dir(self, arm_dir: Path, seed: int) -> Path:
        """The fine-tuned planner this arm starts from (:attr:`start_from`), for ``seed``."""
        return Path(arm_dir).parent / str(self.start_from) / f"seed{seed}" / "sft"


@dataclass(frozen=True)
class Row:
    """One line of the comparison table: ``schema``'s ``column`` in ``arm``'s results."""

    label: str
    arm: str
    schema: str
    column: str = "overall"
    trained: bool = False
    valid: float | None = None


@dataclass(frozen=True)
class Suite:
    """A comparison: its arms, the table's rows, how many seeds, the overrides common to every arm."""

    name: str
    arms: tuple[Arm, ...]
    rows: tuple[Row, ...]
    seeds: int = 3
    common: tuple[str, ...] = ()
    description: str = ""
    metrics: tuple[str, ...] = ()
    held_out: str | tuple[str, ...] | None = None
    """The held-out set of every arm: ``non_train`` (every task of the suite not in the train split:
    on OpenAGI's full suite 165 tasks, on the lite suite the 18 validation + test tasks) or splits
    (a list, or comma-separated); it becomes the override ``eval.splits=[<held_out>]`` after
    ``common``. None: the arms' own ``eval.splits``."""
    splits: tuple[str, ...] | None = None
    """The env's splits every row is reported on, separately (``[test, test-long]``); None: the runs'
    held-out tasks pooled, as their results tables give them."""
    paired_reference: str | None = None
    """The arm the paired per-task differences are taken against (its trained row, else its first
    row). None: the constrained GRPO arm (``grpo.sampling=constrained``), else the first arm."""

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    def arms_needed(self, names: Sequence[str] | None = None) -> list[str]:
        """The arms ``names`` (None: all) and those they start from (:attr:`Arm.start_from`), in the suite's order."""
        wanted = {a.name for a in self.arms} if names is None else set(names)
        for a in reversed(self.arms):  # a start_from arm is listed before the arms that name it
            if a.name in wanted and a.start_from is not None:
                wanted.add(a.start_from)
        return [a.name for a in self.arms if a.name in wanted]

    def reference_arm(self) -> Arm:
        """The arm of :attr:`paired_reference`, or the default (see there)."""
        if self.paired_reference is not None:
            return self.arm(self.paired_reference)
        return next((a for a in self.arms if CONSTRAINED_GRPO in a.overrides), self.arms[0])


def _build(cls, data: Any, where: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {data!r}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(names)}")
    missing = [n for n, f in names.items() if f.default is dataclasses.MISSING and
               f.default_factory is dataclasses.MISSING and n not in data]
    if missing:
        raise ConfigError(f"{where}: missing key(s) {', '.join(missing)}")
    kw = {k: tuple(str(x) for x in v) if isinstance(v, list) else v for k, v in data.items()}
    return cls(**kw)


def suite_from_dict(data: dict, where: str = "suite") -> Suite:
    """A :class:`Suite` from its YAML mapping, checked: known keys, unique arm names, rows naming
    arms of the suite, at least one seed."""
    data = dict(data)
    arms = tuple(_build(Arm, a, f"{where}: arms[{i}]") for i, a in enumerate(data.pop("arms", None) or []))
    rows = tuple(_build(Row, r, f"{where}: rows[{i}]") for i, r in enumerate(data.pop("rows", None) or []))
    suite = _build(Suite, {**data, "arms": [], "rows": []}, where)
    suite = dataclasses.replace(suite, arms=arms, rows=rows)
    names = [a.name for a in arms]
    if not arms:
        raise ConfigError(f"{where}: no arms")
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: arm names repeat: {names}")
    bad = [r.label for r in rows if r.arm not in names]
    if bad:
        raise ConfigError(f"{where}: rows {bad} name an arm that is not in the suite ({', '.join(names)})")
    if not isinstance(suite.seeds, int) or suite.seeds < 1:
        raise ConfigError(f"{where}: seeds={suite.seeds!r}: expected a positive integer")
    for i, a in enumerate(arms):
        if a.start_from is not None and a.start_from not in names[:i]:
            raise ConfigError(f"{where}: arm {a.name}: start_from={a.start_from!r}: expected an arm listed before it "
                              f"({', '.join(names[:i]) or 'none'}): it runs first in each seed")
    if suite.paired_reference is not None and suite.paired_reference not in names:
        raise ConfigError(f"{where}: paired_reference={suite.paired_reference!r} is not an arm of the suite "
                          f"({', '.join(names)})")
    if suite.splits is not None:
        splits = (suite.splits,) if isinstance(suite.splits, str) else suite.splits
        if not splits or not all(isinstance(x, str) and x.strip() for x in splits) or len(set(splits)) != len(splits):
            raise ConfigError(f"{where}: splits={suite.splits!r}: expected a list of distinct split names "
                              "([test, test-long])")
        suite = dataclasses.replace(suite, splits=tuple(x.strip() for x in splits))
    return _with_held_out(suite, where)


def _with_held_out(suite: Suite, where: str) -> Suite:
    """``held_out`` as the last entry of ``common``; an arm or ``common`` that sets the key itself
    would evaluate that arm on other tasks than the rest, so it is refused."""
    if suite.held_out is None:
        return suite
    value = suite.held_out  # a YAML list arrives as a tuple (_build)
    items = value.strip("[]").split(",") if isinstance(value, str) else value if isinstance(value, tuple) else []
    parts = [str(p).strip() for p in items]
    if not parts or not all(parts):
        raise ConfigError(f"{where}: held_out={suite.held_out!r}: expected non_train or a comma-separated list of "
                          "splits (validation,test)")
    setters = [f"common ({o})" for o in suite.common if o.startswith(f"{HELD_OUT_KEY}=")]
    setters += [f"arm {a.name} ({o})" for a in suite.arms for o in a.overrides if o.startswith(f"{HELD_OUT_KEY}=")]
    if setters:
        raise ConfigError(f"{where}: held_out={suite.held_out} sets {HELD_OUT_KEY} for every arm, but "
                          f"{'; '.join(setters)} sets it too: remove it there")
    held_out = ",".join(parts)
    return dataclasses.replace(suite, held_out=held_out, common=(*suite.common, f"{HELD_OUT_KEY}=[{held_out}]"))


def suite_path(name: str | os.PathLike) -> Path:
    """A suite by name (``configs/compare/<name>.yaml``) or as a YAML file."""
    p = Path(name).expanduser()
    for c in (p, REPO_ROOT / p, SUITE_DIR / p, SUITE_DIR / f"{p}.yaml"):
        if c.is_file():
            return c
    known = sorted(x.stem for x in SUITE_DIR.glob("*.yaml"))
    raise ConfigError(f"suite={name}: no such suite; known suites: {', '.join(known) or 'none'} "
                      f"(configs/compare/<name>.yaml), or pass a YAML file")


def load_suite(name: str | os.PathLike) -> Suite:
    path = suite_path(name)
    data = yaml.safe_load(path.read_text())
    return suite_from_dict(data, str(path))


def resolve(spec: str) -> Callable:
    """``module:function`` -> the function."""
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except BaseException as e:  # the user's module, whatever it raises (sys.exit and Ctrl-C included)
        raise ConfigError(f"{spec!r}: cannot import ({user_code_failure(e)}); expected module:function") from None


def check_arms(suite: Suite, extra: Sequence[str] = (), arms: Sequence[str] | None = None) -> dict[str, Any]:
    """Every arm's arguments through its ``loader`` (what its entry point parses them with),
    before anything runs: a bad key fails here naming the arm. Returns the loaded configs."""
    loaded = {}
    for arm in suite.arms:
        if arms is not None and arm.name not in arms:
            continue
        args = [*suite.common, *arm.overrides, *extra, "seed=0"]
        try:
            loaded[arm.name] = resolve(arm.loader)(args)
        except ConfigError as e:
            raise ConfigError(f"arm {arm.name} ({arm.script} {' '.join(args)}): {e}") from None
    return loaded
