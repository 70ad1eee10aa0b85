"""What sessions leave on disk, and taking it away again (DESIGN §5 storage).

A session owns: its row and events (`sessions.db`), its checkpoints (`checkpoints.db`), references to
page texts (`content.db`), or the same rows in Postgres, and its exports folder (`<data dir>/exports/<session id>/`).
The janitor

- keeps only the last checkpoint of a finished session (`session_finished`),
- removes everything of a deleted session and gives the space back (`forget`),
- applies the retention policy (`collect_garbage`, `research-tool gc`, and the server every hour when
  RESEARCH_RETENTION_DAYS is set): finished sessions last updated before the cutoff are deleted, then
  whatever no session row refers to any more (checkpoints, events, page texts, export folders), then the
  SQLite files are vacuumed.

Active sessions (queued, running, stopping, awaiting answers) are never touched.
"""

from __future__ import annotations

import asyncio
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from research_tool.core.logging import get_logger
from research_tool.models.sessions import FINISHED_STATUSES
from research_tool.runtime.stores import (
    ContentStoreProtocol,
    EventLogProtocol,
    PrunableCheckpointer,
    SessionStoreProtocol,
)

log = get_logger(__name__)

RETENTION_SWEEP_INTERVAL_S = 3600.0


class GcSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cutoff: str | None  # sessions last updated before this were deleted (None: retention keeps everything)
    sessions_deleted: int = 0
    sessions_pruned: int = 0  # finished sessions brought down to their last checkpoint
    orphans_deleted: int = 0  # checkpoint threads, event logs and export folders of sessions that no longer exist
    texts_deleted: int = 0
    bytes_reclaimed: int = 0


class StorageJanitor:
    def __init__(
        self,
        *,
        store: SessionStoreProtocol,
        events: EventLogProtocol,
        checkpointer: PrunableCheckpointer,
        content: ContentStoreProtocol,
        exports_dir: Path,
    ) -> None:
        self._store = store
        self._events = events
        self._checkpointer = checkpointer
        self._content = content
        self._exports_dir = exports_dir
        self._lock = asyncio.Lock()  # one collection at a time
        self._reclaiming = asyncio.Lock()  # one reclaim after deletes at a time
        self._reclaim_again = False  # a delete came while one ran: it runs once more

    def exports_of(self, session_id: str) -> Path | None:
        """The session's exports folder, or None for an id that would name anything else."""
        root = self._exports_dir.resolve()
        folder = (root / session_id).resolve()
        return folder if folder.parent == root else None

    # --- one session ------------------------------------------------------------------------------

    async def session_finished(self, session_id: str) -> None:
        """Keep only the last checkpoint: it holds the report and is all a finished session is read for."""
        try:
            await self._checkpointer.aprune([session_id], strategy="keep_latest")
            await self._checkpointer.reclaim_space()
        except Exception:
            log.exception("checkpoint_prune_failed", session_id=session_id)

    async def forget(self, session_id: str) -> None:
        """Delete everything a session left except its row: events, checkpoints, page texts only it used,
        exports; then give the freed pages back (maintenance: it never fails the delete, see reclaim_after_delete)."""
        await self._forget_data([session_id])
        await self.reclaim_after_delete()

    async def reclaim_after_delete(self) -> None:
        """Reclaim space, one run at a time; deletes that arrive meanwhile join the next run instead of
        queueing one each. A failure (a file busy elsewhere) is logged and left to the next run or `gc`."""
        if self._reclaiming.locked():
            self._reclaim_again = True
            return
        async with self._reclaiming:
            again = True
            while again:
                self._reclaim_again = False
                try:
                    await self.reclaim()
                except Exception as exc:
                    log.warning("reclaim_deferred", error=f"{type(exc).__name__}: {exc}")
                    return
                again = self._reclaim_again

    async def _forget_data(self, session_ids: list[str]) -> int:
        for sid in session_ids:
            await self._events.delete(sid)
            await self._checkpointer.adelete_thread(sid)
            folder = self.exports_of(sid)
            if folder is not None and folder.exists():
                await asyncio.to_thread(shutil.rmtree, folder, True)
        return await self._content.release(session_ids)

    async def reclaim(self, *, convert: bool = False) -> int:
        reclaimed = await self._store.reclaim_space(convert=convert)
        reclaimed += await self._checkpointer.reclaim_space(convert=convert)
        reclaimed += await self._content.reclaim_space(convert=convert)
        return reclaimed

    # --- retention --------------------------------------------------------------------------------

    async def collect_garbage(
        self, *, retention_days: float | None, now: datetime | None = None, convert: bool = False
    ) -> GcSummary:
        """Apply the retention policy (None: keep every session) and remove what no session refers to.
        `convert`: also VACUUM files made before auto_vacuum=INCREMENTAL (rewrites them once)."""
        async with self._lock:
            now = now or datetime.now(UTC)
            cutoff = (now - timedelta(days=retention_days)).isoformat() if retention_days is not None else None
            summary = GcSummary(cutoff=cutoff)
            expired = await self._store.expired(cutoff) if cutoff else []
            for sid in expired:
                await self._store.delete(sid)
            summary.sessions_deleted = len(expired)
            summary.texts_deleted = await self._forget_data(expired)
            summary.orphans_deleted, texts = await self._delete_orphans()
            summary.texts_deleted += texts + await self._content.sweep_unreferenced()
            finished = await self._store.ids(FINISHED_STATUSES)
            await self._checkpointer.aprune(sorted(finished), strategy="keep_latest")
            summary.sessions_pruned = len(finished)
            summary.bytes_reclaimed = await self.reclaim(convert=convert)
            log.info("storage_collected", **summary.model_dump())
            return summary

    async def _delete_orphans(self) -> tuple[int, int]:
        """Data whose session row is gone (a delete cut short, a crash). Everything is listed before the rows
        are read: a session's row is written before any of its data, so a session created meanwhile is safe."""
        threads = await self._checkpointer.thread_ids()
        logs = await self._events.session_ids()
        folders = {p.name for p in self._exports_dir.iterdir() if p.is_dir()} if self._exports_dir.exists() else set()
        referring = await self._content.sessions_referring()
        known = await self._store.ids()
        orphans = sorted((threads | logs | folders | referring) - known)
        texts = await self._forget_data(orphans) if orphans else 0
        return len(orphans), texts

    async def sweep_forever(self, retention_days: float, interval_s: float = RETENTION_SWEEP_INTERVAL_S) -> None:
        """The server's retention: collect now and then every `interval_s` until cancelled."""
        while True:
            try:
                await self.collect_garbage(retention_days=retention_days)
            except Exception:
                log.exception("retention_sweep_failed")
            await asyncio.sleep(interval_s)


def data_dir_bytes(data_dir: Path) -> int:
    """Bytes under the data dir (every SQLite file with its WAL, exports, indexes)."""
    return sum(p.stat().st_size for p in data_dir.rglob("*") if p.is_file()) if data_dir.exists() else 0
