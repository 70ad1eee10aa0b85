"""Benchmark: the sentence splitter on one paragraph without breaks (issue 14), at growing sizes.

`split_sentences` reads every source in extraction, verification and the citation check, and the crawler
accepts pages up to 5 MB. It used to be quadratic (100 KB: 7 s; 400 KB: 96 s). Target: linear, 5 MB in
under 1 s. The text is one sentence pattern with abbreviations, initials and decimals, repeated.
"""

from __future__ import annotations

import asyncio
import time

from research_tool.bench.results import BenchResult
from research_tool.engines.text.sentences import split_sentences

SIZES = (10_000, 100_000, 1_000_000, 5_000_000)
TARGET_5MB_S = 1.0
UNIT = (
    "The round dance gives little information about the direction of the food, e.g. as Dr. K. von Frisch "
    "found in 1946 at 3.5 km from the U.S. hive, and more words follow here. "
)


def _label(size: int) -> str:
    return f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1_000} KB"


def _time_split(size: int) -> tuple[float, int]:
    text = UNIT * (size // len(UNIT) + 1)
    text = text[:size]
    best = float("inf")
    count = 0
    for _ in range(3):
        started = time.perf_counter()
        count = len(split_sentences(text))
        best = min(best, time.perf_counter() - started)
    return best, count


async def run_splitter(sizes: tuple[int, ...] = SIZES) -> BenchResult:
    result = BenchResult(
        name="splitter",
        title="Sentence splitter: one paragraph without breaks, growing size",
        parameters={"sizes": [_label(s) for s in sizes], "runs": "best of 3"},
    )
    seconds: dict[int, float] = {}
    for size in sizes:
        elapsed, count = await asyncio.to_thread(_time_split, size)
        seconds[size] = elapsed
        extra = {"target": TARGET_5MB_S, "comparison": "<="} if size == 5_000_000 else {}
        result.add(f"split {_label(size)}", round(elapsed, 4), "s", note=f"{count} sentences", **extra)
    largest = max(sizes)
    if largest > min(sizes) and seconds[min(sizes)] > 0:
        per_mb = [seconds[s] / (s / 1_000_000) for s in sizes]
        result.add("seconds per MB at the largest size", round(per_mb[-1], 4), "s/MB")
        slope = per_mb[-1] / max(per_mb[1] if len(per_mb) > 1 else per_mb[0], 1e-9)
        result.add(
            "growth of s/MB from the 2nd size to the largest",
            round(slope, 2),
            "x",
            note="about 1 when linear; a quadratic splitter grows with the size ratio",
        )
    result.details["seconds"] = {_label(s): round(t, 5) for s, t in seconds.items()}
    return result
