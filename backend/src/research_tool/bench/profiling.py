"""Profile a benchmark's server subprocess with py-spy (a sampling profiler attached by pid: it does not
slow the server down the way an in-process profiler would). Used when a figure misses its target:
`python -m research_tool.bench --only scale --profile DIR`."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from research_tool.core.logging import get_logger

log = get_logger(__name__)


@contextmanager
def py_spy_record(pid: int, out_path: Path, rate: int = 100) -> Iterator[Path | None]:
    """Record collapsed stacks (per thread, GIL holders marked) of `pid` until exit; yields the output path,
    or None when py-spy is not installed."""
    beside = Path(sys.executable).parent / "py-spy"
    exe = str(beside) if beside.exists() else shutil.which("py-spy")
    if exe is None:
        log.warning("py_spy_missing", hint="pip install py-spy (in the dev extras)")
        yield None
        return
    out_path.parent.mkdir(parents=True, exist_ok=True)
    command = [
        exe,
        "record",
        "--pid",
        str(pid),
        "--format",
        "raw",
        "--threads",
        "--gil",
        "--rate",
        str(rate),
        "--nonblocking",
        "--output",
        str(out_path),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield out_path
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
