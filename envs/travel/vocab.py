"""Word lists from which the generator composes restaurant, accommodation and attraction names.

No word here is (part of) a city name of :mod:`envs.travel.geography`, and names never contain a
comma or a semicolon, so the official "Name, City" and "a;b;" parsing always splits them right.
"""

from __future__ import annotations

RESTAURANT_FIRST = (
    "Golden", "Rustic", "Blue", "Little", "Silver", "Crimson", "Velvet", "Olive", "Copper", "Jade",
    "Saffron", "Maple", "Lucky", "Humble", "Twin", "Wild", "Smoky", "Sunny", "Old", "Urban",
    "Happy", "Royal", "Cedar", "Hidden", "Spicy", "Garden", "Harvest", "Lotus", "Brick", "Iron",
    "Paper", "Wooden", "Salty", "Honey", "Ember", "Mint", "Pepper", "Basil", "Tiny", "Grand",
)
RESTAURANT_SECOND = (
    "Ladle", "Spoon", "Lantern", "Table", "Kettle", "Oven", "Skillet", "Grill", "Bistro", "Kitchen",
    "Tavern", "Noodle House", "Diner", "Cantina", "Trattoria", "Brasserie", "Canteen", "Wok",
    "Tandoor", "Taqueria", "Creperie", "Smokehouse", "Bakehouse", "Tea Room", "Eatery", "Pantry",
    "Chophouse", "Dumpling Bar", "Pizzeria", "Cafe", "Fork", "Plate", "Bowl", "Larder", "Hearth",
)
LODGING_FIRST = (
    "Cozy", "Sunny", "Bright", "Quiet", "Spacious", "Charming", "Modern", "Rustic", "Elegant",
    "Airy", "Stylish", "Peaceful", "Lovely", "Private", "Classic", "Renovated", "Hidden", "Comfy",
    "Luxury", "Simple", "Chic", "Homey", "Vintage", "Serene", "Colorful",
)
LODGING_KIND = {
    "Entire home/apt": ("Loft", "Cottage", "Studio", "Townhouse", "Apartment", "Bungalow",
                        "Duplex", "Cabin", "Penthouse", "Villa", "Flat"),
    "Private room": ("Bedroom", "Guest Room", "Queen Room", "Attic Room", "Suite", "Double Room",
                     "Garden Room", "Single Room"),
    "Shared room": ("Bunk", "Shared Dorm", "Sofa Bed", "Shared Loft", "Hostel Bed", "Futon Nook"),
}
LODGING_TAIL = (
    "near the Park", "by the River", "with Balcony", "with Garden View", "in Old Town",
    "near the Station", "with Fireplace", "on Main Street", "with Rooftop", "by the Harbor",
    "near the Museum", "with Terrace", "in the Arts District", "close to Downtown", "with Patio",
    "near the University", "with Lake View", "by the Market",
)
ATTRACTION_FIRST = (
    "Old Mill", "Lighthouse", "Heritage", "Riverside", "Founders", "Pioneer", "Liberty", "Crystal",
    "Echo", "Summit", "Harborfront", "Juniper", "Aurora", "Granite", "Meadowlark", "Willow",
    "Beacon", "Orchard", "Starlight", "Sandstone", "Emerald", "Cobblestone", "Windmill", "Falcon",
)
ATTRACTION_KIND = (
    "Museum", "Botanical Garden", "Park", "Art Gallery", "Aquarium", "Zoo", "Science Center",
    "Observatory", "History Center", "Sculpture Garden", "Nature Preserve", "Boardwalk",
    "Opera House", "Castle", "Memorial", "Waterfront", "Market Hall", "Cathedral", "Trail",
    "Amphitheater", "Conservatory", "Pier",
)
STREETS = ("Main St", "Oak Ave", "Elm St", "Harbor Rd", "Mill Ln", "Park Blvd", "River Rd",
           "Cedar St", "Market St", "Hill Rd", "Lake Dr", "Station Rd")
