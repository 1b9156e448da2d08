"""Where cloud regions are: coordinates for generated networks (great-circle
latencies) and for the map figure."""
from __future__ import annotations

import math

# (name, latitude, longitude) of cloud regions, for great-circle latencies
CITIES = [("virginia", 38.9, -77.4), ("ohio", 40.0, -83.0), ("oregon", 45.6, -121.2),
          ("california", 37.4, -122.1), ("ireland", 53.3, -6.3), ("london", 51.5, -0.1),
          ("frankfurt", 50.1, 8.7), ("tokyo", 35.7, 139.7), ("seoul", 37.6, 127.0),
          ("singapore", 1.35, 103.8), ("sydney", -33.9, 151.2), ("saopaulo", -23.5, -46.6)]


def great_circle_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    la1, lo1, la2, lo2 = map(math.radians, (*a, *b))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(h))


# The common cloud regions' cities (latitude, longitude; the providers' published
# locations, city centres): for the map figure, which refuses a name it cannot place.
_CLOUD_CITIES = {
    "virginia": (38.9, -77.4), "ohio": (40.0, -83.0), "oregon": (45.6, -121.2), "california": (37.4, -122.1),
    "iowa": (41.3, -95.9), "south-carolina": (33.2, -80.0), "los-angeles": (34.1, -118.2),
    "washington": (47.2, -119.9), "texas": (29.4, -98.5), "montreal": (45.5, -73.6), "ireland": (53.3, -6.3),
    "london": (51.5, -0.1), "frankfurt": (50.1, 8.7), "paris": (48.9, 2.4), "stockholm": (59.3, 18.1),
    "belgium": (50.4, 3.8), "netherlands": (53.4, 6.8), "tokyo": (35.7, 139.7), "seoul": (37.6, 127.0),
    "singapore": (1.35, 103.8), "sydney": (-33.9, 151.2), "saopaulo": (-23.5, -46.6), "mumbai": (19.1, 72.9),
    "pune": (18.5, 73.9), "taiwan": (24.1, 120.5), "hongkong": (22.3, 114.2),
}
CLOUD_REGIONS: dict[str, str] = {
    # AWS
    "us-east-1": "virginia", "us-east-2": "ohio", "us-west-1": "california", "us-west-2": "oregon",
    "ca-central-1": "montreal", "eu-west-1": "ireland", "eu-west-2": "london", "eu-west-3": "paris",
    "eu-central-1": "frankfurt", "eu-north-1": "stockholm", "ap-northeast-1": "tokyo", "ap-northeast-2": "seoul",
    "ap-southeast-1": "singapore", "ap-southeast-2": "sydney", "ap-south-1": "mumbai", "ap-east-1": "hongkong",
    "sa-east-1": "saopaulo",
    # Google Cloud
    "us-central1": "iowa", "us-east1": "south-carolina", "us-east4": "virginia", "us-west1": "oregon",
    "us-west2": "los-angeles", "europe-west1": "belgium", "europe-west2": "london", "europe-west3": "frankfurt",
    "europe-west4": "netherlands", "europe-north1": "stockholm", "asia-east1": "taiwan", "asia-east2": "hongkong",
    "asia-northeast1": "tokyo", "asia-northeast3": "seoul", "asia-southeast1": "singapore", "asia-south1": "mumbai",
    "australia-southeast1": "sydney", "southamerica-east1": "saopaulo",
    # Azure
    "eastus": "virginia", "eastus2": "virginia", "westus": "california", "westus2": "washington",
    "centralus": "iowa", "southcentralus": "texas", "canadacentral": "montreal", "northeurope": "ireland",
    "westeurope": "netherlands", "uksouth": "london", "francecentral": "paris", "germanywestcentral": "frankfurt",
    "swedencentral": "stockholm", "japaneast": "tokyo", "koreacentral": "seoul", "southeastasia": "singapore",
    "eastasia": "hongkong", "centralindia": "pune", "australiaeast": "sydney", "brazilsouth": "saopaulo",
}


def region_position(name: str, coords: dict[str, tuple[float, float]] | None = None) -> tuple[float, float] | None:
    """(latitude, longitude) of a region: the user's coordinates, a cloud region's
    city, or a city name itself; None when the name says nowhere."""
    if coords and name in coords:
        return coords[name]
    key = name.lower()
    city = CLOUD_REGIONS.get(key, key)
    return _CLOUD_CITIES.get(city)
