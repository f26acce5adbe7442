"""The run config, read: its dataclasses filled from a YAML file plus ``key=value`` overrides.

Every run is described by one :class:`~rltf.config.sections.RunConfig` (one dataclass per section:
``rltf/config/sections.py``; its names are re-exported here). :func:`load_config` reads it from the command line the way
torchtune does::

    python train/rltf.py config=configs/llama-lora.yaml rltf.lr=1e-4 planner.lora.enabled=true

``config=<path>`` picks the YAML file (default ``configs/default.yaml``; a bare name such as
``config=flan-t5-large`` means the shipped ``configs/flan-t5-large.yaml``); every other argument
is a dotted ``key=value`` override applied in order, values parsed as YAML (``1e-4``, ``true``,
``[q_proj,v_proj]``, ``null``). YAML values may use OmegaConf interpolation (``${seed}``); reading the
environment (``${oc.env:NAME}``) only with ``env_interpolation: true`` (:mod:`rltf.config.environment`).
A control character in an override (YAML folds a newline into a space) is refused.

An unknown key at any depth, a value of the wrong type, an out-of-range number or size
(:mod:`rltf.config.limits`), a value outside a ``Literal`` or an env section that cannot run (the
named env's section class and its ``validate``: ``envs/config.py``) is a
:class:`ConfigError` that names the key, the value, where it came from and what was expected
(with the closest key for typos), before anything expensive starts.

:func:`save_config` writes the resolved run config as YAML (into the run folder) and
``load_config([f"config={path}"])`` reads back an equal object. ``help=true`` (or ``--help``)
prints every section and key with its type, default and help, and exits (:mod:`rltf.config.help`).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from common.atomic import write_atomic
from common.config_fields import bound_errors
from common.errors import UserError
from envs import registry as env_registry
from envs.config import EnvConfigError, validate_section
from envs.splitting import NON_TRAIN
from rltf.config import limits
from rltf.config.environment import FROM_ENVIRONMENT, environment_reads, environment_sourced, interpolation_flag
from rltf.config.environment import flatten as _flatten
from rltf.config.environment import refused_message as _env_refused_message
from rltf.config.flow import FlowSettingsError
from rltf.config.help import config_help, describe_type, field_types
from rltf.config.limits import folder_chain_problem, not_a_folder_message  # noqa: F401 (re-exported)
from rltf.config.sections import (
    EVAL_SCHEMAS,
    EVAL_SPLITS,
    EmbeddedSettings,
    EvalSettings,
    LoggingSettings,
    LoraSettings,
    PlannerSettings,
    RltfSettings,
    RunConfig,
    SftSettings,
)

__all__ = [  # the run config's names (rltf/config/sections.py) are re-exported here too
    "CONFIG_DIR", "DEFAULT_CONFIG", "EVAL_SCHEMAS", "EVAL_SPLITS", "REPO_ROOT", "ConfigError", "EmbeddedSettings",
    "EvalSettings", "LoggingSettings", "LoraSettings", "PlannerSettings", "RltfSettings", "RunConfig", "SftSettings",
    "check_resume_config", "config_differences", "config_to_yaml", "default_config_path", "load_config",
    "resolve_config_path", "save_config", "validate_config",
]

REPO_ROOT = Path(__file__).resolve().parents[2]  # rltf/config/loading.py -> the checkout
CONFIG_DIR = REPO_ROOT / "configs"
DEFAULT_CONFIG = CONFIG_DIR / "default.yaml"


class ConfigError(UserError, ValueError):
    """A run config that cannot run: unknown key, bad value, missing file, conflicting keys."""


# ------------------------------------------------------------------------------ loading
def load_config(argv: Sequence[str] | None = None) -> RunConfig:
    """Build a validated :class:`RunConfig` from ``config=<path>`` and ``key=value`` arguments.

    ``argv`` excludes the program name (pass ``sys.argv[1:]``). Without ``config=`` the shipped
    ``configs/default.yaml`` is used (a :class:`ConfigError` when it is not there: :func:`default_config_path`).
    ``help=true`` (or ``--help``, ``-h``) prints every section and key with its default and help
    (:func:`rltf.config.help.config_help`) and exits with status 0 instead."""
    wants_help, argv = _take_help(list(argv or []))
    if wants_help:
        _exit_with_help(argv)
    merged = _merged(*_split_argv(argv))
    allowed, problem = interpolation_flag(merged)
    if problem:
        raise ConfigError(problem)
    with environment_reads(allowed) as reads:
        try:
            cfg = OmegaConf.to_object(merged)
        except OmegaConfBaseException as e:  # interpolation errors and the like
            if reads.refused:
                raise ConfigError(_env_refused_message(merged, _full_key(e), reads.refused[-1])) from None
            raise ConfigError(f"cannot resolve the configuration: {_first_line(e)} (key {_full_key(e)!r})") from None
        except EnvConfigError as e:  # the env section's keys (RunConfig.__post_init__: env.name and that env's keys)
            raise ConfigError(str(e)) from None
        except RecursionError:
            raise ConfigError(f"cannot resolve the configuration: {limits.TOO_DEEP}") from None
        if reads.names:  # kept as their ${oc.env:NAME} text when the config is saved: config_to_yaml
            setattr(cfg, FROM_ENVIRONMENT, environment_sourced(merged, reads))
    if cfg.output_dir.startswith("~"):  # a shell would have expanded it: ~/runs is the home's runs, not ./~/runs
        cfg.output_dir = os.path.expanduser(cfg.output_dir)
    validate_config(cfg)
    return cfg


def _merged(config_path: Path | None, overrides: list[tuple[str, DictConfig]]) -> DictConfig:
    """The run config's defaults, then the config file, then each override, unvalidated."""
    merged: DictConfig = OmegaConf.structured(RunConfig)
    if config_path is not None:
        merged = _merge(merged, _read_yaml(config_path), f"config file {str(config_path)!r}")
    for raw, node in overrides:
        merged = _merge(merged, node, f"override {raw!r}")
    return merged


