"""Which objective a run trains with (``rltf.objective``), asked in one place.

``rltf.objective`` is a name of :data:`~rltf.algorithms.objectives.OBJECTIVES`, ``auto``, or an
import path ``package.module:callable`` naming the user's own objective (imported from ``sys.path``,
e.g. ``PYTHONPATH``; the saved config keeps the path, so a resumed run imports it again):

* ``auto`` (the default) is what the other keys implied before the key existed, so every config
  written without it trains as it did: ``unordered_set`` when ``rltf.baseline`` weights a set drawn
  without replacement (the ``unordered_set`` baseline), else ``reinforce`` for one pass of one
  minibatch and ``clipped`` otherwise (``rltf.update_epochs``, ``rltf.minibatches``);
* an import path names an :class:`~rltf.algorithms.objectives.ObjectiveSpec`, or a callable
  ``(units, rule) -> Objective`` (or ``(loss, logs)``, or a bare loss tensor), which becomes the loss
  of a spec with the default properties (reuses the batch, samples independently, any baseline
  without a set). Anything the user's code raises, on import or when called, is one line naming the
  path (:class:`ObjectiveError`), ``SystemExit`` included (and ``KeyboardInterrupt`` on import; while
  training, Ctrl-C is the run's interruption: :func:`rltf.run.cli.run_cli`).

:func:`objective_of` is the entry of a run's settings; :func:`draws_distinct_plans` the one question
the sampler, the loss weights and the flow job ask of it; :func:`objective_problem` the config's
check of the combination (one line naming the key).
"""

from __future__ import annotations

import dataclasses

import torch

from common.errors import UserError, user_code_failure
from common.import_paths import import_target, is_import_path
from rltf.algorithms.baselines import BASELINES
from rltf.algorithms.objectives import OBJECTIVES, Objective, ObjectiveSpec, Units, objective_name

AUTO = "auto"

_LOADED: dict[str, ObjectiveSpec] = {}  # import path -> the spec loaded from it (imported once per process)


class ObjectiveError(UserError, ValueError):
    """A user's objective that cannot be imported, or that raised or returned something else than a
    loss; the message names its import path."""


def objective_label(rule) -> str:
    """The objective ``rule`` trains with, by name: ``auto`` resolved to its entry, a registered name, or
    the import path as given."""
    name = getattr(rule, "objective", AUTO)
    if name != AUTO:
        return name
    if BASELINES.lookup(rule.baseline).without_replacement:
        return "unordered_set"
    return objective_name(rule.update_epochs, rule.minibatches)


def objective_of(rule) -> ObjectiveSpec:
    """The :class:`~rltf.algorithms.objectives.ObjectiveSpec` of ``rule`` (``rltf.`` settings:
    ``objective``, ``baseline``, ``update_epochs``, ``minibatches``); raises :class:`ObjectiveError`
    for a path that does not load and ``ValueError`` for an unknown name."""
    name = objective_label(rule)
    return load_objective(name) if ":" in name else OBJECTIVES.lookup(name)


def draws_distinct_plans(rule) -> bool:
    """Whether a task's ``k_samples`` plans are drawn without replacement (distinct, by stochastic beam
    search) rather than independently: the property of the run's objective entry."""
    return objective_of(rule).without_replacement


def load_objective(path: str) -> ObjectiveSpec:
    """The spec ``path`` (``package.module:callable``) names, imported once; its loss guarded so that
    an exception in the user's code is one line naming ``path``."""
    if path in _LOADED:
        return _LOADED[path]
    if not is_import_path(path):
        raise ObjectiveError(f"bad value for 'rltf.objective': {path!r}; expected one of "
                             f"{', '.join((AUTO, *OBJECTIVES.names()))}, or an import path 'package.module:callable'")
    try:
        target = import_target(path)
    except ValueError as e:
        raise ObjectiveError(f"bad value for 'rltf.objective': {path!r}; {e}") from e.__cause__
    if isinstance(target, ObjectiveSpec):
        spec = target
    elif callable(target):
        spec = ObjectiveSpec(target)
    else:
        raise ObjectiveError(f"bad value for 'rltf.objective': {path!r}; {path} is a {type(target).__name__}; "
                             "expected an ObjectiveSpec or a callable (units, rule) -> Objective")
    spec = dataclasses.replace(spec, loss=_Guarded(path, spec.loss))
    _LOADED[path] = spec
    return spec


class _Guarded:
    """A user's loss: what it raises becomes one :class:`ObjectiveError` line naming its path, and what
    it returns an :class:`~rltf.algorithms.objectives.Objective`."""

    def __init__(self, path: str, loss):
        self.path, self.loss = path, loss

    def __call__(self, units: Units, rule) -> Objective:
        try:
            out = self.loss(units, rule)
        except KeyboardInterrupt:  # Ctrl-C while training: the run's interruption (exit 130, resume), not the loss's
            raise
        except BaseException as e:  # the user's objective failed (sys.exit included): one line naming it
            raise ObjectiveError(f"the objective {self.path} (rltf.objective) raised {user_code_failure(e)}") from e
        loss, logs = (out, {}) if isinstance(out, torch.Tensor) else out
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise ObjectiveError(f"the objective {self.path} (rltf.objective) returned a loss of type "
                                 f"{type(loss).__name__}; expected a scalar torch tensor")
        try:
            return Objective(loss.reshape(()), {str(k): float(v) for k, v in dict(logs).items()})
        except (TypeError, ValueError) as e:
            raise ObjectiveError(f"the objective {self.path} (rltf.objective) returned logs that are not a mapping "
                                 f"of names to numbers ({_first_line(e)})") from e


def objective_problem(rule, prefix: str = "rltf") -> str | None:
    """What is wrong with ``rule``'s choice of objective, in one line naming the key; None when it can
    train. Loads a user's objective (its import errors are the problem)."""
    name = getattr(rule, "objective", AUTO)
    if name != AUTO and name not in OBJECTIVES and not is_import_path(name):
        return (f"bad value for '{prefix}.objective': {name!r}; expected one of "
                f"{', '.join((AUTO, *OBJECTIVES.names()))}, or an import path 'package.module:callable' "
                "(docs/algorithm/adding-an-algorithm.md)")
    try:
        spec = objective_of(rule)
    except ObjectiveError as e:
        return str(e)
    label, baseline = objective_label(rule), BASELINES.lookup(rule.baseline)
    if not spec.reuses_batch and (rule.update_epochs != 1 or rule.minibatches != 1):
        return (f"'{prefix}.objective' {label!r} takes one step per sampled batch, but '{prefix}.update_epochs' is "
                f"{rule.update_epochs} and '{prefix}.minibatches' {rule.minibatches}; set both to 1, or "
                f"{prefix}.objective=clipped to reuse the batch")
    if spec.baseline is not None and rule.baseline != spec.baseline:
        return (f"'{prefix}.objective' {label!r} weights its samples by the {spec.baseline} baseline, but "
                f"'{prefix}.baseline' is {rule.baseline!r}; set {prefix}.baseline={spec.baseline}")
    if baseline.without_replacement and not spec.without_replacement:
        return (f"'{prefix}.baseline' {rule.baseline!r} weights a set of distinct plans drawn without replacement, "
                f"but '{prefix}.objective' {label!r} samples them independently; set {prefix}.objective=auto (or "
                "unordered_set)")
    if spec.without_replacement and not baseline.without_replacement:
        return (f"'{prefix}.objective' {label!r} draws distinct plans without replacement, which only a baseline "
                f"that weights the set can use, but '{prefix}.baseline' is {rule.baseline!r}; set "
                f"{prefix}.baseline=unordered_set")
    return None


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
