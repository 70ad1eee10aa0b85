"""Whole offline sessions with RESEARCH_DATABASE_URL set: everything a session stores goes to Postgres (no
SQLite file in the data dir), a finished session keeps one checkpoint, deleting it leaves no row behind, and
a "restart" (new services on the same database) resumes an interrupted session from its last checkpoint."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.engines.base import EngineStep, ReasoningEngine
from research_tool.engines.offline import OfflineEngine
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import ResearchServices, open_research_services
from research_tool.runtime.postgres.pool import Pool
from tests.support.sessions import assert_citations_resolve, run_session

pytestmark = pytest.mark.slow

QUESTION = "How do I run a subprocess with a timeout and capture its output?"
SESSION_TABLES = ("sessions", "events", "event_counters", "page_text_refs")
CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from research_tool.demo_corpus import build_demo_corpus

    folder = tmp_path_factory.mktemp("pg_corpus")
    build_demo_corpus(folder, modules=("subprocess", "shlex", "json"))
    return folder


def research(corpus: Path) -> ResearchRequest:
    return ResearchRequest(
        query=QUESTION, providers=["local"], corpus_dirs=[str(corpus)], fetch=False, clarify=False, tier="simple"
    )


async def rows_of(pool: Pool, session_id: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    async with pool.connection() as conn:
        for table in SESSION_TABLES:
            column = "id" if table == "sessions" else "session_id"
            cur = await conn.execute(f"SELECT COUNT(*) AS n FROM {table} WHERE {column} = %s", (session_id,))
            counts[table] = int((await cur.fetchone() or {"n": 0})["n"])
        for table in CHECKPOINT_TABLES:
            cur = await conn.execute(f"SELECT COUNT(*) AS n FROM {table} WHERE thread_id = %s", (session_id,))
            counts[table] = int((await cur.fetchone() or {"n": 0})["n"])
    return counts


async def test_a_session_on_postgres_completes_keeps_one_checkpoint_and_is_deleted_everywhere(
    pg_settings: Settings, tiny_corpus: Path
) -> None:
    result = await run_session(pg_settings, research(tiny_corpus))
    sid = result.record.id
    assert result.record.status == "completed" and result.report is not None
    assert_citations_resolve(result.report, result.state)
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    assert result.events[-1].type == "session_completed"
    # local_index.db is the local provider's index of corpus folders on this machine, not session storage.
    sqlite_files = {p.name for p in pg_settings.data_dir.glob("*.db")} - {"local_index.db"}
    assert sqlite_files == set(), "nothing of the session went to SQLite"
    assert not (pg_settings.data_dir / "owner.lock").exists(), "no data-dir owner on Postgres"

    async with open_research_services(pg_settings) as services:
        assert await services.runner.report(sid) == result.report  # a new process reads it from Postgres
        rows = await rows_of(services.storage.pool, sid)
        assert rows["checkpoints"] == 1, "keep_latest pruning ran when the session finished"
        assert rows["sessions"] == 1 and rows["events"] == len(result.events) and rows["page_text_refs"] > 0
        texts, _ = await services.content.stats()
        assert texts > 0
        await services.runner.delete(sid)
        assert set((await rows_of(services.storage.pool, sid)).values()) == {0}
        assert await services.content.stats() == (0, 0)


class HeldAtSynthesis(OfflineEngine):
    """Research runs normally up to the synthesis, which waits until the process goes away."""

    def __init__(self, reached: asyncio.Event) -> None:
        super().__init__()
        self.reached = reached

    async def synthesize(self, request):  # type: ignore[no-untyped-def]
        self.reached.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def _phases_started(services: ResearchServices, sid: str) -> list[str]:
    return [str(e.phase) for e in await services.events.replay(sid) if e.type == "phase_started"]


async def test_a_restart_resumes_an_interrupted_session_from_its_postgres_checkpoint(
    pg_settings: Settings, tiny_corpus: Path
) -> None:
    reached = asyncio.Event()

    def held(_: ResearchRequest) -> ReasoningEngine:
        return HeldAtSynthesis(reached)

    async with open_research_services(pg_settings, engine_factory=held) as first:
        record = await first.runner.create(research(tiny_corpus))
        first.runner.launch(record.id)
        await asyncio.wait_for(reached.wait(), 60)
        before = await _phases_started(first, record.id)
    # The services closed with the session in flight (a shutdown): it is interrupted, not lost.

    # On Postgres a worker resumes it (runtime/cluster/): the first process released its lease on the way out,
    # so the next worker's claim loop takes it at once; resume_incomplete() is the embedded (SQLite) way.
    async with open_research_services(pg_settings, worker=True) as second:
        assert (await second.store.get(record.id)).status in ("interrupted", "running")
        assert await second.runner.resume_incomplete() == []
        await asyncio.wait_for(second.runner.until_finished(record.id), 120)
        done = await second.store.get(record.id)
        assert done.status == "completed"
        assert (await second.runner.report(record.id))["citations"]
        events = await second.events.replay(record.id)
        after = await _phases_started(second, record.id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "one gapless log across both processes"
    assert before.count("plan") == after.count("plan") == 1, f"the plan was not redone: {after}"
    assert after[: len(before)] == before


async def test_retention_and_orphan_sweep_on_postgres(pg_settings: Settings, tiny_corpus: Path) -> None:
    """`research-tool gc` on Postgres: an expired session and an orphaned event log are deleted everywhere."""
    async with open_research_services(pg_settings) as services:
        old = await services.runner.create(research(tiny_corpus))
        services.runner.launch(old.id)
        assert (await services.runner.wait(old.id)).status == "completed"
        await services.events.append("gone", "progress", None, "a log whose session row was deleted")
        summary = await services.janitor.collect_garbage(retention_days=1, now=datetime.now(UTC) + timedelta(days=2))
        assert summary.sessions_deleted == 1 and summary.orphans_deleted == 1 and summary.texts_deleted > 0
        assert set((await rows_of(services.storage.pool, old.id)).values()) == {0}
        assert await services.events.session_ids() == set()


def test_cli_lists_and_shows_sessions_stored_in_postgres(pg_settings: Settings, tiny_corpus: Path) -> None:
    result = asyncio.run(run_session(pg_settings, research(tiny_corpus)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env.update(RESEARCH_DATA_DIR=str(pg_settings.data_dir), RESEARCH_DATABASE_URL=str(pg_settings.database_url))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "research_tool", *args], env=env, capture_output=True, text=True, timeout=120
        )

    listed = cli("sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["sessions"]
    assert [(r["session_id"], r["status"]) for r in rows] == [(result.record.id, "completed")]
    shown = cli("show", result.record.id[:8], "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert result.report is not None and json.loads(shown.stdout)["answer"] == result.report["answer"]
    missing = cli("show", "nosuchsession")
    assert missing.returncode == 2 and "unknown session id" in missing.stderr


_ = EngineStep  # the held engine never returns a step
