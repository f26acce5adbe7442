"""What every training recipe in ``train/`` does first: read its config, honour ``dry_run``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from rltf.run.tracking import configure_progress_bars


def recipe_config(argv: Sequence[str] | None, load: Callable[[list[str]], Any],
                  describe: Callable[[Any], str]) -> Any | None:
    """The recipe's run config, read by ``load`` from ``argv`` (default: the command line). With
    ``dry_run=true`` it prints ``describe(cfg)`` and returns None (nothing loads, nothing runs);
    otherwise it sets up the libraries' progress bars (``logging.progress_bar``) and returns it."""
    cfg = load(list(sys.argv[1:] if argv is None else argv))
    if cfg.dry_run:
        print(describe(cfg))
        return None
    configure_progress_bars(cfg.logging.progress_bar)
    return cfg


def run_recipe(argv: Sequence[str] | None, load: Callable[[list[str]], Any], describe: Callable[[Any], str],
               run: Callable[[Any], Any]) -> Any:
    """A recipe's ``main``: :func:`recipe_config`, then ``run(cfg)`` unless it was a dry run."""
    cfg = recipe_config(argv, load, describe)
    return None if cfg is None else run(cfg)
