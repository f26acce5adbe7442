"""The run config's help: each field's help text, and the listing ``help=true`` / ``--help`` prints.

Every field of the run config (:mod:`rltf.config.sections`, :mod:`rltf.config.flow` and each
registered env's section, in the env's own package: OpenAGI's ``config.py``, travel's
``registration.py`` and ``config.py``) is documented where it is declared, the way CleanRL's ``Args`` are:
a string literal on the line right after the field::

    r: int = num(8, gt=0)
    \"\"\"LoRA rank: the inner dimension of each adapter's two matrices (more: more capacity, memory).\"\"\"

:func:`field_help` reads these strings from the class's source (as Sphinx's attribute docstrings
and tyro do), so a section needs no registry and the envs import nothing from rltf.
:func:`config_fields` walks every key of :class:`~rltf.config.sections.RunConfig`, sections
included; :func:`config_help` formats them with their types, bounds, defaults and help.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import textwrap
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from common.config_fields import OPS
from envs import registry  # (importing envs registers the shipped envs)
from envs.config import DEFAULT_ENV
from rltf.config.sections import RunConfig

WIDTH = 100  # help text is wrapped to this many columns


@dataclass(frozen=True)
class ConfigField:
    """One key of the run config."""

    key: str
    """Dotted, as an override writes it: ``planner.lora.r``."""
    type: Any
    """The declared type (a section: its dataclass; the ``env`` section: ``Any``)."""
    default: Any
    """The default value (a section: None)."""
    help: str
    """The help text declared with the field (``""``: none)."""
    bounds: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """A :func:`common.config_fields.num` field's bounds, e.g. ``{"gt": 0}``."""
    is_section: bool = False
    """A section (a mapping of keys), not a value."""
    env: str = ""
    """The env whose ``env:`` section declares this key (``""``: a key of every run)."""


ENV_SECTION = "env"
"""RunConfig's env section: ``env.name`` and the keys of the named env's section class (envs/registry.py)."""


def field_types(cls: type) -> dict[str, Any]:
    """Field name -> resolved type, in declaration order."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


@functools.cache
def field_help(cls: type) -> dict[str, str]:
    """Field name -> its help text (the string literal after its declaration; ``""`` when it has
    none), for every field of the dataclass ``cls``, inherited ones included."""
    declared: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # a subclass's text for a field wins
        if dataclasses.is_dataclass(klass):
            declared.update(_declared_help(klass))
    return {f.name: declared.get(f.name, "") for f in dataclasses.fields(cls)}


def _declared_help(klass: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(klass))
    except (OSError, TypeError):  # no source (a frozen install): no help rather than no run
        return {}
    body = ast.parse(source).body[0].body
    found = {}
    for stmt, after in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            found[stmt.target.id] = " ".join(after.value.value.split())
    return found


def config_fields(cls: type = RunConfig, prefix: str = "", env: str = "") -> Iterator[ConfigField]:
    """Every key of the run config ``cls``: a section's own keys in declaration order, then each
    of its sections (the section itself, then its keys). RunConfig's ``env`` section holds
    ``env.name`` and then, per registered env, the keys of its section class."""
    helps, types = field_help(cls), field_types(cls)

    def is_section(f: dataclasses.Field) -> bool:
        return dataclasses.is_dataclass(types[f.name]) or (cls is RunConfig and f.name == ENV_SECTION)

    fields = dataclasses.fields(cls)
    for f in fields:
        if not is_section(f):
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            yield ConfigField(f"{prefix}{f.name}", types[f.name], default, helps[f.name], f.metadata.get("bounds", {}),
                              env=env)
    for f in fields:
        if is_section(f):
            key = f"{prefix}{f.name}"
            yield ConfigField(key, types[f.name], None, helps[f.name], is_section=True, env=env)
            if cls is RunConfig and f.name == ENV_SECTION:
                yield from _env_fields(f"{key}.")
            else:
                yield from config_fields(types[f.name], f"{key}.", env)


def _env_fields(prefix: str) -> Iterator[ConfigField]:
    """``<prefix>name`` (once: the default env's field, the registered names as its values), then
    each registered env's own keys."""
    names = registry.names()
    default_env = config_fields(registry.spec(DEFAULT_ENV).section, prefix)
    default_name = next(f for f in default_env if f.key == f"{prefix}name")
    yield dataclasses.replace(default_name, type=Literal[names])
    for name in names:
        yield from (f for f in config_fields(registry.spec(name).section, prefix, env=name) if f.key != f"{prefix}name")


def describe_type(tp: Any) -> str:
    """A type in words, as the config's error messages and help say it (``one of 'stop', 'skip'``)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is typing.Union and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return f"{describe_type(inner[0])} or null"
    if origin is list:
        return f"a list of {describe_type(args[0]).removeprefix('a ').removeprefix('an ')}s" if args else "a list"
    if origin is dict or tp is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return f"a section with keys {', '.join(field_types(tp))}"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(tp, str(tp))


def yaml_value(value: Any) -> str:
    """``value`` as it is written in a YAML file or a ``key=value`` override (``null``, ``[test]``)."""
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return yaml.safe_dump(value, default_flow_style=True, width=math.inf).strip().removesuffix("...").strip()


def config_help(values: Mapping[str, Any] | None = None, *, source: str = "", prog: str = "train/rltf.py",
                note: str = "") -> str:
    """The listing ``help=true`` prints: every section and key with its type, bounds, default and
    help. ``values`` (dotted key -> value, e.g. the chosen config file plus overrides) adds a
    ``[<source>: value]`` mark to each key whose value there differs from the default; ``note``
    is printed under the header (why no values are shown, for instance)."""
    lines = [f"usage: python {prog} [config=<file or shipped name>] [key=value ...] [help=true]",
             "",
             "The run config: every key below may be set in the YAML file (config=...) or as a dotted override",
             "(rltf.lr=1e-4, planner.lora.enabled=true); values are YAML (null, true, [a, b]). Each key shows its",
             "type and default" + (f", and in [brackets] the value {source} gives it where that differs." if source
                                   and values is not None else ".")]
    if note:
        lines += textwrap.wrap(note, WIDTH)
    lines.append("")
    env = ""
    for f in config_fields():
        depth = f.key.count(".")
        pad = "  " * depth
        if f.env != env and f.env:
            lines += ["", f"  the {f.env} env's keys (env.name: {f.env}):", ""]
        env = f.env
        if f.is_section:
            lines += ["", f"{pad}{f.key}:"] if lines[-1] else [f"{pad}{f.key}:"]
            lines += textwrap.wrap(f.help or "(no help)", WIDTH, initial_indent=pad + "  ",
                                   subsequent_indent=pad + "  ")
            continue
        kind = describe_type(f.type)
        if f.bounds:
            kind += " " + " and ".join(f"{OPS[op]} {yaml_value(v)}" for op, v in f.bounds.items())
        line = f"{pad}{f.key} = {yaml_value(f.default)}   ({kind})"
        if values is not None and f.key in values and values[f.key] != f.default:
            line += f"   [{source}: {yaml_value(values[f.key])}]"
        lines.append(line)
        lines += textwrap.wrap(f.help or "(no help)", WIDTH, initial_indent=pad + "    ",
                               subsequent_indent=pad + "    ")
    return "\n".join(lines)