# ------------------------------------------------------------------------------ help
HELP_FLAGS = ("--help", "-h", "help")


def _take_help(argv: list[str]) -> tuple[bool, list[str]]:
    """Whether ``argv`` asks for help (``--help``, ``-h``, ``help``, ``help=true``), and the other arguments."""
    wants, rest = False, []
    for raw in argv:
        key, sep, value = raw.removeprefix("--").partition("=")
        if raw in HELP_FLAGS:
            wants = True
        elif key.strip() == "help" and sep:
            try:
                flag = yaml.safe_load(value)
            except yaml.YAMLError:
                flag = None
            if not isinstance(flag, bool):
                raise ConfigError(f"bad value for 'help' in argument {raw!r}: {value!r}; expected true or false")
            wants = wants or flag
        else:
            rest.append(raw)
    return wants, rest


def _exit_with_help(argv: list[str]) -> NoReturn:
    """Print the run config's keys, defaults and help, with the values the other arguments give
    them (the config file and the overrides), and exit with status 0. Arguments that cannot be
    read do not hide the help: it is printed with the defaults alone and the error as a note."""
    prog = _shown_path(Path(sys.argv[0])) if sys.argv and sys.argv[0].endswith(".py") else "train/rltf.py"
    values, source, note = None, "", ""
    try:
        config_path, overrides = _split_argv(argv)
        if config_path is not None or overrides:
            values = _flatten(OmegaConf.to_container(_merged(config_path, overrides), resolve=False))
            shown = _shown_path(config_path) if config_path is not None else "the defaults"
            source = shown + (" + overrides" if overrides else "")
    except ConfigError as e:
        note = f"(the values of these arguments are not shown: {e})"
    print(config_help(values, source=source, prog=prog, note=note), flush=True)
    raise SystemExit(0)


def _shown_path(path: Path) -> str:
    """A config file as the help names it: relative to the checkout when inside it (configs/default.yaml)."""
    resolved = path.resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(path)


def resolve_config_path(name: str | os.PathLike) -> Path:
    """A config argument as a file: as given (from the working directory), then relative to the
    repository, then a shipped config by name (``flan-t5-large`` -> ``configs/flan-t5-large.yaml``)."""
    p = Path(name).expanduser()
    candidates = [p, REPO_ROOT / p, CONFIG_DIR / p, CONFIG_DIR / f"{p}.yaml"]
    for c in candidates:
        if c.is_file():
            return c
    if CONFIG_DIR.is_dir():
        shipped = ", ".join(sorted(x.stem for x in CONFIG_DIR.glob("*.yaml"))) or "none"
    else:
        shipped = f"none ({CONFIG_DIR} is not there: {NO_CONFIG_DIR})"
    raise ConfigError(f"config file {str(name)!r} not found (looked at {', '.join(str(c) for c in candidates[:2])}); "
                      f"shipped configs: {shipped}")


