"""Item 11: a completed session keeps only its last checkpoint, and its report still renders from it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from research_tool.core.settings import Settings
from research_tool.models.report import Report
from research_tool.models.request import ResearchRequest
from research_tool.reporting.export import export_report
from research_tool.runtime.composition import open_research_services
from tests.support.sessions import run_session

from .conftest import QUESTION

CHECKPOINT_BYTES_TARGET = 300_000


def _per_thread(db: Path, sql: str) -> dict[str, int]:
    with closing(sqlite3.connect(db)) as conn:
        return {str(t): int(n) for t, n in conn.execute(sql)}


async def test_completed_session_keeps_one_checkpoint_and_renders_its_report(
    settings: Settings, small_corpus: Path, tmp_path: Path
) -> None:
    request = ResearchRequest(
        query=QUESTION, providers=["local"], corpus_dirs=[str(small_corpus)], fetch=False, clarify=False
    )
    result = await run_session(settings, request)
    sid = result.record.id
    assert result.record.status == "completed" and result.report is not None
    assert result.state["iteration"] >= 1, "several nodes ran, so several checkpoints were written"

    db = settings.data_dir / "checkpoints.db"
    assert _per_thread(db, "SELECT thread_id, COUNT(*) FROM checkpoints GROUP BY thread_id") == {sid: 1}
    with closing(sqlite3.connect(db)) as conn:
        latest = str(conn.execute("SELECT checkpoint_id FROM checkpoints").fetchone()[0])
        write_ids = {str(r[0]) for r in conn.execute("SELECT DISTINCT checkpoint_id FROM writes")}
        size = int(conn.execute("SELECT SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints").fetchone()[0])
        size += int(conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()[0])
        assert int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == 2  # INCREMENTAL
    assert write_ids <= {latest}
    assert size <= CHECKPOINT_BYTES_TARGET

    # A new process opens the pruned session: the report is served and renders in every format.
    async with open_research_services(settings) as services:
        report = await services.runner.report(sid)
        assert report == result.report
        for fmt in ("md", "json", "html", "bib"):
            path = await export_report(Report.model_validate(report), fmt, tmp_path / "rendered")
            assert path.stat().st_size > 0
