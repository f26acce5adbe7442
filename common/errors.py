"""The base of every user-facing error (a bad setting, a planner that cannot load, a damaged file...)."""

from __future__ import annotations


class UserError(Exception):
    """An error whose message is the whole story: the entry points print it on one line and exit 2.

    Subclasses keep their builtin base as a second base (``class ConfigError(UserError,
    ValueError)``), so ``except ValueError`` still catches them; :func:`rltf.run.cli.run_cli`
    catches :class:`UserError` by type."""
