"""The real TravelPlanner benchmark's file layout, table columns and constraint vocabularies.

Everything the sandbox writes or reads in the official format is named here, so that the
generator, the exporter and the real-database loader agree on one schema.
"""

from __future__ import annotations

# Relative to a ``database/`` directory of the public repository.
DATABASE_FILES: dict[str, str] = {
    "accommodations": "accommodations/clean_accommodations_2022.csv",
    "flights": "flights/clean_Flights_2022.csv",
    "restaurants": "restaurants/clean_restaurant_2022.csv",
    "attractions": "attractions/attractions.csv",
    "distances": "googleDistanceMatrix/distance.csv",
    "cities": "background/citySet_with_states.txt",
}

# The columns the official tools select after ``pd.read_csv(path).dropna()`` (distances: no dropna).
COLUMNS: dict[str, list[str]] = {
    "flights": ["Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate",
                "OriginCityName", "DestCityName", "Distance"],
    "accommodations": ["NAME", "price", "room type", "house_rules", "minimum nights",
                       "maximum occupancy", "review rate number", "city"],
    "restaurants": ["Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"],
    "attractions": ["Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"],
    "distances": ["origin", "destination", "duration", "distance"],
}
# Column order of the files as the public repository ships them (leading pandas index where it has one).
FILE_COLUMNS: dict[str, list[str]] = {
    "flights": COLUMNS["flights"],
    "accommodations": ["NAME", "room type", "price", "minimum nights", "review rate number",
                       "house_rules", "maximum occupancy", "city"],
    "restaurants": COLUMNS["restaurants"],
    "attractions": COLUMNS["attractions"],
    "distances": ["origin", "destination", "cost", "duration", "distance"],
}
FILE_HAS_INDEX = {"flights": False, "accommodations": True, "restaurants": True,
                  "attractions": False, "distances": False}

# Hub dataset (osunlp/TravelPlanner) columns; ``annotated_plan`` only in its train split.
HUB_COLUMNS = ["org", "dest", "days", "visiting_city_number", "date", "people_number",
               "local_constraint", "budget", "query", "level", "reference_information"]
HUB_REQUIRED = ["org", "dest", "days", "visiting_city_number", "date", "people_number",
                "local_constraint", "budget", "query", "level"]
# The hub's test split gives these alone (its structured fields are the benchmark's hidden answers);
# ``reference_information`` is optional to the loader.
HUB_TEXT_COLUMNS = ["days", "query", "level"]
# Limits a hub query's numbers are checked against (the benchmark's queries: 1-8 people, budgets
# of hundreds to tens of thousands of dollars); past them a cost sum is no longer a trip's.
MAX_PEOPLE = 1_000
MAX_BUDGET = 1_000_000_000

PLAN_FIELDS = ("current_city", "transportation", "breakfast", "attraction", "lunch", "dinner",
               "accommodation")
MEALS = ("breakfast", "lunch", "dinner")
EMPTY_DAY_TEXT = "You don't need to fill in the information for this or later days."

LEVELS = ("easy", "medium", "hard")
DAYS = (3, 5, 7)
CITIES_PER_DAYS = {3: 1, 5: 2, 7: 3}

ROOM_TYPES = ("Entire home/apt", "Private room", "Shared room")
HOUSE_RULES = ("smoking", "parties", "children under 10", "visitors", "pets")
HOUSE_RULE_TEXT = {r: f"No {r}" for r in HOUSE_RULES}
ROOM_TYPE_CONSTRAINTS = ("entire room", "private room", "shared room", "not shared room")
# a query's room type -> whether a hotel's room type satisfies it (the official hard rule; the
# evaluator's check and the solver's filter)
ROOM_TYPE_OK = {
    "not shared room": lambda t: t != "Shared room",
    "shared room": lambda t: t == "Shared room",
    "private room": lambda t: t == "Private room",
    "entire room": lambda t: t == "Entire home/apt",
}
TRANSPORT_CONSTRAINTS = ("no flight", "no self-driving")
QUERY_CUISINES = ("Chinese", "American", "Italian", "Mexican", "Indian", "Mediterranean", "French")
OTHER_CUISINES = ("Cafe", "Bakery", "Desserts", "Pizza", "Fast Food", "BBQ", "Seafood", "Tea")
LOCAL_CONSTRAINT_KEYS = ("house rule", "cuisine", "room type", "transportation")

# Cars: self-driving fits 5 people per car, a taxi 4 (official cost rules).
SELF_DRIVING_PER_CAR = 5
TAXI_PER_CAR = 4
