"""What the travel commands (``python -m envs.travel.solver``, ``python -m envs.travel.sandbox``)
share: their data options (``--database``, ``--queries``, ``--split``), loading them, and the
one-line error with exit status 2 for anything the user can fix (a :class:`common.errors.UserError`;
the same contract as ``rltf.run.cli.run_cli``, which envs cannot import)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from common.errors import UserError
from envs.travel.hub import HUB_ID


class CommandError(UserError, ValueError):
    """Data a travel command cannot load (a missing folder or file, a bad table or record)."""


@contextmanager
def loading(what: str) -> Iterator[None]:
    """Turn the loaders' ``FileNotFoundError`` / ``ValueError`` / ``OSError`` into a one-line
    :class:`CommandError` naming ``what``; user errors pass unchanged."""
    try:
        yield
    except UserError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CommandError(f"cannot load {what}: {first}") from None


def add_data_options(ap, split_default: str | None) -> None:
    """``--database``, ``--queries``, ``--split`` and ``--flights`` on the argument parser ``ap``."""
    ap.add_argument("--database", metavar="DIR",
                    help="the TravelPlanner database folder (the public repository's database/ CSVs; flights "
                         "generated when it has none), or 'reference_information': each query's own reference "
                         "rows (sole-planning, the hub dataset alone). Default: the synthetic sandbox")
    ap.add_argument("--queries", metavar="FILE|DIR|HUB_ID",
                    help=f"hub-format queries: a .csv / .jsonl / .json file, a folder of {{split}}.csv / .jsonl, "
                         f"or a hub dataset id ({HUB_ID}, from the local cache). Default: the synthetic sandbox's")
    ap.add_argument("--split", default=split_default,
                    help="which queries: train, validation or test (the hub's splits; the synthetic sandbox: its "
                         "persisted split), <hub split>:re-split:<part> (e.g. validation:re-split:test), or all")
    ap.add_argument("--flights", default="auto", choices=("auto", "generated", "file"),
                    help="--database DIR: its flights file (file), generated flights (generated), or the file "
                         "when present, else generated (auto)")


def run_command(main: Callable[[list[str] | None], None], argv: list[str] | None = None) -> None:
    """``main(argv)``; a :class:`UserError` is printed as ``error: <message>`` (one line) and exits 2."""
    try:
        main(argv)
    except UserError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        raise SystemExit(2) from None