NO_CONFIG_DIR = ("rltf is installed without the configs/ folder of its checkout; pass config=PATH with a run config "
                 "YAML (the repository's configs/*.yaml), or install from a checkout with pip install -e .")


def default_config_path() -> Path:
    """The run config used without ``config=``: :data:`DEFAULT_CONFIG`, or a :class:`ConfigError`
    naming where it was looked for and what to do when it is not there (an installed rltf without
    its checkout's ``configs/``), rather than running on other defaults."""
    if DEFAULT_CONFIG.is_file():
        return DEFAULT_CONFIG
    raise ConfigError(f"no config= given and the default run config {DEFAULT_CONFIG} is not there: {NO_CONFIG_DIR}")


def _split_argv(argv: list[str]) -> tuple[Path, list[tuple[str, DictConfig]]]:
    config_path: Path | None = None
    overrides: list[tuple[str, DictConfig]] = []
    for raw in argv:
        arg = raw[2:] if raw.startswith("--") else raw
        key, sep, value = arg.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"bad argument {raw!r}: expected key=value (e.g. rltf.lr=1e-4) or config=<path>")
        if _control_characters(raw):  # (a newline would be folded into a space by YAML: a value not given)
            raise ConfigError(f"cannot parse override {raw!r}: control characters (newline, tab, NUL, ...) are not "
                              "allowed in an override")
        if key == "config":
            config_path = resolve_config_path(value)
            continue
        try:
            node = OmegaConf.from_dotlist([f"{key}={value}"])
        except (OmegaConfBaseException, yaml.YAMLError, ValueError) as e:  # YAML: a control character...
            raise ConfigError(f"cannot parse override {raw!r}: {_first_line(e)}") from None
        except RecursionError:
            raise ConfigError(f"cannot parse override {limits.shortened(raw)!r}: {limits.TOO_DEEP}") from None
        overrides.append((raw, node))
    return config_path if config_path is not None else default_config_path(), overrides


def _read_yaml(path: Path) -> DictConfig:
    try:
        node = OmegaConf.load(path)
    except (OSError, OmegaConfBaseException, ValueError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read config file {str(path)!r}: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise ConfigError(f"cannot read config file {str(path)!r}: {limits.TOO_DEEP}") from None
    if not isinstance(node, DictConfig):
        raise ConfigError(f"config file {str(path)!r} must be a mapping of keys to values, got a list")
    return node


def _merge(base: DictConfig, node: DictConfig, source: str) -> DictConfig:
    try:
        tree = OmegaConf.to_container(node, resolve=False)
    except RecursionError:
        raise ConfigError(f"bad value in {limits.shortened(source)}: {limits.TOO_DEEP}") from None
    if limits.depth(tree) > limits.MAX_DEPTH:
        raise ConfigError(f"bad value in {limits.shortened(source)}: {limits.TOO_DEEP}")
    _check_keys(tree, RunConfig, "", source)
    try:
        return OmegaConf.merge(base, node)
    except OmegaConfBaseException as e:
        key = _full_key(e) or ""
        raise ConfigError(_bad_value_message(key, _raw_value(node, key), source)) from None


def _check_keys(tree: dict, cls: type, prefix: str, source: str) -> None:
    """Every key in ``tree`` (a plain, unresolved dict) must be a field of ``cls``; sections must
    be mappings."""
    hints = field_types(cls)
    for key, value in tree.items():
        full = f"{prefix}{key}"
        if key not in hints:
            raise ConfigError(_unknown_key_message(full, cls, value, source))
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"bad value for {full!r} in {source}: {value!r}; expected a section "
                                  f"(a mapping with keys {', '.join(field_types(tp))})")
            _check_keys(value, tp, f"{full}.", source)


def _unknown_key_message(full: str, cls: type, value: Any, source: str) -> str:
    section, _, leaf = full.rpartition(".")
    all_keys = [k for k in _all_keys(RunConfig) if not full.startswith(f"{k}.")]  # not its own sections
    close = difflib.get_close_matches(full, all_keys, n=3, cutoff=0.75)
    close += [k for k in all_keys if k.rpartition(".")[2] == leaf and k not in close]  # right key, wrong section
    hint = f"; did you mean {' or '.join(repr(c) for c in close[:3])}?" if close else ""
    where = f"under {section!r}" if section else "at the top level"
    return (f"unknown config key {full!r} (value {value!r}) in {source}{hint} "
            f"Valid keys {where}: {', '.join(field_types(cls))}")


