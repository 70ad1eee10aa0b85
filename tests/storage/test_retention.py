"""Item 12: RESEARCH_RETENTION_DAYS / `research-tool gc` delete old sessions and everything they left,
then give the space back; DELETE removes the exports folder too."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiosqlite
import pytest

from research_tool.cli import main
from research_tool.core.settings import Settings
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import ResearchServices, open_research_services
from research_tool.runtime.storage import reclaim_space

from .conftest import QUESTION


def _request(corpus: Path, n: int) -> ResearchRequest:
    return ResearchRequest(
        query=f"{QUESTION} ({n})",
        providers=["local"],
        corpus_dirs=[str(corpus)],
        fetch=False,
        clarify=False,
        tier="simple",
    )


async def _complete(services: ResearchServices, request: ResearchRequest) -> str:
    record = await services.runner.create(request)
    services.runner.launch(record.id)
    assert (await services.runner.wait(record.id)).status == "completed"
    # the text of a fetched web page (the local documents' text is referenced from the index, not stored)
    await services.content.put_many(record.id, {f"https://example.org/{record.id}": f"A page read by {record.id}."})
    return record.id


def _count(db: Path, sql: str, *params: object) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute(sql, params).fetchone()[0])


def _size(path: Path) -> int:
    return os.path.getsize(path)


def _age(db: Path, session_id: str, days: float) -> None:
    """What the clock would have written `days` ago (the sessions are real; only their age is made up)."""
    stamp = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE sessions SET created_at = ?, updated_at = ? WHERE id = ?", (stamp, stamp, session_id))
        conn.commit()


def _left_behind(data_dir: Path, sid: str) -> dict[str, int]:
    return {
        "events": _count(data_dir / "sessions.db", "SELECT COUNT(*) FROM events WHERE session_id = ?", sid),
        "checkpoints": _count(data_dir / "checkpoints.db", "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", sid),
        "text_refs": _count(data_dir / "content.db", "SELECT COUNT(*) FROM page_text_refs WHERE session_id = ?", sid),
        "exports": int((data_dir / "exports" / sid).exists()),
    }


async def test_gc_deletes_only_sessions_older_than_the_retention_and_reclaims_space(
    settings: Settings, small_corpus: Path
) -> None:
    data = settings.data_dir
    async with open_research_services(settings) as services:
        old = await _complete(services, _request(small_corpus, 1))
        new = await _complete(services, _request(small_corpus, 2))
        queued = (await services.runner.create(_request(small_corpus, 3))).id  # active: never collected
    _age(data / "sessions.db", old, days=40)
    _age(data / "sessions.db", queued, days=400)
    assert all(_left_behind(data, old).values())

    async with open_research_services(settings) as services:
        kept_all = await services.janitor.collect_garbage(retention_days=None)
        assert kept_all.sessions_deleted == 0 and await services.store.exists(old)

        summary = await services.janitor.collect_garbage(retention_days=30)
        assert summary.sessions_deleted == 1
        assert not await services.store.exists(old)
        assert await services.store.exists(new) and await services.store.exists(queued)
        assert (await services.runner.report(new))["citations"], "the kept session still has its report"
    assert _left_behind(data, old) == {"events": 0, "checkpoints": 0, "text_refs": 0, "exports": 0}
    assert all(_left_behind(data, new)[k] for k in ("events", "checkpoints", "exports"))
    for name in ("sessions.db", "checkpoints.db", "content.db"):
        assert _count(data / name, "PRAGMA freelist_count") == 0, f"{name}: free pages given back"


async def test_gc_removes_data_whose_session_row_is_gone(settings: Settings, small_corpus: Path) -> None:
    data = settings.data_dir
    async with open_research_services(settings) as services:
        sid = await _complete(services, _request(small_corpus, 1))
        await services.store.delete(sid)  # a delete cut short after the row went (a crash)
        assert _left_behind(data, sid)["checkpoints"] == 1
        summary = await services.janitor.collect_garbage(retention_days=None)
    assert summary.orphans_deleted == 1 and summary.texts_deleted > 0
    assert _left_behind(data, sid) == {"events": 0, "checkpoints": 0, "text_refs": 0, "exports": 0}
    assert _count(data / "content.db", "SELECT COUNT(*) FROM page_text") == 0


async def test_delete_removes_the_exports_folder_and_unshared_text(settings: Settings, small_corpus: Path) -> None:
    data = settings.data_dir
    async with open_research_services(settings) as services:
        sid = await _complete(services, _request(small_corpus, 1))
        assert any((data / "exports" / sid).iterdir())
        await services.runner.delete(sid)
    assert _left_behind(data, sid) == {"events": 0, "checkpoints": 0, "text_refs": 0, "exports": 0}
    assert _count(data / "content.db", "SELECT COUNT(*) FROM page_text") == 0


def test_cli_gc_applies_research_retention_days(
    settings: Settings, small_corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    async def two_sessions() -> tuple[str, str]:
        async with open_research_services(settings) as services:
            return await _complete(services, _request(small_corpus, 1)), await _complete(
                services, _request(small_corpus, 2)
            )

    old, new = asyncio.run(two_sessions())
    _age(settings.data_dir / "sessions.db", old, days=10)
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("RESEARCH_RETENTION_DAYS", "7")
    assert main(["gc", "--json"]) == 0
    assert '"sessions_deleted": 1' in capsys.readouterr().out
    ids = {r[0] for r in sqlite3.connect(settings.data_dir / "sessions.db").execute("SELECT id FROM sessions")}
    assert ids == {new}
    with pytest.raises(SystemExit) as bad:
        main(["gc", "--older-than-days", "0"])
    assert bad.value.code == 2  # bad input: one line, exit 2
    assert "older-than-days" in capsys.readouterr().err


async def test_a_file_made_before_incremental_vacuum_is_converted_once(tmp_path: Path) -> None:
    path = tmp_path / "legacy.db"
    with closing(sqlite3.connect(path)) as legacy:  # auto_vacuum=NONE, as files made by older versions
        legacy.execute("CREATE TABLE t (x TEXT)")
        legacy.executemany("INSERT INTO t VALUES (?)", [("y" * 4000,) for _ in range(500)])
        legacy.execute("DELETE FROM t")
        legacy.commit()
    size = _size(path)
    conn = await aiosqlite.connect(path)
    try:
        assert await reclaim_space(conn) == 0, "no rewrite unless asked (gc)"
        assert await reclaim_space(conn, convert=True) > 0
        async with conn.execute("PRAGMA auto_vacuum") as cur:
            assert (await cur.fetchone()) == (2,)
    finally:
        await conn.close()
    assert _size(path) < size / 10
