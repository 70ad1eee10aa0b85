"""Issue 22 item 4: a hostile local folder cannot hang, exhaust or monopolise the corpus index.

- `research-tool index` (a real process) on a folder holding a FIFO and a file over RESEARCH_CORPUS_MAX_FILE_MB
  ends at once, skipping both, and indexes the rest.
- A search over a document dense with the query's terms answers at once: FTS5's `snippet()` took time
  quadratic in the hits (a minute for 40,000 words, 440 s for 650 KB) and nothing could interrupt it.
- Index work whose caller is cancelled stops its SQLite statement in progress, and one folder's calls do not
  hold every thread of the index pool: another folder's call still runs.
- `research-tool run --max-time 3` on a folder with such a document exits soon after its deadline (it ran until
  the search ended, a minute later).
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from research_tool.providers.local_corpus.index import SNIPPET_TOKENS, CorpusIndex
from research_tool.providers.local_corpus.index_pool import FOLDER_SHARE, POOL_THREADS, Cancel, run_in_index_pool
from tests.support.timing import LOAD_SLACK_S, cpu_seconds

WORDS = "river delta sediment flooding estuary mangrove salinity tidal channel erosion deposition wetland".split()
DENSE_QUERY = " ".join(WORDS)
QUESTION = "What does river delta sediment flooding do to estuary mangrove salinity, tidal channel erosion?"


def dense_folder(folder: Path, words: int) -> Path:
    """One document made only of the query's words: every token is a hit, so `snippet()` is slow
    (about 1.5 s for 10,000 words and 8 s for 20,000 on the machine this was written on)."""
    folder.mkdir(parents=True)
    rng = random.Random(7)
    (folder / "dense.txt").write_text("Dense\n" + " ".join(rng.choice(WORDS) for _ in range(words)), encoding="utf-8")
    return folder


def small_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "kettle.md").write_text(
        "# Kettles\n\nA bimetallic strip switches an electric kettle off when the steam reaches it.", encoding="utf-8"
    )
    return folder


def cli(data_dir: Path, *args: str, timeout: float, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESEARCH_", "OPENAI", "ANTHROPIC", "OLLAMA"))}
    env.update(RESEARCH_DATA_DIR=str(data_dir), **extra)
    return subprocess.run(
        [sys.executable, "-m", "research_tool", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_index_skips_a_fifo_and_a_file_over_the_size_limit(tmp_path: Path) -> None:
    folder = small_folder(tmp_path / "corpus")
    os.mkfifo(folder / "pipe.txt")  # nobody ever writes to it: opening it for reading blocks forever
    (folder / "huge.txt").write_text("huge " * 10_000, encoding="utf-8")  # 50 KB, over the 20 KB limit below
    # a blocked open of the FIFO never returns: the subprocess timeout is the check (a busy machine's start-up
    # may take many seconds, so no wall-clock figure is compared; issue 43)
    done = cli(tmp_path / "data", "index", str(folder), timeout=120, RESEARCH_CORPUS_MAX_FILE_MB="0.02")
    assert done.returncode == 0, done.stderr
    assert ": 1 document (1 new, 0 changed, 0 removed; 2 files skipped)" in done.stderr, done.stderr
    assert "local_file_skipped" in done.stderr

    found = cli(tmp_path / "data", "search", "--provider", "local", "bimetallic strip", "--json", timeout=30)
    assert found.returncode == 0, found.stderr
    assert "kettle.md" in found.stdout and "huge.txt" not in found.stdout


async def test_a_search_over_a_document_dense_with_the_query_terms_answers_at_once(tmp_path: Path) -> None:
    index = CorpusIndex(tmp_path / "index.db", max_file_bytes=10**7)
    folder = dense_folder(tmp_path / "dense", 40_000)
    await index.index_folder(folder)
    started = cpu_seconds()  # the slow snippet() was CPU: measured as CPU, which load does not stretch
    async with asyncio.timeout(60):
        (hit,) = await index.search(DENSE_QUERY, roots=[folder])
    assert cpu_seconds() - started < 5
    assert len(hit.snippet.split()) <= SNIPPET_TOKENS + 2 and set(hit.snippet.split()) - {"…"} <= set(WORDS)


def slow_sql(finished: threading.Event) -> Callable[[Cancel], int]:
    """Work that runs one long SQLite statement (minutes) on a connection the cancel watches."""

    def work(cancel: Cancel) -> int:
        try:
            with closing(sqlite3.connect(":memory:")) as conn:
                cancel.watch(conn)
                query = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n"
                return int(conn.execute(query).fetchone()[0])
        finally:
            finished.set()

    return work


async def test_a_cancelled_call_stops_its_statement_in_progress() -> None:
    finished = threading.Event()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await run_in_index_pool("/folder/a", slow_sql(finished))
    assert finished.is_set(), "the statement was still running when the caller got its cancellation back"


async def test_one_folders_calls_leave_threads_for_another_folder() -> None:
    finished = [threading.Event() for _ in range(POOL_THREADS * 2)]
    slow = [asyncio.create_task(run_in_index_pool("/folder/a", slow_sql(done))) for done in finished]
    try:
        await asyncio.sleep(0.1)  # let folder a's calls take whatever threads they can
        async with asyncio.timeout(3.0 + LOAD_SLACK_S):  # folder a's calls never end by themselves
            assert await run_in_index_pool("/folder/b", lambda cancel: 42) == 42
        assert not any(t.done() for t in slow), "folder a's calls were still running"
    finally:
        for task in slow:
            task.cancel()
        await asyncio.gather(*slow, return_exceptions=True)
    assert all(done.is_set() for done in finished[:FOLDER_SHARE])


@pytest.mark.slow
def test_a_run_stops_its_search_at_the_deadline(tmp_path: Path) -> None:
    folder = dense_folder(tmp_path / "dense", 40_000)  # about a minute for one uninterrupted search
    started = time.monotonic()
    done = cli(
        tmp_path / "data",
        "run",
        QUESTION,
        "--corpus",
        str(folder),
        "--providers",
        "local",
        "--no-fetch",
        "--no-clarify",
        "--tier",
        "simple",
        "--max-time",
        "3",
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert done.returncode in (0, 1), done.stderr
    # an uninterrupted search takes a minute on a quiet machine; a busy one adds start-up time, not a minute
    assert elapsed < 20 + 2 * LOAD_SLACK_S, f"the run took {elapsed:.1f} s after a 3 s deadline"
