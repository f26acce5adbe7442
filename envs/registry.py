"""The env registry: env name -> how to build it, validate its config section and describe it.

A run's ``env:`` section names its env (``env.name``); :mod:`envs` looks the name up here and
never dispatches on it itself. The shipped envs are registered by import path
(:data:`BUILTIN_ENVS`: ``"openagi" -> "envs.openagi.registration:SPEC"``), imported on the first
lookup of their spec, the way Gymnasium's ``entry_point`` strings are: :func:`names` lists them
without importing anything, and the env interface (this package's modules, rltf) never imports a
concrete env. An env defined elsewhere (a plugin, a test) calls :func:`register` with its own
:class:`EnvSpec`, or :func:`register_lazy` with the import path of one::

    register(EnvSpec(name="sorting", section=SortingSection, make=make_env,
                     make_train_and_held_out=make_envs, split_ids=split_ids, describe=describe_env))

The spec's callables take the env's *section* (an instance of ``spec.section``: the dataclass of
the run config's ``env:`` section for this env, with a ``name`` field and this env's keys, and a
``validate(prefix)`` method raising ``ValueError`` naming the bad key); registering imports
nothing heavy, so the callables should import the env's modules when called. The optional fields
(:attr:`EnvSpec.tokenizer_texts`, :attr:`EnvSpec.provenance`, ...) are what rltf asks of an env it
has not built; their defaults say "none".

An env that lives in the user's own package is named on the command line by an import path,
``env.name=mypkg.envs:sorting`` (:func:`load`): ``mypkg.envs`` is imported (from ``sys.path``, e.g.
``PYTHONPATH``) and ``sorting`` is an :class:`EnvSpec` or a callable taking no arguments that returns
one; the spec is registered and its section's ``name`` is ``spec.name``. :func:`origin` gives the import
path back, so that a run's saved config names the env the way a fresh process can load it again.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from common.errors import user_code_failure
from common.import_paths import import_target, is_import_path


@dataclass(frozen=True)
class EnvSpec:
    """How one env is built from its ``env:`` section (every callable takes the section first)."""

    name: str
    """What ``env.name`` says to select this env."""
    section: type
    """The dataclass of this env's ``env:`` section: a ``name`` field (default :attr:`name`), this env's
    own keys, and ``validate(prefix: str)`` raising ``ValueError`` naming ``<prefix>.<key>``."""
    make: Callable[..., Any]
    """``make(section, split="train", **kwargs) -> env``: one env of a split (train, validation, test, all)."""
    make_train_and_held_out: Callable[..., tuple[Any, Any]]
    """``make_train_and_held_out(section, **kwargs) -> (train env, held-out env)``; the held-out env
    holds every task (validation / test ids come from :attr:`split_ids`). Keywords an env does not
    use (OpenAGI's ``device``, ``build_guard``) are accepted and ignored."""
    split_ids: Callable[[Any], dict[str, list[int]]]
    """``split_ids(section) -> {"train": ids, "validation": ids, "test": ids}``: the persisted split."""
    describe: Callable[[Any], list[str]]
    """``describe(section) -> lines``: what :attr:`make` would build and load, loading nothing."""
    gym_id: str | None = None
    """The Gymnasium id the env is also registered under (``gym.make``), if any."""
    tokenizer_texts: Callable[[], list[str]] | None = None
    """``tokenizer_texts() -> texts``: what an embedded planner's tokenizer is trained on when it is built
    without an env of this kind (a planner loaded outside a run reads the default env's,
    ``envs.config.DEFAULT_ENV``: :func:`rltf.planners.tokenizer.default_tokenizer_texts`); None: none."""
    tokenizer_words: Callable[[], list[str]] | None = None
    """``tokenizer_words() -> words``: strings every embedded tokenizer keeps as whole pieces (added to its
    corpus; the default env's are, in every run: :func:`rltf.planners.tokenizer.train_plan_tokenizer`);
    None: none."""
    provenance: Callable[..., tuple[dict[str, Any], str] | None] | None = None
    """``provenance(section, env, evaluated, roles) -> (data, line)``: the data a results table over this
    env was computed on (a JSON-able dict, the results' ``data`` key) and its one markdown line, or None;
    ``env`` is the held-out env (or None), ``evaluated`` the split names the table's tasks come from,
    ``roles``: they are ``eval.splits``' train / validation / test (named as the env names them).
    None (the field): the env says nothing (:mod:`rltf.evaluation.data_source`)."""
    enumerable_plans: bool = False
    """Whether every task's valid actions are few enough to enumerate (OpenAGI: a few thousand per task
    signature): TRL's GRPO baseline then samples over one automaton of their texts; otherwise it follows
    a grammar's rows lazily (``rltf/comparison/lazy_grammar.py``: a travel query's itineraries)."""
    evaluation_warnings: Callable[[Any, Sequence[str]], list[str]] | None = None
    """``evaluation_warnings(section, schemas) -> lines``: what a dry run warns about evaluating ``schemas``
    on this section's env (OpenAGI: the oracle's exhaustive search on the full suite); None: nothing."""

    def __post_init__(self):
        if not dataclasses.is_dataclass(self.section):
            raise TypeError(f"env {self.name!r}: section must be a dataclass, got {self.section!r}")
        names = {f.name: f for f in dataclasses.fields(self.section)}
        if "name" not in names or names["name"].default != self.name:
            raise TypeError(f"env {self.name!r}: its section {self.section.__name__} needs a field "
                            f"name: str = {self.name!r}")


BUILTIN_ENVS = {
    "openagi": "envs.openagi.registration:SPEC",
    "travel": "envs.travel.registration:SPEC",
    "pddl": "envs.pddl.registration:SPEC",
}
"""The shipped envs: name -> the import path of their :class:`EnvSpec`, imported on first lookup."""
BUILTIN_GYM_IDS = {
    "OpenAGI-Lite-v0": "envs.openagi.factory:gym_entry_point",
    "TravelPlanner-Sandbox-v0": "envs.travel.env:TravelPlannerEnv",
}
"""The shipped envs' Gymnasium ids -> their ``entry_point`` (registered when :mod:`envs` is imported)."""

_SPECS: dict[str, EnvSpec | str] = {}  # name -> the spec, or the import path of one not imported yet
_ORIGINS: dict[str, str] = {}  # spec name -> the import path it was loaded from (load)


def register(spec: EnvSpec, *, replace: bool = False) -> EnvSpec:
    """Add ``spec`` under ``spec.name`` (an existing name raises unless ``replace``)."""
    if spec.name in _SPECS and not replace and _loaded(spec.name) != spec:
        raise ValueError(f"an env named {spec.name!r} is already registered ({_loaded(spec.name).section.__name__})")
    _SPECS[spec.name] = spec
    return spec


def register_lazy(name: str, path: str, *, replace: bool = False) -> None:
    """Add the env ``name`` by the import path of its spec (``package.module:attribute``, an
    :class:`EnvSpec` named ``name``), imported on the first :func:`spec` of ``name``."""
    if not is_import_path(path):
        raise ValueError(f"env {name!r}: {path!r} is not an import path 'package.module:attribute'")
    if name in _SPECS and not replace and _SPECS[name] != path:
        raise ValueError(f"an env named {name!r} is already registered ({_SPECS[name]})")
    _SPECS[name] = path


def unregister(name: str) -> None:
    """Remove the env ``name`` (a test's own env, when the test is done)."""
    _SPECS.pop(name, None)
    _ORIGINS.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered env names, in registration order (the shipped ones first); imports nothing."""
    return tuple(_SPECS)


def spec(name: str) -> EnvSpec:
    """The spec of the env ``name`` (a lazily registered one imported now); an unknown name raises
    ``KeyError`` listing the registered ones."""
    if name not in _SPECS:
        raise KeyError(f"no env named {name!r}; registered: {', '.join(repr(n) for n in _SPECS)}")
    return _loaded(name)


def spec_of_section(section: Any) -> EnvSpec | None:
    """The spec whose section class ``section`` is an instance of, else None (imports the lazily
    registered specs that are not imported yet when ``section`` is a dataclass that none of the
    imported ones owns)."""
    if not dataclasses.is_dataclass(section) or isinstance(section, type):
        return None
    for loaded in (True, False):
        specs = [spec(n) for n, e in list(_SPECS.items()) if isinstance(e, EnvSpec) == loaded]
        for s in specs:
            if type(section) is s.section:
                return s
        for s in specs:
            if isinstance(section, s.section):
                return s
    return None


def _loaded(name: str) -> EnvSpec:
    """The spec of the registered env ``name``, imported first when it was registered by import path."""
    entry = _SPECS[name]
    if isinstance(entry, str):
        entry = _SPECS[name] = _import_spec(name, entry)
    return entry


def _import_spec(name: str, path: str) -> EnvSpec:
    module_name, _, attr = path.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not isinstance(target, EnvSpec) or target.name != name:
        raise TypeError(f"env {name!r}: {path} is {target!r}, not the EnvSpec of an env named {name!r}")
    return target


def load(path: str) -> EnvSpec:
    """Import ``path`` (``package.module:callable``), register the :class:`EnvSpec` it names (the
    attribute itself, or what calling it with no arguments returns) and return it. Loading the same
    path again returns the spec registered the first time. Raises ``ValueError`` with one line saying
    what failed (not an import path, the module does not import, no such attribute, not a spec). The
    user's code runs here (its module's top level, the callable): whatever it raises, ``SystemExit``
    and ``KeyboardInterrupt`` included, is that one line."""
    for name, source in _ORIGINS.items():
        if source == path and name in _SPECS:
            return _loaded(name)
    if not is_import_path(path):
        raise ValueError("expected an import path 'package.module:callable'")
    target = import_target(path)
    if not isinstance(target, EnvSpec):
        if not callable(target):
            raise ValueError(f"{path} is a {type(target).__name__}; expected an EnvSpec or a callable returning one")
        try:
            target = target()
        except BaseException as e:  # the user's factory failed (sys.exit and Ctrl-C included): one line naming it
            raise ValueError(f"calling {path}() raised {user_code_failure(e)}") from e
        if not isinstance(target, EnvSpec):
            raise ValueError(f"{path}() returned a {type(target).__name__}; expected an envs.registry.EnvSpec")
    register(target)
    _ORIGINS[target.name] = path
    return target


def origin(name: str) -> str | None:
    """The import path the env ``name`` was loaded from (:func:`load`), None for an env registered by name."""
    return _ORIGINS.get(name)


for _name, _path in BUILTIN_ENVS.items():
    register_lazy(_name, _path)
