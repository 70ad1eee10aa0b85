"""run_cpu: the same results in a worker process as in a worker thread, and the work really leaves the process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from research_tool.engines.cpu_pool import WORKER_NICENESS, cpu_pool, installed_pool, run_cpu
from research_tool.engines.offline import THREAD_THRESHOLD_CHARS, OfflineEngine, extract_source
from research_tool.graph.decisions.verification import cross_verify
from research_tool.models.entities import Fact
from tests.engine.corpus_texts import CORLISS_ARCHER_RADIO, KISS_AND_TELL, SHIRLEY_TEMPLE, source
from tests.support.polling import eventually

QUESTION = "Which government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
SOURCES = [
    source("file:///h.jsonl#1", "Kiss and Tell (1945 film)", KISS_AND_TELL),
    source("file:///h.jsonl#2", "Shirley Temple", SHIRLEY_TEMPLE),
    source("file:///h.jsonl#3", "Meet Corliss Archer", CORLISS_ARCHER_RADIO),
]
LONG = source("file:///long", "Shirley Temple", " ".join([SHIRLEY_TEMPLE, KISS_AND_TELL, CORLISS_ARCHER_RADIO] * 4))


async def _extract_and_verify() -> tuple[list[Fact], list[Fact], list[Fact]]:
    facts = [f for s in SOURCES for f in (await run_cpu(extract_source, QUESTION, s, 1, 8)).facts]
    verified = await run_cpu(cross_verify, facts, {s.url: s for s in SOURCES}, 0.5)
    long_facts = (await OfflineEngine().extract(QUESTION, LONG, 2)).value.facts
    return facts, verified, long_facts


async def test_run_cpu_in_a_process_pool_returns_what_a_thread_returns() -> None:
    assert len(LONG.text()) > THREAD_THRESHOLD_CHARS  # the engine sends it to run_cpu
    assert installed_pool() is None
    assert await run_cpu(os.getpid) == os.getpid()  # no pool: a thread of this process
    in_thread = await _extract_and_verify()
    assert in_thread[0] and in_thread[1] and in_thread[2]

    async with cpu_pool(1) as pool:
        assert pool is not None and installed_pool() is pool
        assert await run_cpu(os.getpid) != os.getpid()
        in_process = await _extract_and_verify()
    assert in_process == in_thread
    assert installed_pool() is None


def _niceness() -> int:
    return os.nice(0)


@pytest.mark.skipif(not hasattr(os, "nice"), reason="POSIX scheduling priority")
async def test_workers_run_at_a_lower_priority_than_the_server() -> None:
    """The event loop answering requests is scheduled before the workers' batches."""
    server = os.nice(0)
    async with cpu_pool(1):
        worker = await run_cpu(_niceness)
    assert worker == min(19, server + WORKER_NICENESS)
    assert os.nice(0) == server  # the server's own priority is untouched
    async with cpu_pool(1, niceness=0):
        assert await run_cpu(_niceness) == server


async def test_zero_workers_installs_no_pool() -> None:
    async with cpu_pool(0) as pool:
        assert pool is None and installed_pool() is None
        assert await run_cpu(os.getpid) == os.getpid()


async def test_a_broken_pool_falls_back_to_threads() -> None:
    async with cpu_pool(1):
        worker = await run_cpu(os.getpid)
        os.kill(worker, signal.SIGKILL)
        assert await run_cpu(os.getpid) == os.getpid()
        assert installed_pool() is None
        assert (await run_cpu(extract_source, QUESTION, SOURCES[0], 1, 8)).facts


KILLED_SERVER = """
import asyncio, os, signal
from research_tool.engines.cpu_pool import cpu_pool, run_cpu

async def main():
    async with cpu_pool(2):
        pids = set(await asyncio.gather(*(run_cpu(os.getpid) for _ in range(4))))
        print("WORKERS", *pids, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux only: worker liveness is read from /proc")
async def test_workers_exit_when_the_server_process_is_killed() -> None:
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", KILLED_SERVER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("WORKERS "))
    workers = [int(p) for p in line.split()[1:]]
    assert workers and os.getpid() not in workers

    async def all_exited() -> bool:
        return not any(_alive(p) for p in workers)

    await eventually(all_exited, within_s=10, every_s=0.05)
