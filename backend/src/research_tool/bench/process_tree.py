"""CPU time and resident memory of a process and its descendants (the server and its CPU workers), from
/proc, so a benchmark can charge a session the CPU of every process that worked on it."""

from __future__ import annotations

import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def children(pid: int) -> list[int]:
    """Direct children of `pid` (every thread's list)."""
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                found.extend(int(c) for c in (task / "children").read_text().split())
            except (OSError, ValueError):
                continue
    except OSError:
        return []
    return found


def tree(pid: int) -> list[int]:
    """`pid` and all its live descendants."""
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        queue.extend(children(current))
    return pids


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of one process (0.0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14 and 15 of stat)


def tree_cpu_seconds(pid: int) -> dict[int, float]:
    """CPU seconds per live process of the tree (keyed by pid, so a worker that appears later is counted
    from zero)."""
    return {p: cpu_seconds(p) for p in tree(pid)}


def status_kb(pid: int, field_name: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def tree_rss_kb(pid: int) -> int:
    """Resident memory of the whole tree now."""
    return sum(status_kb(p, "VmRSS") for p in tree(pid))


def tree_peak_rss_kb(pid: int) -> int:
    """Sum of each live process's own resident peak (VmHWM): an upper bound of the tree's peak."""
    return sum(status_kb(p, "VmHWM") for p in tree(pid))


def machine_cpu_seconds() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot, summed over cores (/proc/stat's first line;
    iowait counts as idle). Two readings give how many cores were busy in between, whoever used them."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    busy = user + nice + system + irq + softirq + steal
    return busy / CLOCK_TICKS, (idle + iowait) / CLOCK_TICKS
