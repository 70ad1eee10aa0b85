"""Page text outside the graph state: one SQLite table (`content.db` in the data dir) keyed by canonical
URL and content hash, shared by every session of the data dir.

The graph state keeps only `content_key` (the text's SHA-256) and `content_length` for each source; the
nodes that read text fetch it from here just before they need it (graph/nodes/page_text.py). The same
page fetched twice, by one session or by two, is stored once. `page_text_refs` says which sessions use
which text, so deleting sessions can delete the text nobody refers to any more.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import aiosqlite

from research_tool.models.entities import utc_now_iso
from research_tool.runtime.storage import open_sqlite, reclaim_space

SCHEMA = """
CREATE TABLE IF NOT EXISTS page_text (
    url TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    length INTEGER NOT NULL,
    text TEXT NOT NULL,
    stored_at TEXT NOT NULL,
    UNIQUE (url, sha256)
);
CREATE TABLE IF NOT EXISTS page_text_refs (
    session_id TEXT NOT NULL,
    url TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (session_id, url, sha256)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS page_text_refs_by_text ON page_text_refs(url, sha256);
"""

# SQLite's default limit on host parameters per statement is 32766; stay far below it.
CHUNK = 400


def content_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """The text with anything UTF-8 cannot encode (lone surrogates) replaced, as SQLite will store it."""
    return _SURROGATE.sub("\ufffd", text)


def _chunks(items: list[tuple[str, str]]) -> Iterable[list[tuple[str, str]]]:
    for i in range(0, len(items), CHUNK):
        yield items[i : i + CHUNK]


class ContentStore:
    """The graph's PageTextStore (graph/context.py) over a real SQLite connection of its own."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        # Every operation is one unit on the shared connection: concurrent sessions must not interleave their
        # statements and commits (an eval run with 4 sessions once hit SQLITE_MISUSE in put_many; not reproduced).
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path) -> ContentStore:
        conn = await open_sqlite(path)
        await conn.executescript(SCHEMA)
        await conn.commit()
        return cls(conn)

    @property
    def conn(self) -> aiosqlite.Connection:
        return self._conn

    async def aclose(self) -> None:
        await self._conn.close()

    async def reclaim_space(self, *, convert: bool = False) -> int:
        async with self._lock:
            return await reclaim_space(self._conn, convert=convert)

    async def put_many(self, session_id: str, texts: Mapping[str, str]) -> dict[str, str]:
        """Store each URL's text (once per URL and hash) and note that the session uses it; {url: key}."""
        async with self._lock:
            if not texts:
                return {}
            # SQLite takes only valid UTF-8: a lone surrogate (seen in text extracted from PDFs) becomes U+FFFD.
            texts = {url: storable(text) for url, text in texts.items()}
            keys = {url: content_key(text) for url, text in texts.items()}
            now = utc_now_iso()
            await self._conn.executemany(
                "INSERT OR IGNORE INTO page_text (url, sha256, length, text, stored_at) VALUES (?, ?, ?, ?, ?)",
                [(url, keys[url], len(text), text, now) for url, text in texts.items()],
            )
            await self._conn.executemany(
                "INSERT OR IGNORE INTO page_text_refs (session_id, url, sha256) VALUES (?, ?, ?)",
                [(session_id, url, key) for url, key in keys.items()],
            )
            await self._conn.commit()
            return keys

    async def get_many(self, refs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The stored text of each (url, key) there is one for; missing ones are left out."""
        async with self._lock:
            wanted = list(dict.fromkeys(refs))
            found: dict[tuple[str, str], str] = {}
            for chunk in _chunks(wanted):
                where = " OR ".join("(url = ? AND sha256 = ?)" for _ in chunk)
                params = [value for ref in chunk for value in ref]
                async with self._conn.execute(f"SELECT url, sha256, text FROM page_text WHERE {where}", params) as cur:
                    for url, key, text in await cur.fetchall():
                        found[(str(url), str(key))] = str(text)
            return found

    async def release(self, session_ids: Iterable[str]) -> int:
        """Forget the sessions' references and delete the texts they used that no other session refers to;
        returns the texts deleted."""
        async with self._lock:
            deleted = 0
            ids = list(session_ids)
            for i in range(0, len(ids), CHUNK):
                chunk = ids[i : i + CHUNK]
                marks = ",".join("?" for _ in chunk)
                async with self._conn.execute(
                    f"SELECT DISTINCT url, sha256 FROM page_text_refs WHERE session_id IN ({marks})", chunk
                ) as cur:
                    used = [(str(u), str(k)) for u, k in await cur.fetchall()]
                await self._conn.execute(f"DELETE FROM page_text_refs WHERE session_id IN ({marks})", chunk)
                for ref in used:
                    cursor = await self._conn.execute(
                        "DELETE FROM page_text WHERE url = ? AND sha256 = ? AND NOT EXISTS "
                        "(SELECT 1 FROM page_text_refs r WHERE r.url = ? AND r.sha256 = ?)",
                        (*ref, *ref),
                    )
                    deleted += max(0, cursor.rowcount)
                    await cursor.close()
            await self._conn.commit()
            return deleted

    async def sweep_unreferenced(self) -> int:
        """Delete every text no session refers to (a full scan: gc, not every delete)."""
        async with self._lock:
            cursor = await self._conn.execute(
                "DELETE FROM page_text WHERE NOT EXISTS (SELECT 1 FROM page_text_refs r "
                "WHERE r.url = page_text.url AND r.sha256 = page_text.sha256)"
            )
            deleted = max(0, cursor.rowcount)
            await cursor.close()
            await self._conn.commit()
            return deleted

    async def sessions_referring(self) -> set[str]:
        async with self._lock, self._conn.execute("SELECT DISTINCT session_id FROM page_text_refs") as cur:
            return {str(row[0]) for row in await cur.fetchall()}

    async def stats(self) -> tuple[int, int]:
        """(texts stored, characters stored)."""
        async with self._lock:
            async with self._conn.execute("SELECT COUNT(*), COALESCE(SUM(length), 0) FROM page_text") as cur:
                row = await cur.fetchone()
            return (int(row[0]), int(row[1])) if row else (0, 0)
