"""When this process started, on the `time.monotonic()` clock: `run --max-time S` counts its S seconds from
there (issue 35), as a user timing the command does, not from the session's first step.

On Linux the start is read from /proc (the process's start time, in clock ticks since boot, against the
boot-time clock now); elsewhere it is when this module was first imported, which the CLI does first thing."""

from __future__ import annotations

import os
import time
from pathlib import Path

_IMPORTED = time.monotonic()


def _age_from_proc() -> float | None:
    """Seconds since this process started, from /proc/self/stat (field 22, `starttime`), or None."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started_s = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started_s)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def process_started() -> float:
    """The `time.monotonic()` instant this process started (never later than this module's import)."""
    age = _age_from_proc()
    now = time.monotonic()
    if age is None:
        return _IMPORTED
    return min(now - age, _IMPORTED)
