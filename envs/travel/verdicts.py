"""What the travel evaluator says about a plan: the 13 constraint names (ours, the official code's
keys, the paper's names), a :class:`Verdict` per constraint and the :class:`PlanEvaluation` of one
(query, plan). The rules themselves are in ``commonsense.py`` and ``hard_rules.py``; the
evaluator that applies them is ``evaluator.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

COMMONSENSE = ("within_sandbox", "complete_information", "within_current_city", "reasonable_city_route",
               "diverse_restaurants", "diverse_attractions", "non_conflicting_transportation",
               "minimum_nights_stay")
HARD = ("budget", "room_rule", "room_type", "cuisine", "transportation")
CONSTRAINTS = COMMONSENSE + HARD
OFFICIAL_KEYS = {
    "within_sandbox": "is_valid_information_in_sandbox", "complete_information": "is_not_absent",
    "within_current_city": "is_valid_information_in_current_city",
    "reasonable_city_route": "is_reasonable_visiting_city", "diverse_restaurants": "is_valid_restaurants",
    "diverse_attractions": "is_valid_attractions", "non_conflicting_transportation": "is_valid_transportation",
    "minimum_nights_stay": "is_valid_accommodation", "budget": "valid_cost", "room_rule": "valid_room_rule",
    "room_type": "valid_room_type", "cuisine": "valid_cuisine", "transportation": "valid_transportation",
}
PAPER_NAMES = {
    "within_sandbox": "Within Sandbox", "complete_information": "Complete Information",
    "within_current_city": "Within Current City", "reasonable_city_route": "Reasonable City Route",
    "diverse_restaurants": "Diverse Restaurants", "diverse_attractions": "Diverse Attractions",
    "non_conflicting_transportation": "Non-conf. Transportation", "minimum_nights_stay": "Minimum Nights Stay",
    "budget": "Budget", "room_rule": "Room Rule", "room_type": "Room Type", "cuisine": "Cuisine",
    "transportation": "Transportation",
}


@dataclass(frozen=True)
class Verdict:
    passed: bool | None  # None: not applicable (the query does not set this hard constraint)
    reason: str | None = None


PASS = Verdict(True)
NOT_SET = Verdict(None)


def fail(reason: str) -> Verdict:
    return Verdict(False, reason)


def num_text(x: float) -> str:
    """A number as the reasons print it: no '.0' on whole numbers."""
    return str(int(x)) if float(x).is_integer() else str(x)


def money_text(x: float) -> str:
    return f"${num_text(round(x, 2))}"


@dataclass
class PlanEvaluation:
    """Every constraint's verdict for one (query, plan)."""

    query_id: int
    delivered: bool
    error: str | None = None
    error_reason: str | None = None
    commonsense: dict[str, Verdict] = field(default_factory=dict)
    hard: dict[str, Verdict] | None = None  # None: not judged (undelivered, incomplete or outside the sandbox)
    total_cost: float | None = None
    hard_applicable: int = 1
    evaluator_mode: str | None = None  # "official" / "default" (eval_mode.py): the mode that judged it; None: none did

    @property
    def commonsense_pass(self) -> bool:
        return self.delivered and all(v.passed for v in self.commonsense.values())

    @property
    def hard_pass(self) -> bool:
        return self.hard is not None and all(v.passed is not False for v in self.hard.values())

    @property
    def final_pass(self) -> bool:
        return self.commonsense_pass and self.hard_pass

    @property
    def commonsense_passed(self) -> int:
        return sum(v.passed is True for v in self.commonsense.values())

    @property
    def hard_passed(self) -> int:
        return 0 if self.hard is None else sum(v.passed is True for v in self.hard.values())

    def violations(self) -> dict[str, str]:
        """Failed constraint -> reason (hard ones not judged are listed as such)."""
        out = {k: v.reason or "failed" for k, v in self.commonsense.items() if v.passed is False}
        if self.hard is None:
            if self.delivered:
                out["hard"] = "not judged: the plan lacks information or leaves the sandbox"
        else:
            out.update({k: v.reason or "failed" for k, v in self.hard.items() if v.passed is False})
        if not self.delivered:
            out["delivery"] = self.error or "no plan"
        return out

    def verdicts(self) -> dict[str, bool | None]:
        """All 13 constraints: True / False, None for a hard one the query does not set or that
        was not judged."""
        out: dict[str, bool | None] = {k: self.commonsense.get(k, Verdict(False)).passed if self.delivered else False
                                       for k in COMMONSENSE}
        for k in HARD:
            out[k] = None if self.hard is None else self.hard[k].passed
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id, "delivered": self.delivered, "error": self.error,
            "final_pass": self.final_pass, "commonsense_pass": self.commonsense_pass,
            "hard_pass": self.hard_pass, "total_cost": self.total_cost,
            "commonsense": {k: {"passed": v.passed, "reason": v.reason} for k, v in self.commonsense.items()},
            "hard": None if self.hard is None else {k: {"passed": v.passed, "reason": v.reason}
                                                    for k, v in self.hard.items()},
        }