def _bad_value_message(key: str, value: Any, source: str) -> str:
    tp = _type_at(key)
    expected = describe_type(tp) if tp is not None else "a valid value"
    return f"bad value for {key!r} in {source}: {value!r}; expected {expected}"


def _raw_value(node: Any, key: str) -> Any:
    try:
        value = OmegaConf.select(node, key, throw_on_resolution_failure=False) if key else None
    except OmegaConfBaseException:
        return None
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def _full_key(e: OmegaConfBaseException) -> str | None:
    return getattr(e, "full_key", None)


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


# ------------------------------------------------------------------------------ validation
def validate_config(cfg: RunConfig) -> None:
    """Bounds of ``num`` fields, the env section's own checks and the checks that involve several keys."""
    for message in bound_errors(cfg):
        raise ConfigError(message)
    try:
        validate_section(cfg.env, "env")
    except EnvConfigError as e:
        raise ConfigError(str(e)) from None

    try:
        cfg.flow.validate("flow")
    except FlowSettingsError as e:
        raise ConfigError(str(e)) from None
    p = cfg.planner
    if not cfg.run_name or any(c in cfg.run_name for c in "/\\") or cfg.run_name in (".", "..") or \
            _control_characters(cfg.run_name):
        raise ConfigError(f"bad value for 'run_name': {cfg.run_name!r}; expected a non-empty folder name without '/' "
                          "or control characters (newline, NUL, ...)")
    if not cfg.output_dir or _control_characters(cfg.output_dir):
        raise ConfigError(f"bad value for 'output_dir': {cfg.output_dir!r}; expected a non-empty folder path "
                          "without control characters (newline, NUL, ...)")
    for check in (limits.path_length_problem, limits.run_folder_problem, limits.plans_problem, limits.grpo_problem):
        if (problem := check(cfg)) is not None:
            raise ConfigError(problem)
    if p.embedded.d_model % p.embedded.num_heads:
        raise ConfigError(f"'planner.embedded.d_model' ({p.embedded.d_model}) must be divisible by "
                          f"'planner.embedded.num_heads' ({p.embedded.num_heads})")
    if p.load_in_4bit and not p.lora.enabled:
        raise ConfigError("'planner.load_in_4bit' is true but 'planner.lora.enabled' is false: 4-bit weights "
                          "cannot be fine-tuned directly (QLoRA trains a LoRA adapter on them)")
    if p.lora.target_modules is not None and not p.lora.target_modules:
        raise ConfigError("'planner.lora.target_modules' is an empty list; expected module names or null")
    try:  # the baseline and objective with the keys they read (imports a user's objective: rltf.objective)
        cfg.rltf.validate("rltf")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    bad_schemas = [s for s in cfg.eval.schemas if s not in EVAL_SCHEMAS]
    if bad_schemas:
        raise ConfigError(f"bad value for 'eval.schemas': {cfg.eval.schemas!r}; expected a list drawn from "
                          f"{', '.join(EVAL_SCHEMAS)}")
    bad = [s for s in cfg.eval.splits if s not in EVAL_SPLITS and list(cfg.eval.splits) != [NON_TRAIN]]
    if bad or not cfg.eval.splits:
        raise ConfigError(f"bad value for 'eval.splits': {cfg.eval.splits!r}; expected a non-empty list of "
                          f"{', '.join(EVAL_SPLITS)}, or [{NON_TRAIN}] alone (every task not in the train split)")
    if (problem := limits.integer_problem(cfg)) is not None:  # (after the checks naming a tighter range)
        raise ConfigError(problem)


def _control_characters(text: str) -> list[str]:
    """The control characters of ``text`` (NUL, newline, tab, DEL...): never part of a folder name."""
    return [c for c in text if ord(c) < 0x20 or ord(c) == 0x7F]


# ------------------------------------------------------------------------------ run config keys
def _all_keys(cls: type, prefix: str = "") -> list[str]:
    keys = []
    for name, tp in field_types(cls).items():
        keys.append(f"{prefix}{name}")
        if dataclasses.is_dataclass(tp):
            keys.extend(_all_keys(tp, f"{prefix}{name}."))
    return keys


def _type_at(key: str) -> Any:
    tp: Any = RunConfig
    for part in key.split("."):
        if not dataclasses.is_dataclass(tp) or part not in field_types(tp):
            return None
        tp = field_types(tp)[part]
    return tp


