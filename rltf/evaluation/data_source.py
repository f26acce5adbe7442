"""The data a results table was computed on, for the envs that can say (the travel env:
:mod:`envs.travel.provenance`): the ``data`` key of a results JSON and one markdown line under the
table's title. Other envs (OpenAGI) have none: their results are left as they are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def data_source(env_section: Any, env: Any = None, evaluated: Sequence[str] = (), *,
                roles: bool = False) -> dict[str, Any] | None:
    """``env_section`` (a run config's ``env:``) and its held-out ``env``: which database, flights,
    queries and split (``evaluated``: the split names the table's queries come from; ``roles``: they
    are ``eval.splits``' train / validation / test, named as the env names them, e.g. a hub re-split's
    ``validation:re-split:test``); None for an env other than travel."""
    if getattr(env_section, "name", None) != "travel":
        return None
    # deferred: only travel runs load the travel env's modules (pandas)
    from envs.travel.factory import run_split_names
    from envs.travel.provenance import data_source as travel_data  # deferred: as above

    if roles:
        names = run_split_names(env_section.travel)
        evaluated = [names.get(s, s) for s in evaluated]
    return travel_data(env_section.travel, getattr(env, "index", None), evaluated)


def with_data_line(md: str, data: dict[str, Any] | None) -> str:
    """``md`` (a table under a ``### title`` line) with the data line below the title; unchanged without data."""
    if data is None:
        return md
    from envs.travel.provenance import data_line  # deferred: only travel runs load the travel env's modules

    title, sep, rest = md.partition("\n")
    if not title.startswith("#"):
        return f"{data_line(data)}\n\n{md}"
    return f"{title}\n\n{data_line(data)}{sep}{rest}"
