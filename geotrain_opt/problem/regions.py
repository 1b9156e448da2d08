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
