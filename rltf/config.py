"""Run configuration: typed dataclasses filled from a YAML file plus ``key=value`` overrides.

Every run is described by one :class:`RunConfig`. :func:`load_config` reads it from the command
line the way torchtune does::

    python train/rltf.py config=configs/llama-lora.yaml rltf.lr=1e-4 planner.lora.enabled=true

``config=<path>`` picks the YAML file (default ``configs/default.yaml``; a bare name such as
``config=flan-t5-large`` means the shipped ``configs/flan-t5-large.yaml``); every other argument
is a dotted ``key=value`` override applied in order, values parsed as YAML (``1e-4``, ``true``,
``[q_proj,v_proj]``, ``null``). YAML values may use OmegaConf interpolation (``${seed}``).

The dataclasses below are the schema: an unknown key at any depth, a value of the wrong type, an
out-of-range number or a value outside a ``Literal`` is a :class:`ConfigError` that names the key,
the value, where it came from and what was expected (with the closest key for typos), before
anything expensive starts. Adding a field is one line: ``name: type = default`` or, for a
bounded number, ``name: int = num(default, ge=0)``.

:func:`save_config` writes the resolved configuration as YAML (into the run folder) and
``load_config([f"config={path}"])`` reads back an equal object.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tempfile
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "configs"
DEFAULT_CONFIG = CONFIG_DIR / "default.yaml"


class ConfigError(ValueError):
    """A configuration that cannot run: unknown key, bad value, missing file, conflicting keys."""


def num(default: float | int, *, ge: float | None = None, gt: float | None = None,
        le: float | None = None, lt: float | None = None) -> Any:
    """A numeric field with bounds, checked by :func:`load_config` (and :func:`validate_config`)."""
    bounds = {k: v for k, v in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt)) if v is not None}
    return field(default=default, metadata={"bounds": bounds})


# ----------------------------------------------------------------------------------- schema
@dataclass
class LoraSettings:
    enabled: bool = False
    r: int = num(8, gt=0)
    alpha: int = num(16, gt=0)
    dropout: float = num(0.05, ge=0, lt=1)
    # null: PEFT's default for the model type (q,v for T5; q_proj,v_proj for Llama).
    target_modules: Optional[list[str]] = None
    # A LoRA adapter that RLTF starts from — planner.model given as an adapter dir, or this run's
    # own SFT adapter (sft/) — is merged into the base and a fresh adapter trains on top, so the
    # adapter-disabled model (the KL reference) is exactly the policy RLTF starts from; false:
    # keep training that adapter itself (refused with rltf.kl_coef > 0: the reference would be wrong).
    merge_source_adapter: bool = True


@dataclass
class EmbeddedSettings:
    """The small T5 planner built from scratch when ``planner.model: embedded``."""

    d_model: int = num(128, gt=0)
    num_layers: int = num(2, gt=0)
    num_heads: int = num(4, gt=0)
    d_ff: int = num(256, gt=0)
    vocab_size: int = num(2000, ge=64)  # the most tokens the locally trained tokenizer may have
    dropout: float = num(0.0, ge=0, lt=1)
    seed: int = num(0, ge=0)  # initial weights; same settings + seed -> identical weights
    dir: str = "checkpoints/embedded-planner"  # built once into <dir>/<fingerprint>/, then reloaded


@dataclass
class PlannerSettings:
    model: str = "embedded"  # "embedded", a hub model id, or a local model / adapter directory
    arch: Literal["auto", "seq2seq", "causal"] = "auto"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    lora: LoraSettings = field(default_factory=LoraSettings)
    load_in_4bit: bool = False  # QLoRA: needs bitsandbytes, a CUDA GPU and lora.enabled
    embedded: EmbeddedSettings = field(default_factory=EmbeddedSettings)
    max_prompt_tokens: int = num(256, gt=0)  # sets tokenizer.model_max_length: prompts are cut to it
    max_plan_tokens: int = num(64, gt=0)


@dataclass
class EnvSettings:
    suite: Literal["lite", "full"] = "lite"
    backend: Literal["lite", "hf"] = "lite"
    n_samples: int = num(20, gt=0)  # samples per task
    samples_per_step: int = num(8, gt=0)  # samples a plan is scored on per training step
    cache_mib: int = num(512, ge=0)  # execution-cache budget (0 disables the cache)
    data_seed: int = num(0, ge=0)  # seeds the task samples (the split itself is persisted)
    # backend "hf": HFBackendConfig settings (model_ids per tool, metric_models, device, dtype,
    # memory_budget_gib, batch_size(s), max_new_tokens, ...; envs/openagi/hf/config.py)
    hf: dict[str, Any] = field(default_factory=dict)
    # suite "full": the hub data is built once under data_dir (envs/openagi/hf/suite.py);
    # datasets: per-source overrides {imagenet: {path, split, config, revision, streaming, columns}}
    data_dir: str = "data/openagi"
    datasets: dict[str, Any] = field(default_factory=dict)
    max_image_side: int = num(256, ge=16)  # full-suite images are shrunk to at most this many pixels


@dataclass
class SftSettings:
    enabled: bool = True
    epochs: int = num(20, ge=0)
    lr: float = num(1e-3, gt=0)
    batch_size: int = num(16, gt=0)


@dataclass
class RltfSettings:
    steps: int = num(200, ge=0)
    tasks_per_batch: int = num(8, gt=0)
    k_samples: int = num(8, gt=0)
    lr: float = num(3e-4, gt=0)
    temperature: float = num(1.0, gt=0)
    baseline: Literal["moving_average", "per_task", "rloo"] = "moving_average"
    baseline_decay: float = num(0.9, ge=0, lt=1)
    normalize_rewards: bool = False
    kl_coef: float = num(0.0, ge=0)
    entropy_coef: float = num(0.0, ge=0)
    max_grad_norm: float = num(1.0, ge=0)  # 0 disables clipping
    eval_every: int = num(50, ge=0)  # 0: evaluate only at the end
    checkpoint_every: int = num(50, ge=0)  # 0: checkpoint only at the end
    warmup_steps: int = num(0, ge=0)
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"


EVAL_SPLITS = ("train", "validation", "test")
EVAL_SCHEMAS = ("zero", "few", "finetuned", "rltf", "reference", "oracle")


@dataclass
class EvalSettings:
    num_beams: int = num(8, gt=0)
    splits: list[str] = field(default_factory=lambda: ["test"])  # of train, validation, test
    # learning schemas in the final table (zero, few, finetuned, rltf, reference, oracle)
    schemas: list[str] = field(default_factory=lambda: list(EVAL_SCHEMAS))
    few_shot_k: int = num(3, ge=0)


@dataclass
class LoggingSettings:
    report_to: Literal["none", "wandb", "tensorboard"] = "none"
    log_every: int = num(10, gt=0)
    progress_bar: bool = True
    wandb_project: str = "rltf"


@dataclass
class RunConfig:
    run_name: str = "default"
    output_dir: str = "checkpoints"
    seed: int = num(0, ge=0)
    dry_run: bool = False
    resume: bool = False
    planner: PlannerSettings = field(default_factory=PlannerSettings)
    env: EnvSettings = field(default_factory=EnvSettings)
    sft: SftSettings = field(default_factory=SftSettings)
    rltf: RltfSettings = field(default_factory=RltfSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)

    @property
    def run_dir(self) -> Path:
        """Where this run writes checkpoints, logs, plots and its resolved config."""
        return Path(self.output_dir) / self.run_name


# ------------------------------------------------------------------------------ loading
def load_config(argv: Sequence[str] | None = None) -> RunConfig:
    """Build a validated :class:`RunConfig` from ``config=<path>`` and ``key=value`` arguments.

    ``argv`` excludes the program name (pass ``sys.argv[1:]``). Without ``config=`` the shipped
    ``configs/default.yaml`` is used (or the dataclass defaults when it is not there)."""
    config_path, overrides = _split_argv(list(argv or []))
    merged: DictConfig = OmegaConf.structured(RunConfig)
    if config_path is not None:
        merged = _merge(merged, _read_yaml(config_path), f"config file {str(config_path)!r}")
    for raw, node in overrides:
        merged = _merge(merged, node, f"override {raw!r}")
    try:
        cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as e:  # interpolation errors and the like
        raise ConfigError(f"cannot resolve the configuration: {_first_line(e)} (key {_full_key(e)!r})") from None
    validate_config(cfg)
    return cfg


def resolve_config_path(name: str | os.PathLike) -> Path:
    """A config argument as a file: as given (from the working directory), then relative to the
    repository, then a shipped config by name (``flan-t5-large`` -> ``configs/flan-t5-large.yaml``)."""
    p = Path(name).expanduser()
    candidates = [p, REPO_ROOT / p, CONFIG_DIR / p, CONFIG_DIR / f"{p}.yaml"]
    for c in candidates:
        if c.is_file():
            return c
    shipped = sorted(x.stem for x in CONFIG_DIR.glob("*.yaml")) if CONFIG_DIR.is_dir() else []
    raise ConfigError(f"config file {str(name)!r} not found (looked at {', '.join(str(c) for c in candidates[:2])}); "
                      f"shipped configs: {', '.join(shipped) or 'none'}")


def _split_argv(argv: list[str]) -> tuple[Path | None, list[tuple[str, DictConfig]]]:
    config_path: Path | None = DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None
    overrides: list[tuple[str, DictConfig]] = []
    for raw in argv:
        arg = raw[2:] if raw.startswith("--") else raw
        key, sep, value = arg.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"bad argument {raw!r}: expected key=value (e.g. rltf.lr=1e-4) or config=<path>")
        if key == "config":
            config_path = resolve_config_path(value)
            continue
        try:
            node = OmegaConf.from_dotlist([f"{key}={value}"])
        except OmegaConfBaseException as e:
            raise ConfigError(f"cannot parse override {raw!r}: {_first_line(e)}") from None
        overrides.append((raw, node))
    return config_path, overrides


def _read_yaml(path: Path) -> DictConfig:
    try:
        node = OmegaConf.load(path)
    except (OSError, OmegaConfBaseException, ValueError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read config file {str(path)!r}: {' '.join(str(e).split())}") from None
    if not isinstance(node, DictConfig):
        raise ConfigError(f"config file {str(path)!r} must be a mapping of keys to values, got a list")
    return node


def _merge(base: DictConfig, node: DictConfig, source: str) -> DictConfig:
    _check_keys(OmegaConf.to_container(node, resolve=False), RunConfig, "", source)
    try:
        return OmegaConf.merge(base, node)
    except OmegaConfBaseException as e:
        key = _full_key(e) or ""
        raise ConfigError(_bad_value_message(key, _raw_value(node, key), source)) from None


def _check_keys(tree: dict, cls: type, prefix: str, source: str) -> None:
    """Every key in ``tree`` (a plain, unresolved dict) must be a field of ``cls``; sections must
    be mappings."""
    hints = _hints(cls)
    for key, value in tree.items():
        full = f"{prefix}{key}"
        if key not in hints:
            raise ConfigError(_unknown_key_message(full, cls, value, source))
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"bad value for {full!r} in {source}: {value!r}; expected a section "
                                  f"(a mapping with keys {', '.join(_hints(tp))})")
            _check_keys(value, tp, f"{full}.", source)


def _unknown_key_message(full: str, cls: type, value: Any, source: str) -> str:
    section, _, leaf = full.rpartition(".")
    all_keys = [k for k in _all_keys(RunConfig) if not full.startswith(f"{k}.")]  # not its own sections
    close = difflib.get_close_matches(full, all_keys, n=3, cutoff=0.75)
    close += [k for k in all_keys if k.rpartition(".")[2] == leaf and k not in close]  # right key, wrong section
    hint = f"; did you mean {' or '.join(repr(c) for c in close[:3])}?" if close else ""
    where = f"under {section!r}" if section else "at the top level"
    return (f"unknown config key {full!r} (value {value!r}) in {source}{hint} "
            f"Valid keys {where}: {', '.join(_hints(cls))}")


def _bad_value_message(key: str, value: Any, source: str) -> str:
    tp = _type_at(key)
    expected = _describe(tp) if tp is not None else "a valid value"
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
    """Bounds of :func:`num` fields and the checks that involve several keys."""
    for key, value, bounds in _numeric_fields(cfg):
        for op, limit in bounds.items():
            ok = {"ge": value >= limit, "gt": value > limit, "le": value <= limit, "lt": value < limit}[op]
            if not ok:
                expected = " and ".join(f"{_OPS[o]} {v}" for o, v in bounds.items())
                kind = "an integer" if isinstance(value, int) else "a number"
                raise ConfigError(f"bad value for {key!r}: {value!r}; expected {kind} {expected}")
    p = cfg.planner
    if not cfg.run_name or any(c in cfg.run_name for c in "/\\") or cfg.run_name in (".", ".."):
        raise ConfigError(f"bad value for 'run_name': {cfg.run_name!r}; expected a non-empty folder name without '/'")
    if p.embedded.d_model % p.embedded.num_heads:
        raise ConfigError(f"'planner.embedded.d_model' ({p.embedded.d_model}) must be divisible by "
                          f"'planner.embedded.num_heads' ({p.embedded.num_heads})")
    if p.model == "embedded" and p.arch == "causal":
        raise ConfigError("'planner.arch' is 'causal' but 'planner.model' is 'embedded' (a T5 encoder-decoder); "
                          "use arch=auto or seq2seq")
    if p.load_in_4bit and not p.lora.enabled:
        raise ConfigError("'planner.load_in_4bit' is true but 'planner.lora.enabled' is false: 4-bit weights "
                          "cannot be fine-tuned directly (QLoRA trains a LoRA adapter on them)")
    if p.lora.target_modules is not None and not p.lora.target_modules:
        raise ConfigError("'planner.lora.target_modules' is an empty list; expected module names or null")
    if cfg.rltf.baseline == "rloo" and cfg.rltf.k_samples < 2:
        raise ConfigError(f"'rltf.baseline' is 'rloo' (leave-one-out over the K samples) but 'rltf.k_samples' is "
                          f"{cfg.rltf.k_samples}; expected k_samples >= 2")
    bad_schemas = [s for s in cfg.eval.schemas if s not in EVAL_SCHEMAS]
    if bad_schemas:
        raise ConfigError(f"bad value for 'eval.schemas': {cfg.eval.schemas!r}; expected a list drawn from "
                          f"{', '.join(EVAL_SCHEMAS)}")
    bad = [s for s in cfg.eval.splits if s not in EVAL_SPLITS]
    if bad or not cfg.eval.splits:
        raise ConfigError(f"bad value for 'eval.splits': {cfg.eval.splits!r}; expected a non-empty list of "
                          f"{', '.join(EVAL_SPLITS)}")


_OPS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def _numeric_fields(obj: Any, prefix: str = ""):
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            yield from _numeric_fields(value, f"{prefix}{f.name}.")
        elif "bounds" in f.metadata:
            yield f"{prefix}{f.name}", value, f.metadata["bounds"]


# ------------------------------------------------------------------------------ schema helpers
def _hints(cls: type) -> dict[str, Any]:
    """Field name -> resolved type, in declaration order."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _all_keys(cls: type, prefix: str = "") -> list[str]:
    keys = []
    for name, tp in _hints(cls).items():
        keys.append(f"{prefix}{name}")
        if dataclasses.is_dataclass(tp):
            keys.extend(_all_keys(tp, f"{prefix}{name}."))
    return keys


def _type_at(key: str) -> Any:
    tp: Any = RunConfig
    for part in key.split("."):
        if not dataclasses.is_dataclass(tp) or part not in _hints(tp):
            return None
        tp = _hints(tp)[part]
    return tp


def _describe(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is typing.Union and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return f"{_describe(inner[0])} or null"
    if origin is list:
        return f"a list of {_describe(args[0]).removeprefix('a ').removeprefix('an ')}s" if args else "a list"
    if dataclasses.is_dataclass(tp):
        return f"a section with keys {', '.join(_hints(tp))}"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(tp, str(tp))


# ------------------------------------------------------------------------------ saving
def config_to_yaml(cfg: RunConfig) -> str:
    """The resolved configuration as YAML text (what :func:`save_config` writes)."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def save_config(cfg: RunConfig, path: str | os.PathLike) -> Path:
    """Write ``cfg`` as YAML to ``path`` (atomically); ``load_config([f"config={path}"])`` reads it back."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "# resolved rltf run configuration (load with config=<this file>)\n" + config_to_yaml(cfg)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return path
