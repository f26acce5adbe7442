"""OKR-Agent's prompts, as named templates (``str.format`` fields in braces), the agents' job
titles and the evaluation criteria the templates write for them.

Every request starts with the query's head (``{head}``: the query and its constraints); a node's
trace prompt is the request's first line after it. With ``system_prompts`` each node gets
:data:`SYSTEM` with the asking agent's role.
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.travel.verdicts import PAPER_NAMES

SYSTEM = "You are the {role} of a travel-planning team."
LEAD_ROLE = "leading agent"

TITLES = {"route": "Itinerary Planner", "transport": "Transportation Booking Officer",
          "accommodation": "Accommodation Booking Officer", "dining": "Food Planner",
          "sightseeing": "Sightseeing Guide", "budget": "Financial Manager"}
KEY_RESULT_TITLE = "{name} Checker"
DAY_KEY_RESULT_TITLE = "{name} Checker, day {day}"

# what each named constraint asks, in the evaluator-mode criteria
DESCRIPTIONS = {
    "reasonable_city_route": "a closed route from the origin through the destination's cities, each visited once",
    "complete_information": "every day filled: transport on travel days, meals, an attraction and a stay",
    "non_conflicting_transportation": "no self-driving together with flights or taxis",
    "transportation": "the transportation the travellers rule out is never used",
    "minimum_nights_stay": "every stay at least as long as the accommodation's minimum nights",
    "room_rule": "accommodations that allow what the travellers need (house rule)",
    "room_type": "accommodations of the room type the travellers ask for",
    "diverse_restaurants": "no restaurant chosen twice",
    "cuisine": "every cuisine the travellers want served at least once outside the origin",
    "diverse_attractions": "no attraction visited twice",
    "budget": "a total cost within the budget",
}
CRITERION = "An excellent {objective} plan should have the characteristic of {what}{where} in the aspect of {names}."

# ------------------------------------------------------------------- hierarchical generation
OBJECTIVES = ("{head}\nLeading agent: write the objectives of this trip plan, in the order the team works on them. "
              "Options: any order of route (first), transport, accommodation, dining, sightseeing, budget.")
KEY_RESULTS = "{head}\nYou are the {title}. Expand the objective '{objective}' into key results.\n{options}"
MODEL_CRITERION = ("{head}\nYou are an outstanding {title}. In one sentence, starting 'An excellent {objective} plan "
                   "should have the characteristic of', state how to judge the trip plan's {objective} ({names}).")

# ---------------------------------------------------------------------------------- execution
ROUTE_CITIES = "{head}\nYou are the {title}. Criterion: {criterion}\nWhich cities, in which order?\n{options}"
ROUTE_SCHEDULE = "{head}\nYou are the {title}. The route is {route}. On which days do we move?\n{options}"
EXPAND = ("{head}\nYou are the {title}. Criterion: {criterion}\nExpand the solution: choose {what}.\n{options}\n"
          "Answer with one option.")
SLOTS = {
    "transport": "transportation from {a} to {b} on day {day}",
    "stay": "accommodation in {city} for days {first}-{last}",
    "meal": "{meal} on day {day} in {city}",
    "attraction": "an attraction on day {day} in {city}",
}
OPTION = "- {option}"

# ------------------------------------------------------------------------- review and revise
REVISE = ("{head}\nYou are the {title}. Review: {constraint} fails: {reason}\nRevise {slot} (now {value}):\n"
          "{options}\nAnswer with one option.")
MODEL_REVIEW = ("{head}\nYou are the {title}. Criteria: {criterion}\nSolution (total ${total}):\n{solution}\n"
                "Does it meet the criteria? Answer pass, or the slot to revise.")
SOLUTION_LINE = "- {slot}: {value}"
NOTHING_OF_ITS_OWN = "- (nothing of its own)"
PASS = "pass"
REVISE_CHOICE = "revise {slot}"
MODEL_REVISE = ("{head}\nYou are the {title}. Criteria: {criterion}\nRevise {slot} (now {value}):\n{options}\n"
                "Answer with one option.")


def criterion(objective: str, constraints: Sequence[str], day: int | None = None) -> str:
    """The evaluator-mode criterion of an agent judging ``constraints`` (on ``day``)."""
    return CRITERION.format(objective=objective, what="; ".join(DESCRIPTIONS[c] for c in constraints),
                            where=f" on day {day}" if day else "",
                            names=paper_names(constraints))


def paper_names(constraints: Sequence[str]) -> str:
    """The constraints' names as the OKR paper's prompts write them."""
    return ", ".join(PAPER_NAMES[c] for c in constraints)
