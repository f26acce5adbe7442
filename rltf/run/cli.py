"""The entry points' error handling: a user-facing error is one line on stderr, not a traceback.

``train/*.py`` end with ``run_cli(main)``: a bad setting, a planner that cannot load, a run
folder that cannot be used, a damaged file, a run whose numbers went non-finite, a disk that
refuses a write (full, read-only, no permission: :mod:`rltf.run.folders`)... (every
:class:`common.errors.UserError`, and an ``OSError`` of a full or read-only disk) print
``error: <message>`` (the message names the key, file or folder and what to do) and exit with
status 2. Anything else is a bug and keeps its traceback. ``RLTF_TRACEBACK=1`` shows the traceback
of user-facing errors too.

Ctrl-C (``KeyboardInterrupt``) prints one ``error: interrupted (SIGINT)...`` line (the recipe's own
advice: the main job says to resume with ``resume=true``) and exits with status 130, as a shell reports
a command stopped by Ctrl-C. The error line is the last line: the progress bars still open (a bar an
exception left behind would close, and print, after it) are closed first, and the secrets the run holds
(:mod:`common.held_secrets`: an API key) are redacted from it.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from common.errors import UserError
from common.held_secrets import redact
from rltf.run.folders import disk_error_message, disk_error_number

T = TypeVar("T")

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C

INTERRUPTED = "error: interrupted (SIGINT)"
"""The line a Ctrl-C prints; a recipe adds what to do next (:func:`run_cli`'s ``interrupted``)."""
RESUME_ADVICE = ("what the run finished is kept in its folder (the stages done, the newest checkpoint): "
                 "resume with resume=true")
"""The advice of a recipe that resumes (``train/rltf.py``)."""


def one_line(error: BaseException) -> str:
    """The error's message on one line (its lines joined), or its type's name when it has none."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return text or type(error).__name__


def close_progress_bars() -> None:
    """Close every tqdm bar still open (one an exception left behind prints its last status when it is
    closed: at garbage collection, after the error line, unless closed here first)."""
    tqdm_module = sys.modules.get("tqdm.std")
    if tqdm_module is None:
        return
    for bar in list(getattr(tqdm_module.tqdm, "_instances", ())):
        try:
            bar.close()
        except Exception:  # noqa: BLE001 - a bar that cannot close must not hide the error itself
            pass


def run_cli(main: Callable[[list[str]], T], argv: Sequence[str] | None = None, *, interrupted: str = "") -> T:
    """``main(argv)`` (default: ``sys.argv[1:]``); a user-facing error (a :class:`UserError`) is
    printed as ``error: <message>`` on stderr and exits with status 2, without a traceback; Ctrl-C
    prints ``error: interrupted (SIGINT)`` (``; <interrupted>`` when given: what to do next) and exits
    with status 130."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return main(args)
    except KeyboardInterrupt:
        close_progress_bars()
        sys.stdout.flush()
        print(redact(INTERRUPTED + (f"; {interrupted}" if interrupted else "")), file=sys.stderr, flush=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Exception as e:
        close_progress_bars()
        disk = disk_error_number(e) is not None  # a full / read-only disk anywhere: its path, not a traceback
        too_long = isinstance(e, OSError) and e.errno == errno.ENAMETOOLONG  # (a name the config check missed)
        if not (disk or too_long or isinstance(e, UserError)) or os.environ.get("RLTF_TRACEBACK", "") not in ("", "0"):
            raise
        sys.stdout.flush()
        if disk:
            message = disk_error_message(e, None)
        elif too_long:
            message = f"{e.filename}: {os.strerror(e.errno)}; pick a shorter output_dir or run_name"
        else:
            message = one_line(e)
        print(f"error: {redact(message)}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_USER_ERROR) from None
