"""Sessions survive a server crash: a real uvicorn subprocess is killed with SIGKILL while three
sessions are mid-collect against a slow replay provider; a new server process resumes them all from
their checkpoints. Each session's events stay seq 1..N with no gap and no duplicate across the
restart, and no report cites the same source twice."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from research_tool.bench.wiki_replay import Page, running_wiki
from research_tool.core.settings import PROVIDER_NAMES
from tests.conftest import FOREIGN_ENV
from tests.support.servers import until_healthy

from .conftest import CLOSED_PORT_URL, OK_BODY, free_socket, sse_events

QUESTIONS = (
    "How do I run a subprocess with a timeout and capture its output?",
    "How do I read and write JSON files with the json module?",
    "How do I copy a directory tree and remove files with shutil?",
)


def server_env(data_dir: Path, wiki_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV and not k.startswith("RESEARCH_")}
    env.update({f"RESEARCH_{n.upper()}_BASE_URL": CLOSED_PORT_URL for n in PROVIDER_NAMES if n != "local"})
    env.update(
        RESEARCH_DATA_DIR=str(data_dir),
        RESEARCH_WIKIPEDIA_BASE_URL=wiki_url,
        RESEARCH_WIKIPEDIA_RPS="500",
        RESEARCH_LLM="offline",
        RESEARCH_LOG_LEVEL="WARNING",
        RESEARCH_MAX_CONCURRENT_SESSIONS="3",
    )
    return env


@contextmanager
def uvicorn_process(env: dict[str, str], cwd: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "research_tool.api.app:create_app",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()


@asynccontextmanager
async def client_when_healthy(process: subprocess.Popen[bytes], port: int) -> AsyncIterator[httpx.AsyncClient]:
    def exited() -> str | None:
        if process.poll() is None:
            return None
        return (process.stderr.read() if process.stderr else b"").decode()[-3000:]

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as client:
        await until_healthy(client, "", exited)
        yield client


def in_second_collect(data_dir: Path, session_id: str) -> bool:
    """Read the server's event log (SQLite allows a reader beside the writer): is the session's latest
    event from collect, in its second cycle or later?"""
    with closing(sqlite3.connect(f"file:{data_dir / 'sessions.db'}?mode=ro", uri=True, timeout=5)) as db:
        rows = db.execute("SELECT type, phase FROM events WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
    cycles = sum(1 for t, p in rows if t == "phase_started" and p == "collect")
    return cycles >= 2 and bool(rows) and rows[-1][1] == "collect" and rows[-1][0] != "phase_completed"


async def statuses(client: httpx.AsyncClient, ids: list[str]) -> list[dict[str, Any]]:
    return [(await client.get(f"/api/research/{sid}/status")).json() for sid in ids]


@pytest.mark.slow
async def test_sigkilled_server_resumes_every_session_on_restart(tmp_path: Path, wiki_pages: list[Page]) -> None:
    with running_wiki(delay_s=0.8, pages=wiki_pages) as (wiki_url, replay):
        env = server_env(tmp_path / "data", wiki_url)
        port = free_socket().getsockname()[1]
        with uvicorn_process(env, tmp_path, port) as first:
            async with client_when_healthy(first, port) as client:
                ids = []
                for question in QUESTIONS:
                    started = await client.post(
                        "/api/research/start", json={**OK_BODY, "query": question, "tier": "standard"}
                    )
                    assert started.status_code == 202, started.text
                    ids.append(started.json()["session_id"])
                # mid-collect: every session has found sources in its first cycle and is searching for more
                while not all(in_second_collect(tmp_path / "data", sid) for sid in ids):
                    now = await statuses(client, ids)
                    assert not any(s["status"] in ("completed", "failed") for s in now), now
                    await asyncio.sleep(0.05)
                searches_before_kill = len(replay.requests)
            first.send_signal(signal.SIGKILL)
            assert first.wait(timeout=10) == -signal.SIGKILL

        port = free_socket().getsockname()[1]
        with uvicorn_process(env, tmp_path, port) as second:
            async with client_when_healthy(second, port) as client:
                deadline = time.monotonic() + 60
                while not all(s["status"] == "completed" for s in await statuses(client, ids)):
                    assert not any(s["status"] == "failed" for s in await statuses(client, ids))
                    assert time.monotonic() < deadline, await statuses(client, ids)
                    await asyncio.sleep(0.1)
                assert len(replay.requests) > searches_before_kill, "the resumed sessions searched again"

                for sid in ids:
                    events = sse_events((await client.get(f"/api/research/{sid}/events", params={"after": 0})).text)
                    seqs = [e["seq"] for e in events]
                    assert seqs == list(range(1, len(seqs) + 1)), f"gap or duplicate in {seqs}"
                    starts = [e for e in events if e["type"] == "session_started"]
                    assert [s["data"]["resumed"] for s in starts] == [False, True]
                    assert events[-1]["type"] == "session_completed"

                    report = (await client.get(f"/api/research/{sid}/report")).json()
                    urls = [c["url"] for c in report["citations"]]
                    assert urls and len(urls) == len(set(urls)), f"duplicated source in {sid}: {urls}"
                    assert len({c["id"] for c in report["citations"]}) == len(urls)
                    assert report["metadata"]["sources_retrieved"] >= len(urls)
