"""The sandbox's fictional geography: states, their cities, and which of them are islands.

Names are invented (no real city collides with them) and chosen so that the official evaluator's
substring tests cannot confuse them: no city name contains another, none contains ``"to "`` or
``"from "`` (which the official code reads as a travel day) nor ``taxi`` / ``flight`` /
``self-driving`` (which it reads as a transport mode). :func:`check_names` enforces this.
"""

from __future__ import annotations

STATES: dict[str, tuple[str, ...]] = {
    "Alderia": ("Brackenford", "Wyndhollow", "Marrowgate", "Eastfen", "Quillmere"),
    "Corvania": ("Saltmarsh", "Dunmoor", "Helmsbury", "Kestrel Bay", "Oakridge Falls", "Pellington"),
    "Veldmark": ("Ironvale", "Ashcombe", "Greywick", "Thornbury", "Lowmarsh"),
    "Solenne": ("Sunhaven", "Amberly", "Cresthill", "Dovecote", "Rosemead"),
    "Norrland": ("Frostholm", "Pinecrest", "Elkwater", "Glacier Point", "Snowdell"),
    "Coral Isles": ("Port Azure", "Lagoon City", "Reefhaven", "Palmetta"),
    "Redmesa": ("Dustwater", "Canyon Ridge", "Sagebrush", "Copperton", "Mesa Verde"),
    "Lakeshire": ("Willowby", "Harbor Glen", "Mistral", "Fernbank", "Loch Arden"),
    "Highpeak": ("Stonegate", "Eagle Crest", "Timberline", "Cloudmere"),
    "Bayland": ("Gullhaven", "Tidewater", "Marlin Point", "Seabright", "Driftwood"),
}

# States reachable from the mainland only by air (roads exist between their own cities).
ISLAND_STATES = frozenset({"Coral Isles"})

# Rough centre of each state on a 4200 km x 2600 km map (x east, y north), in km.
STATE_CENTRES: dict[str, tuple[float, float]] = {
    "Alderia": (600, 2000),
    "Corvania": (1500, 1700),
    "Veldmark": (2600, 2100),
    "Solenne": (3600, 1500),
    "Norrland": (1900, 2450),
    "Coral Isles": (4050, 300),
    "Redmesa": (700, 700),
    "Lakeshire": (2200, 1100),
    "Highpeak": (1300, 1100),
    "Bayland": (3300, 500),
}

FORBIDDEN_FRAGMENTS = ("to ", "from ", "taxi", "flight", "self-driving", ",", ";", "(", ")")


def city_state_map() -> dict[str, str]:
    return {city: state for state, cities in STATES.items() for city in cities}


def check_names(names: list[str], what: str = "city") -> None:
    """Raise if a name contains another or a fragment the official evaluator would misread."""
    low = [n.lower() for n in names]
    for n, ln in zip(names, low):
        for frag in FORBIDDEN_FRAGMENTS:
            if frag in ln:
                raise ValueError(f"{what} name {n!r} contains {frag!r}")
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i != j and a in b:
                raise ValueError(f"{what} name {a!r} is contained in {b!r}")


check_names(list(city_state_map()))