# ------------------------------------------------------------------------------ saving
def config_to_yaml(cfg: RunConfig) -> str:
    """The resolved run config as YAML text (what :func:`save_config` writes). A user's env loaded from an
    import path (``env.name=mypkg.envs:sorting``) is saved under that path, so the file loads it again; a
    value read from the environment (``env_interpolation``) as its ``${oc.env:NAME}`` text, never the value."""
    node = OmegaConf.structured(cfg)
    source = env_registry.origin(getattr(cfg.env, "name", None))
    if source is not None:
        node.env.name = source
    for key, text in getattr(cfg, FROM_ENVIRONMENT, {}).items():  # read from the environment: its text, not the value
        OmegaConf.update(node, key, text, merge=False)
    return OmegaConf.to_yaml(node)


def save_config(cfg: RunConfig, path: str | os.PathLike) -> Path:
    """Write ``cfg`` as YAML to ``path`` (atomically); ``load_config([f"config={path}"])`` reads it back."""
    text = "# resolved rltf run configuration (load with config=<this file>)\n" + config_to_yaml(cfg)
    return write_atomic(path, text)


# ------------------------------------------------------------------------------ resuming
# keys a resumed run may change: they do not change what is trained (flow.score_batch: the same gradients in
# chunks, so a run can resume with smaller ones after running out of memory), only what is logged and
# evaluated and where outputs go (a prefix ending in "." covers its section); ``grpo.`` is read by
# train/grpo.py only, which does not resume (and runs saved before the section existed lack it)
RESUME_SAFE_KEYS = ("logging.", "eval.", "grpo.", "env_interpolation",
                    "flow.splits", "flow.limit", "flow.select", "flow.days",
                    "flow.trace_queries", "flow.oracle", "flow.backend.torch_threads", "flow.backend.batch_size",
                    "flow.backend.timeout", "flow.backend.call_attempts", "flow.backend.max_failed_share",
                    "flow.backend.max_answer_chars",
                    "flow.score_batch", "flow.validation_queries", "resume", "overwrite", "dry_run", "output_dir",
                    "run_name",
                    "rltf.eval_every", "rltf.checkpoint_every", "rltf.save_total_limit", "rltf.select",
                    "planner.embedded.dir", "env.data_dir", "env.cache_mib")


def config_differences(saved: dict | str, cfg: RunConfig) -> list[str]:
    """The training-relevant keys whose values differ between ``saved`` (a resolved config as a
    dict or YAML text) and ``cfg``, as ``key: old -> new`` lines; :data:`RESUME_SAFE_KEYS` are
    ignored, and ``rltf.steps`` too under a constant learning rate (a run may be extended)."""
    old = {"rltf.objective": "auto",  # (added since: a run saved without it trained as auto derives)
           **_flatten(yaml.safe_load(saved) if isinstance(saved, str) else saved)}
    new = _flatten(yaml.safe_load(config_to_yaml(cfg)))
    safe = RESUME_SAFE_KEYS + (("rltf.steps",) if cfg.rltf.lr_schedule == "constant" == old.get("rltf.lr_schedule")
                               else ())
    absent = "(absent)"
    return [f"{k}: {old.get(k, absent)!r} -> {new.get(k, absent)!r}" for k in sorted(set(old) | set(new))
            if not any(k == p or (p.endswith(".") and k.startswith(p)) for p in safe)
            and old.get(k, absent) != new.get(k, absent)]


def check_resume_config(saved: dict | str, cfg: RunConfig, source: str) -> None:
    """Refuse to resume a run with a config that changes what is trained (see :func:`config_differences`);
    a saved config that is empty, not YAML or not a mapping is one line naming ``source``."""
    if isinstance(saved, str):
        try:
            saved = yaml.safe_load(saved)
        except yaml.YAMLError as e:
            problem = f"is damaged (not YAML: {' '.join(str(e).split())[:200]})"
        else:
            problem = ("is empty" if saved is None else None if isinstance(saved, dict) else
                       f"is damaged (it holds a {type(saved).__name__}, not a config)")
        if problem:
            raise ConfigError(f"resume=true, but the run's saved config {source} {problem}; restore it or delete "
                              "it to resume (each checkpoint keeps its own copy of the config, checked too), or "
                              "start a new run (another run_name=..., or overwrite=true)")
    diffs = config_differences(saved, cfg)
    if diffs:
        raise ConfigError(f"resume=true, but the config differs from the one the run was started with ({source}) "
                          f"in {len(diffs)} training key(s): {'; '.join(diffs)}. Resume with the run's values, or "
                          "start a new run (another run_name=..., or overwrite=true)")
