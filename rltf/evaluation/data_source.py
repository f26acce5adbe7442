"""The data a results table was computed on, for the envs that can say (their
:attr:`envs.registry.EnvSpec.provenance`: the travel sandbox's database, flights, queries and split):
the ``data`` key of a results JSON and one markdown line under the table's title. Other envs
(OpenAGI) have none: their results are left as they are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envs import registry


class DataSource(dict):
    """The data a table was computed on (a plain JSON-able dict: the results JSON's ``data``) and, as
    :attr:`line`, the markdown line the env writes for it."""

    def __init__(self, data: dict[str, Any], line: str):
        super().__init__(data)
        self.line = line


def data_source(env_section: Any, env: Any = None, evaluated: Sequence[str] = (), *,
                roles: bool = False) -> DataSource | None:
    """``env_section`` (a run config's ``env:``) and its held-out ``env``: which database, flights,
    queries and split (``evaluated``: the split names the table's queries come from; ``roles``: they
    are ``eval.splits``' train / validation / test, named as the env names them, e.g. a hub re-split's
    ``validation:re-split:test``); None for an env that says nothing (no ``provenance`` in its spec)."""
    spec = registry.spec_of_section(env_section)
    found = spec.provenance(env_section, env, list(evaluated), roles) if spec and spec.provenance else None
    return None if found is None else DataSource(*found)


def with_data_line(md: str, data: DataSource | None) -> str:
    """``md`` (a table under a ``### title`` line) with the data line below the title; unchanged without data."""
    if data is None:
        return md
    title, sep, rest = md.partition("\n")
    if not title.startswith("#"):
        return f"{data.line}\n\n{md}"
    return f"{title}\n\n{data.line}{sep}{rest}"
