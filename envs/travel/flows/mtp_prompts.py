"""Meta-Task Planning's prompts, as named templates (``str.format`` fields in braces).

Every request starts with the query's head (``{head}``: the query and its constraints) except
the executors' (their rewritten meta-task) and the deliverer's (the query only). The role system
messages (:data:`ROLES`) are sent with ``system_prompts``.
"""

from __future__ import annotations

ROLES = {
    "manager": "You are the manager agent of a travel-planning team: decompose the trip into meta-tasks.",
    "supervisor": "You are the supervisor agent: make a meta-task concrete with its predecessors' outcomes.",
    "executor": "You are an executor agent: complete one meta-task with the search tools under its local constraints.",
    "deliverer": "You are the deliverer agent: assemble the final itinerary under the global constraints.",
}

# ------------------------------------------------------------------------------------ manager
MANAGER_ROUTE_NODE = "Manager: which cities, in which order?"
MANAGER_ROUTE = "{head}\nManager: decompose the trip. Visit which cities, in which order?\n{options}"
MANAGER_SCHEDULE_NODE = "Manager: how many nights in each city?"
MANAGER_SCHEDULE = "{head}\nManager: the route is {route}. On which days do we move? (city days first-last)\n{options}"
MANAGER_TRANSPORT_NODE = "Manager: which transport for the whole trip?"
MANAGER_TRANSPORT = ("{head}\nManager: the schedule is {schedule}. Which transport for every leg (no self-driving "
                     "with flights or taxis)?\n{options}")
OPTION = "- {option}{hint}"
COST_HINT = " (from ${cost}, budget ${budget})"  # the cheapest trip through the option
TRANSPORT_COST_HINT = " (transport from ${cost}, budget ${budget})"

# the meta-tasks the manager writes (ambiguous on purpose: the supervisor makes them concrete)
BRIEFS = {
    "transport": "Find transportation from {a} to {b} on day {day}.",
    "stay": "Find accommodation in {city}.",
    "meal": "Choose {meal} on day {day} in {city}.",
    "attraction": "Choose an attraction on day {day} in {city}.",
}
LOCAL = {
    "transportation": "transportation: {rule}",
    "family": "transport family: {family}",
    "nights": "minimum nights at most {nights}",
    "room type": "room type: {room_type}",
    "house rule": "house rule: {rule} allowed",
    "new restaurant": "a restaurant not chosen before",
    "cuisines": "cover the cuisines {cuisines}",
    "new attraction": "an attraction not visited before",
}
GLOBAL_BUDGET = "budget: ${budget} for the whole trip"

# --------------------------------------------------------------------------------- supervisor
SUPERVISOR_NODE = "Supervisor: rewrite meta-task {task}."
SUPERVISOR = ("{head}\nSupervisor: rewrite this meta-task so every parameter is concrete, using the outcomes of "
              "the meta-tasks it depends on.\nMeta-task: {brief} Local constraints: {local}.\nOutcomes:\n{outcomes}"
              "\nRewritten meta-task:")
OUTCOME = "- {task}: {answer}"
NO_OUTCOMES = "- (none: it starts the chain)"

# the template supervisor's rewrite: the first sentence by kind, then what the predecessors tell
REWRITE = {
    "transport": "Meta-task {task}: travel from {a} to {b} on day {day} ({date}) for {party}.",
    "stay": "Meta-task {task}: accommodation in {city} for {nights} night(s), days {first}-{last}, for {party}.",
    "meal": "Meta-task {task}: {meal} on day {day} in {city} for {party}.",
    "attraction": "Meta-task {task}: an attraction in {city} on day {day}.",
}
PREVIOUS_LEG = " Previous leg: {choice}."
ARRIVING_BY = " Arriving by {choice}."
OPTIONAL_MEAL = " Optional: '-' skips it."
ALREADY_CHOSEN = " Already chosen (not again): {used}."
CUISINES_MISSING = " Cuisines still to cover: {missing}."
ALREADY_VISITED = " Already visited: {used}."
REWRITE_END = " Local constraints: {local}."

# ---------------------------------------------------------------------------------- executors
EXECUTOR = "{brief}\n{note}. Options (cheapest first):\n{options}\nAnswer with one option."
MODEL_SUPERVISED = "Supervisor: {rewrite}\n{brief}"
TOOL_CALLS = {
    "transport": "FlightSearch[{a}, {b}, {date}] + GoogleDistanceMatrix[{a}, {b}, self-driving|taxi]",
    "stay": "AccommodationSearch[{city}]",
    "meal": "RestaurantSearch[{city}]",
    "attraction": "AttractionSearch[{city}]",
}
FOUND = "{call}: {found} results"
FOUND_MEETING = "{call}: {found} results, {meeting} meet the local constraints"
NONE_MEETS = " (none does: every result is shown)"

# ---------------------------------------------------------------------------------- deliverer
DELIVERER_NODE = "Deliverer: assemble the itinerary under the budget."
DELIVERER = ("{query}\nDeliverer: every meta-task is done; the global constraint is the budget of ${budget}. "
             "Itineraries meeting it:\n{options}\nAnswer with one option.")
