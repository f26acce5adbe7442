"""The evaluator's two modes where they read a plan differently (``official_quirks``; the full
list of the official code's slips is in ``evaluator.py``'s docstring): how a 'Name, City' string
finds its sandbox row, how an attraction list splits, what a day's cities are and whether an
entity is in them. Every commonsense and hard rule (``commonsense.py``, ``hard_rules.py``) takes an
:class:`EvalMode` as its first argument and reads the plan through it; the few quirks that live
inside one rule are marked there.

Names: quirk mode reads 'Name, City' with the official pattern (the name's last line) and takes the
first row of the city whose name contains it; the default mode reads the whole name and takes the
first row whose name is the same up to whitespace and Unicode normal form, so the real tables'
names ending in a space or holding a newline are found, and a name a city repeats is one entity
(its first row, the official code's choice too). Where the two differ on real data: ``evaluator.py``.

The modes' names, as results print them (:data:`MODE_TEXT`): ``official`` -- the benchmark's mode,
whose verdicts are those of the official ``evaluation/eval.py``, the one to report TravelPlanner
figures in -- and ``default`` -- the project's rules as intended (the reward's default), whose
verdicts are not the benchmark's.
"""

from __future__ import annotations

from envs.travel.index import SandboxIndex
from envs.travel.text import before_paren, entity_name_city, from_to, name_city

OFFICIAL_MODE = "official"
DEFAULT_MODE = "default"
MODE_TEXT = {
    OFFICIAL_MODE: "official mode (official_quirks=true: the official eval.py's verdicts, the benchmark's)",
    DEFAULT_MODE: "default rules (official_quirks=false: the rules as intended, not the benchmark's verdicts)",
}
"""How a results data line names each mode."""


def mode_name(official_quirks: bool) -> str:
    """``official`` or ``default``: the name of the mode ``official_quirks`` selects."""
    return OFFICIAL_MODE if official_quirks else DEFAULT_MODE


class EvalMode:
    """One sandbox index and the mode: ``official_quirks=True`` reproduces the official code's
    verdicts, ``False`` applies the rules as intended (``index`` and ``quirks``, and the readings
    below, are what the rules use)."""

    def __init__(self, index: SandboxIndex, official_quirks: bool = False):
        self.index = index
        self.quirks = official_quirks
        self.name = mode_name(official_quirks)

    def lookup(self, table, text: str):
        """(entity, number of matching rows) for a 'Name, City' string: quirk mode, the first row
        of the city whose name contains the plan's name (the official pattern's name: the last
        line before the last comma, stripped); else the first row of that name, read whole, up to
        whitespace and Unicode normal form (:meth:`~envs.travel.index.NameTable.get`), counted once."""
        if self.quirks:
            return table.find(*name_city(text))
        e = table.get(*entity_name_city(text))
        return e, int(e is not None)

    def attraction_items(self, value: str) -> list[str]:
        """Quirk mode: ``split(';')[:-1]``, unstripped; else the non-empty ';'-separated items."""
        if self.quirks:
            return value.split(";")[:-1]
        return [p.strip() for p in value.split(";") if p.strip()]

    def day_cities(self, cv: str, i: int) -> tuple[list[str] | str | None, str | None]:
        """The day's cities ([A, B] for 'from A to B'); quirk mode: a plain city stays a string
        (so a rule iterating it goes letter by letter)."""
        if "from" in cv:
            a, b = from_to(cv)
            if a is None or b is None:
                return None, f"day {i + 1} current_city {cv!r} has 'from' but is not 'from A to B'"
            return [before_paren(a), before_paren(b)], None
        city = before_paren(cv)
        if not city:
            return None, f"day {i + 1} has no current_city"
        return (city if self.quirks else [city]), None

    def in_cities(self, text: str, cities) -> bool:
        """Quirk mode: any of the cities (or letters) occurs in the text; else the entity's own city
        is one of them."""
        if self.quirks:
            if isinstance(cities, str):  # letter by letter: one set test, not a scan per letter
                return not set(cities).isdisjoint(text)
            return any(c in text for c in cities)
        return name_city(text)[1] in cities

    @staticmethod
    def first_missing(cities, text: str) -> str | None:
        """The first of the day's cities (quirk mode's plain city: the first letter) that does not
        occur in ``text``; None when all do."""
        if isinstance(cities, str):
            present = set(text)
            return next((c for c in cities if c not in present), None)
        return next((c for c in cities if c not in text), None)
