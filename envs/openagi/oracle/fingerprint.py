"""The key of one task's oracle: a digest of everything its best plan and scores depend on.

The oracle (:func:`envs.openagi.oracle.search_oracle`) scores every valid plan of a task on all of
its samples, so its result is a pure function of

* the task: id, input modalities, target, metric, reference plan, and every sample's uid, inputs
  and ground truth (their bytes: the suite, split, ``n_samples`` and ``data_seed`` are all in them);
* the plan limits searched;
* the registry: every tool's name, modalities and implementation (its module and qualified name);
* the code: every ``.py`` file of ``envs/openagi`` (experts, metrics, plans, executor, env) and
  ``common/minilm.py``, and the versions of the third-party packages those files import;
* the MiniLM the text metrics load (:func:`common.minilm.minilm_dir`: its path, file sizes and times).

A task is only keyed (:func:`oracle_key` returns None, and the oracle is searched every time) when
all of that is known: every tool and the task's metric are implemented in this package (``envs.openagi``
but not its ``hf`` backend, whose models come from a hub and may run on a GPU) -- a tool or metric
from elsewhere (an extra ``env.tools`` entry, a test's lambda) could change without the key changing --
and the env scores a plan on all of the task's samples (a drawn subset would use the env's generator).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import sys
from dataclasses import astuple
from pathlib import Path
from typing import Any

import numpy as np

from common.minilm import minilm_dir
from envs.openagi.metrics import get_metric
from envs.openagi.plans import PlanLimits, format_plan
from envs.openagi.tasks import Task

KEY_FORMAT = 1
"""Bumped when the key's contents or the stored entry's layout change."""

_ROOT = Path(__file__).resolve().parents[3]  # the checkout: envs/, common/
_CODE_DIRS = (_ROOT / "envs" / "openagi",)
_CODE_FILES = (_ROOT / "common" / "minilm.py",)
_TRUSTED_PREFIX = "envs.openagi."
_UNTRUSTED_PREFIX = "envs.openagi.hf"


class Unkeyable(Exception):
    """Something the oracle depends on cannot be fingerprinted (the oracle is then searched)."""


def oracle_key(env: Any, task: Task, limits: PlanLimits) -> str | None:
    """The hex digest keying ``task``'s oracle in ``env`` under ``limits``, or None when the module
    docstring's conditions do not hold."""
    per_step = getattr(env, "samples_per_step", None)
    if per_step is not None and per_step < len(task.samples):
        return None
    try:
        metric = get_metric(task.metric, getattr(env, "metrics", None))
        parts = [("format", KEY_FORMAT), ("task", _task_part(task)), ("limits", astuple(limits)),
                 ("tools", _registry_part(env.registry)), ("metric", (task.metric, _implementation(metric))),
                 ("code", code_fingerprint())]
        h = hashlib.sha256()
        _feed(h, parts)
    except (Unkeyable, ValueError):  # (an unknown metric: the search says so)
        return None
    return h.hexdigest()


def _task_part(task: Task) -> tuple:
    samples = tuple((s.uid, s.inputs, s.target) for s in task.samples)
    return (task.id, tuple(task.inputs), task.target, task.metric, format_plan(task.reference_plan), samples)


def _registry_part(registry) -> tuple:
    return tuple((t.name, tuple(t.inputs), t.output, _implementation(t.fn)) for t in registry)


def _implementation(fn: Any) -> tuple[str, str]:
    """(module, qualified name) of a tool or metric function; :class:`Unkeyable` outside this package."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)  # a bound method: its function
    module = getattr(fn, "__module__", None) or ""
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    if not module.startswith(_TRUSTED_PREFIX) or module.startswith(_UNTRUSTED_PREFIX):
        raise Unkeyable(f"{module}.{qualname} is not an offline implementation of envs.openagi")
    return module, qualname


@functools.cache
def code_fingerprint() -> str:
    """The digest of the code the oracle runs (once per process): the source files, the versions of
    the third-party packages they import, and the MiniLM the text metrics load."""
    h = hashlib.sha256()
    files = sorted({p for d in _CODE_DIRS for p in d.rglob("*.py")} | set(_CODE_FILES))
    imported: set[str] = set()
    for path in files:
        source = path.read_bytes()
        _feed(h, (path.relative_to(_ROOT).as_posix(), source))
        imported |= _top_level_imports(source)
    _feed(h, ("packages", _package_versions(imported)))
    _feed(h, ("minilm", _minilm_files()))
    return h.hexdigest()


def _top_level_imports(source: bytes) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"envs", "constrained_decoding", "common", "__future__"}


def _package_versions(modules: set[str]) -> tuple:
    dists = importlib.metadata.packages_distributions()
    out = []
    for module in sorted(modules):
        for dist in sorted(set(dists.get(module, ()))):
            try:
                out.append((module, dist, importlib.metadata.version(dist)))
            except importlib.metadata.PackageNotFoundError:
                out.append((module, dist, None))
        if module not in dists:
            out.append((module, None, None))
    return tuple(out)


def _minilm_files() -> tuple:
    try:
        root = minilm_dir("the oracle's text metrics")
    except (ImportError, FileNotFoundError) as exc:
        return ("unavailable", type(exc).__name__)
    return (str(root), tuple((p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                             for p in sorted(root.rglob("*")) if p.is_file()))


def _feed(h, value: Any) -> None:
    """Hash ``value`` unambiguously (type-tagged, length-prefixed); :class:`Unkeyable` for a type
    without a canonical form."""
    if value is None or isinstance(value, (bool, int, str)):
        data = repr(value).encode()
        h.update(b"%s:%d:" % (type(value).__name__.encode(), len(data)) + data)
    elif isinstance(value, float):
        h.update(b"float:" + value.hex().encode() + b";")
    elif isinstance(value, bytes):
        h.update(b"bytes:%d:" % len(value) + value)
    elif isinstance(value, (np.ndarray, np.generic)):
        a = np.ascontiguousarray(value)
        if a.dtype.hasobject:
            raise Unkeyable("an object array")
        h.update(f"ndarray:{a.dtype.str}:{a.shape}:".encode() + a.tobytes())
    elif isinstance(value, (tuple, list)):
        h.update(b"%s:%d[" % (type(value).__name__.encode(), len(value)))
        for v in value:
            _feed(h, v)
        h.update(b"]")
    elif isinstance(value, dict):
        h.update(b"dict:%d{" % len(value))
        for k in sorted(value, key=repr):
            _feed(h, k)
            _feed(h, value[k])
        h.update(b"}")
    else:
        raise Unkeyable(f"a {type(value).__name__} has no canonical form")
