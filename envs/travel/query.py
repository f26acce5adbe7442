"""One TravelPlanner query (the hub dataset's record), with conversion to and from its columns."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from envs.travel.schema import HUB_REQUIRED, LOCAL_CONSTRAINT_KEYS


def empty_constraints() -> dict[str, Any]:
    return {k: None for k in LOCAL_CONSTRAINT_KEYS}


@dataclass(frozen=True)
class TravelQuery:
    id: int
    org: str
    dest: str  # a city (3 days) or a state (5 / 7 days)
    days: int
    visiting_city_number: int
    date: tuple[str, ...]
    people_number: int
    local_constraint: dict[str, Any] = field(default_factory=empty_constraints, hash=False)
    budget: int = 0
    query: str = ""
    level: str = "easy"

    @property
    def hard_constraint_count(self) -> int:
        """Budget plus the local constraints the query sets (the hard micro-rate denominator)."""
        return 1 + sum(self.local_constraint.get(k) is not None for k in LOCAL_CONSTRAINT_KEYS)

    def as_dict(self) -> dict[str, Any]:
        """The record as the official evaluator reads it (``local_constraint`` a dict)."""
        return {"org": self.org, "dest": self.dest, "days": self.days,
                "visiting_city_number": self.visiting_city_number, "date": list(self.date),
                "people_number": self.people_number, "local_constraint": dict(self.local_constraint),
                "budget": self.budget, "query": self.query, "level": self.level}

    def to_hub(self) -> dict[str, Any]:
        """The hub dataset's row: ``date`` and ``local_constraint`` as Python-literal strings."""
        row = self.as_dict()
        row["date"] = repr(list(self.date))
        row["local_constraint"] = repr(dict(self.local_constraint))
        return row

    @classmethod
    def from_record(cls, row: dict[str, Any], id: int) -> "TravelQuery":
        """From a hub row or :meth:`as_dict`; ``date`` / ``local_constraint`` may be strings."""
        missing = [c for c in HUB_REQUIRED if c not in row]
        if missing:
            raise ValueError(f"query record {id} lacks column(s) {missing}; expected {HUB_REQUIRED}")
        date = row["date"]
        if isinstance(date, str):
            date = _literal(date, "date", id)
        lc = row["local_constraint"]
        if isinstance(lc, str):
            lc = _literal(lc, "local_constraint", id)
        lc = {**empty_constraints(), **(lc or {})}
        if isinstance(lc.get("cuisine"), str):
            lc["cuisine"] = [lc["cuisine"]]
        return cls(id=id, org=str(row["org"]), dest=str(row["dest"]), days=int(row["days"]),
                   visiting_city_number=int(row["visiting_city_number"]), date=tuple(str(d) for d in date),
                   people_number=int(row["people_number"]), local_constraint=lc,
                   budget=int(float(row["budget"])), query=str(row["query"]), level=str(row["level"]))


def _literal(text: str, column: str, id: int) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"query record {id}: column {column!r} is not a literal: {text[:80]!r}") from exc


@dataclass(frozen=True)
class QueryView:
    """What a planner of the benchmark track may read of a query (envs/travel/tracks.py): its text,
    level and days (the hub's test split's own columns) and its ``reference_information`` notes --
    no structured field (origin, dates, budget, people, room rules...). It has what
    :class:`envs.travel.tasks.TravelTask` reads of a query (``id``, ``query``, ``level``)."""

    id: int
    query: str
    level: str
    days: int
    notes: Any = field(default=None, repr=False, compare=False)  # the query's reference_information (as given)

    @classmethod
    def of(cls, q: "TravelQuery", notes: Any) -> "QueryView":
        return cls(q.id, q.query, q.level, q.days, notes)

    def info(self) -> dict[str, Any]:
        """The gym reset's ``info``: the id, text, level and days only."""
        return {"query_id": self.id, "query": self.query, "level": self.level, "days": self.days}

    @cached_property
    def prompt(self) -> str:
        """What a benchmark-track planner reads: :func:`sole_planning_prompt` of its text and own notes."""
        return sole_planning_prompt(self.query, self.notes)


_PADDING = re.compile(r" {2,}")


def given_information(notes: Any) -> str:
    """A query's ``reference_information`` as the official sole-planning prompt's ``{text}`` shows it
    (``tools/planner/sole_planning.py`` passes the hub column itself: the text of a list of
    ``{'Description', 'Content'}`` records, each Content a table): the column's text (a parsed list:
    its ``str``), with every run of spaces -- the tables' column padding -- shortened to one space,
    so that a prompt cut to a token budget keeps about twice the rows. ``""`` without notes."""
    if notes is None:
        return ""
    return _PADDING.sub(" ", notes if isinstance(notes, str) else str(notes))


def sole_planning_prompt(query: str, notes: Any) -> str:
    """The official sole-planning prompt's last lines (``agents/prompts.py``, ``PLANNER_INSTRUCTION``:
    ``Given information: {text}\nQuery: {query}\nTravel Plan:``) without the instruction, the example
    and the answer cue, which are the planner's (its plan format and chat turn or plan separator):
    ``Given information: <notes>\nQuery: <query>``. The query comes last, so a prompt cut from the
    left to the planner's token budget (``planner.max_prompt_tokens``) keeps it whole. No notes: the
    query alone."""
    info = given_information(notes)
    return f"Given information: {info}\nQuery: {query}" if info else query
