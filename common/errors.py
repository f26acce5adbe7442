"""The base of every user-facing error (a bad setting, a planner that cannot load, a damaged file...)."""

from __future__ import annotations


class UserError(Exception):
    """An error whose message is the whole story: the entry points print it on one line and exit 2.

    Subclasses keep their builtin base as a second base (``class ConfigError(UserError,
    ValueError)``), so ``except ValueError`` still catches them; :func:`rltf.run.cli.run_cli`
    catches :class:`UserError` by type."""


def user_code_failure(error: BaseException) -> str:
    """What a user's code (a module or callable named by an import path: ``env.name``, ``env.tools``,
    ``rltf.objective``) raised, as ``Type: first line`` for a one-line error naming that path.

    Every exception counts, ``SystemExit`` and ``KeyboardInterrupt`` included: a module that calls
    ``sys.exit(0)`` while it is imported must not end the run silently with status 0."""
    if isinstance(error, SystemExit):
        return f"SystemExit: it called sys.exit({error.code!r})"
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
