"""The pddl env's one-line errors: each is a :class:`common.errors.UserError` (the CLI prints it on one
line and exits 2) that names the file, the line where it can and what was expected."""

from __future__ import annotations

import re
from pathlib import Path

from common.errors import UserError


class PddlError(UserError, ValueError):
    """A PDDL input the env cannot use: a malformed file, an unsupported requirement, objects that do not fit
    the domain's types, a plan file naming an unknown action, an empty problem folder."""


class PddlSyntaxError(PddlError):
    """A file the parser rejects: ``<file>:<line>: <what was expected>``."""


class UnsupportedRequirement(PddlError):
    """A ``:requirements`` entry the env does not implement, named."""


class PddlSemanticError(PddlError):
    """A file that parses but does not fit its domain (an unknown predicate, object type or action)."""


def where(path: str | Path | None, line: int | None) -> str:
    """``file:line`` (or just the file, or ``<text>``) for a message's start."""
    name = str(path) if path is not None else "<text>"
    return f"{name}:{line}" if line else name


def line_of(text: str | None, token: str, after: str | None = None) -> int | None:
    """The 1-based line of the first ``(token`` (or bare ``token``) in ``text`` (after the first ``after``,
    if given), None when not found: where a semantic error points."""
    if not text:
        return None
    start = 0
    if after is not None:
        m = re.search(re.escape(after), text, re.IGNORECASE)
        start = m.start() if m else 0
    for pattern in (rf"\(\s*{re.escape(token)}(?![\w-])", rf"(?<![\w?-]){re.escape(token)}(?![\w-])"):
        m = re.compile(pattern, re.IGNORECASE).search(text, start)
        if m:
            return text.count("\n", 0, m.start()) + 1
    return None
