"""A run's ``env:`` section: ``name`` picks the env, the rest are THAT env's own keys.

Each registered env (:mod:`envs.registry`) declares the dataclass of its section: OpenAGI's keys
sit at the top of the section (:class:`envs.openagi.config.OpenAGIEnvConfig`), the travel
sandbox's under ``env.travel`` (:class:`envs.travel.registration.TravelSection`)::

    env:
      name: travel            # openagi (default) | travel | any registered env | package.module:callable
      travel: {days: [3, 5]}

:func:`as_section` turns a mapping of such keys into the named env's section, refusing a key of
another env with a one-line error that names the key and both envs. A key of another env that
holds that env's default value is dropped: ``configs/default.yaml`` writes OpenAGI's defaults out,
and ``env.name=travel`` on top of it must still give a travel run. :func:`validate_section` runs the
section's own checks. :func:`envs.make` / :func:`envs.make_train_and_held_out` build what ``name`` says.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Mapping
from typing import Any

from common.errors import UserError
from envs import registry

DEFAULT_ENV = "openagi"  # what an env: section without a name (every config before the second env) selects


class EnvConfigError(UserError, ValueError):
    """An env config that cannot run: a bad value, a key of another env, an unknown env name, a
    ``tools`` entry that is not importable or not callable. The message names the key."""


def as_section(config: Any = None, prefix: str = "env") -> Any:
    """The env section ``config`` describes: ``None`` -> the default env's defaults; a registered
    env's section -> itself; a mapping -> the section of the env its ``name`` says (default
    ``openagi``) filled with the other keys (nested sections from nested mappings). Checks the
    keys, not the values (:func:`validate_section` does)."""
    if config is None:
        return registry.spec(DEFAULT_ENV).section()
    if registry.spec_of_section(config) is not None:
        return config
    if not isinstance(config, Mapping):
        raise EnvConfigError(f"bad value for {prefix!r}: {config!r}; expected a section (a mapping of env.name and "
                             f"that env's keys) or an env's config object")
    data = dict(config)
    name = data.pop("name", DEFAULT_ENV)
    if isinstance(name, str) and name not in registry.names() and ":" in name:
        try:  # a user's own env: package.module:callable naming its EnvSpec (registry.load)
            name = registry.load(name).name
        except ValueError as e:
            raise EnvConfigError(f"bad value for '{prefix}.name': {name!r}; {e}") from None
    if name not in registry.names():
        raise EnvConfigError(f"bad value for '{prefix}.name': {name!r}; expected one of "
                             f"{', '.join(repr(n) for n in registry.names())}, or an import path "
                             f"'package.module:callable' naming your env's EnvSpec (docs/envs/adding-an-env.md)")
    spec = registry.spec(name)
    own = {f.name for f in dataclasses.fields(spec.section)}
    for key in [k for k in data if k not in own]:
        other = _owner(key, data[key], name)
        if other == "default":
            del data[key]  # another env's key at its default (a base config's section): not this run's concern
        elif other is not None:
            raise EnvConfigError(f"'{prefix}.{key}' ({data[key]!r}) is a key of the {other} env, not of the {name} "
                                 f"env ({prefix}.name={name!r}); drop it or set {prefix}.name={other}")
    return _build(spec.section, {**data, "name": name}, prefix, name)


def validate_section(section: Any, prefix: str = "env") -> None:
    """The section's own checks (``section.validate(prefix)``), any ``ValueError`` raised as
    :class:`EnvConfigError`; an object that is no registered env's section is refused."""
    spec = registry.spec_of_section(section)
    if spec is None:
        raise EnvConfigError(f"bad value for {prefix!r}: a {type(section).__name__}; expected the section of one of "
                             f"the registered envs {', '.join(repr(n) for n in registry.names())}")
    if section.name != spec.name:
        raise EnvConfigError(f"bad value for '{prefix}.name': {section.name!r}; a {type(section).__name__} is the "
                             f"{spec.name} env's section")
    try:
        section.validate(prefix)
    except EnvConfigError:
        raise
    except ValueError as e:
        raise EnvConfigError(str(e)) from None


def _owner(key: str, value: Any, name: str) -> str | None:
    """``"default"`` when ``key`` is another env's key holding its default, that env's name when it
    holds another value, None when no env has the key."""
    for other in registry.names():
        if other == name:
            continue
        fields = {f.name: f for f in dataclasses.fields(registry.spec(other).section)}
        if key in fields:
            return "default" if _is_default(value, _default(fields[key])) else other
    return None


def _default(f: dataclasses.Field) -> Any:
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value


def _is_default(value: Any, default: Any) -> bool:
    """``value`` equals ``default``; a mapping may give a subset of a default mapping's keys."""
    if isinstance(value, Mapping) and isinstance(default, Mapping):
        return all(k in default and _is_default(v, default[k]) for k, v in value.items())
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) == list(default)
    return value == default


def _build(cls: type, data: Mapping[str, Any], prefix: str, env: str) -> Any:
    """``cls`` from ``data``: unknown keys named with the closest one, nested dataclasses from mappings."""
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        full = f"{prefix}.{key}"
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f"; did you mean '{prefix}.{close[0]}'?" if close else ""
            raise EnvConfigError(f"bad env config: unknown key {full!r} (value {value!r}) for the {env} env; its "
                                 f"keys under {prefix!r}: {', '.join(fields)}{hint}")
        tp = hints.get(key)
        if dataclasses.is_dataclass(tp) and not dataclasses.is_dataclass(value):
            if not isinstance(value, Mapping):
                raise EnvConfigError(f"bad value for {full!r}: {value!r}; expected a section (a mapping with keys "
                                     f"{', '.join(f.name for f in dataclasses.fields(tp))})")
            value = _build(tp, value, full, env)
        kwargs[key] = _coerce(value, tp, full)
    return cls(**kwargs)


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """``value`` as a scalar field's type (``int``, ``float``, ``str``, ``bool``, or one of them or None),
    as the typed config did: ``"1e-4"`` is a float, ``3.0`` an integer; anything else is checked by the
    section's ``validate``."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is typing.Union and type(None) in args and len(args) == 2:
        if value is None:
            return None
        tp = next(a for a in args if a is not type(None))
    if tp not in (int, float, str, bool) or isinstance(value, bool) and tp is bool:
        return value
    expected = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}[tp]
    if tp is str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, str):
            return value
    elif tp is not bool and not isinstance(value, bool):
        try:
            number = float(value) if isinstance(value, str) else value
            if tp is float and isinstance(number, (int, float)):
                return float(number)
            if tp is int and isinstance(number, (int, float)) and float(number).is_integer():
                return int(number)
        except (TypeError, ValueError, OverflowError):
            pass
    raise EnvConfigError(f"bad value for {key!r}: {value!r}; expected {expected}")
