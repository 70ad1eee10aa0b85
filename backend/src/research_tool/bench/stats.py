"""Order statistics for latency samples (nearest-rank percentiles, as the API's targets are stated)."""

from __future__ import annotations

import math


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile: the smallest sample with at least `fraction` of the samples at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 2)
