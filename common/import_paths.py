"""User code named by an import path (``package.module:callable``: ``env.name``, ``rltf.objective``):
its form, and the object it names, imported with whatever the user's module raises made one line."""

from __future__ import annotations

import importlib
from typing import Any

from common.errors import user_code_failure


def is_import_path(name: str) -> bool:
    """Whether ``name`` has the form ``package.module:callable``."""
    module, sep, attr = name.partition(":")
    return bool(sep and module and attr) and all(p.isidentifier() for p in module.split(".") + attr.split("."))


def import_target(path: str) -> Any:
    """The object ``path`` names. Importing runs the user's module: whatever it raises, ``SystemExit``
    and ``KeyboardInterrupt`` included, and a missing attribute, is a ``ValueError`` whose one-line
    message the caller prefixes with the setting it came from."""
    module_name, _, attr = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except BaseException as e:  # whatever the user's module raises on import, sys.exit and Ctrl-C included
        raise ValueError(f"cannot import module {module_name!r} ({user_code_failure(e)}); "
                         f"is its folder on PYTHONPATH or installed?") from e
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ValueError(f"module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    return target
