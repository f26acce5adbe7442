"""A comparison suite (issue #15): its arms and table rows, read from YAML and checked.

A **suite** (``configs/compare/<name>.yaml``, or any YAML file) is data, not code:

* ``arms``: the runs, each a ``name``, an entry-point ``script`` (``train/rltf.py``,
  ``train/grpo.py``, ...) and its ``overrides`` (``key=value`` arguments); optionally the
  ``results`` file it writes (``results.json``), its per-step ``history`` file
  (``rltf_history.json``; null: none), the history keys of the train reward / valid-plan rate /
  periodic held-out score, the config keys whose product is the number of plans sampled per step,
  the ``loader`` that checks its arguments (``module:function``, default
  ``rltf.config.loading:load_config``), ``seeds`` (run only the first n seeds: a deterministic arm,
  e.g. the reference plans and the oracle, needs one) and a ``reader`` (``module:function``, ``reader(run_dir, arm)``
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
  travel evaluator) tabulated for every row, mean ± std over seeds, in a second table.

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

from rltf.config.loading import CONFIG_DIR, REPO_ROOT, ConfigError
from rltf.rl.training_state import VALIDATION_SCORE

SUITE_DIR = CONFIG_DIR / "compare"


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

    def command(self, common: Sequence[str], extra: Sequence[str], seed: int, arm_dir: Path) -> list[str]:
        """The arguments after the interpreter (the run folder is ``arm_dir/seed<k>``)."""
        return [self.script, *common, *self.overrides, *extra, f"seed={seed}", f"output_dir={arm_dir}",
                f"run_name=seed{seed}", "overwrite=true"]


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

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)


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
    return suite


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
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{spec!r}: cannot import ({e}); expected module:function") from None


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
