"""The entry points' error handling: a user-facing error is one line on stderr, not a traceback.

``train/*.py`` end with ``run_cli(main)``: a bad setting, a planner that cannot load, a run
folder that cannot be used, a damaged file, a run whose numbers went non-finite, a disk that
refuses a write (full, read-only, no permission: :mod:`rltf.run.folders`)... (every
:class:`common.errors.UserError`, and an ``OSError`` of a full or read-only disk) print
``error: <message>`` (the message names the key, file or folder and what to do) and exit with
status 2. Anything else is a bug and keeps its traceback. ``RLTF_TRACEBACK=1`` shows the traceback
of user-facing errors too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from common.errors import UserError
from rltf.run.folders import disk_error_message, disk_error_number

T = TypeVar("T")

EXIT_USER_ERROR = 2


def one_line(error: BaseException) -> str:
    """The error's message on one line (its lines joined), or its type's name when it has none."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return text or type(error).__name__


def run_cli(main: Callable[[list[str]], T], argv: Sequence[str] | None = None) -> T:
    """``main(argv)`` (default: ``sys.argv[1:]``); a user-facing error (a :class:`UserError`) is
    printed as ``error: <message>`` on stderr and exits with status 2, without a traceback."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return main(args)
    except Exception as e:
        disk = disk_error_number(e) is not None  # a full / read-only disk anywhere: its path, not a traceback
        if not (disk or isinstance(e, UserError)) or os.environ.get("RLTF_TRACEBACK", "") not in ("", "0"):
            raise
        sys.stdout.flush()
        message = disk_error_message(e, None) if disk else one_line(e)
        print(f"error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_USER_ERROR) from None

