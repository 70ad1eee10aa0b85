"""Page text in Postgres (`page_text`, `page_text_refs`): the graph's PageTextStore, shared by every process.

Same behaviour as the SQLite ContentStore (runtime/content_store.py). Postgres text cannot hold NUL, so a
NUL becomes U+FFFD as a lone surrogate does (the key is the hash of the text as stored).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from research_tool.models.entities import utc_now_iso
from research_tool.runtime.content_store import content_key, storable
from research_tool.runtime.postgres.pool import Pool

# Rows sent per statement (arrays of this many elements).
BATCH = 1000


def pg_storable(text: str) -> str:
    return storable(text).replace("\x00", "\ufffd")


class PostgresContentStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def aclose(self) -> None:
        """The pool belongs to whoever opened it."""

    async def put_many(self, session_id: str, texts: Mapping[str, str]) -> dict[str, str]:
        """Store each URL's text (once per URL and hash) and note that the session uses it; {url: key}."""
        if not texts:
            return {}
        texts = {url: pg_storable(text) for url, text in texts.items()}
        keys = {url: content_key(text) for url, text in texts.items()}
        urls = list(texts)
        now = utc_now_iso()
        async with self._pool.connection() as conn, conn.transaction():
            for i in range(0, len(urls), BATCH):
                chunk = urls[i : i + BATCH]
                await conn.execute(
                    "INSERT INTO page_text (url, sha256, length, text, stored_at)"
                    " SELECT u, k, char_length(t), t, %s FROM unnest(%s::text[], %s::text[], %s::text[]) AS x(u, k, t)"
                    " ON CONFLICT DO NOTHING",
                    (now, chunk, [keys[u] for u in chunk], [texts[u] for u in chunk]),
                )
                await conn.execute(
                    "INSERT INTO page_text_refs (session_id, url, sha256)"
                    " SELECT %s, u, k FROM unnest(%s::text[], %s::text[]) AS x(u, k) ON CONFLICT DO NOTHING",
                    (session_id, chunk, [keys[u] for u in chunk]),
                )
        return keys

    async def get_many(self, refs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The stored text of each (url, key) there is one for; missing ones are left out."""
        wanted = list(dict.fromkeys(refs))
        found: dict[tuple[str, str], str] = {}
        async with self._pool.connection() as conn:
            for i in range(0, len(wanted), BATCH):
                chunk = wanted[i : i + BATCH]
                cur = await conn.execute(
                    "SELECT p.url, p.sha256, p.text FROM unnest(%s::text[], %s::text[]) AS x(u, k)"
                    " JOIN page_text p ON p.url = x.u AND p.sha256 = x.k",
                    ([u for u, _ in chunk], [k for _, k in chunk]),
                )
                for row in await cur.fetchall():
                    found[(str(row["url"]), str(row["sha256"]))] = str(row["text"])
        return found

    async def release(self, session_ids: Iterable[str]) -> int:
        """Forget the sessions' references and delete the texts they used that no other session refers to;
        returns the texts deleted."""
        ids = list(session_ids)
        if not ids:
            return 0
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "WITH gone AS (DELETE FROM page_text_refs WHERE session_id = ANY(%s) RETURNING url, sha256)"
                " DELETE FROM page_text p USING (SELECT DISTINCT url, sha256 FROM gone) g"
                " WHERE p.url = g.url AND p.sha256 = g.sha256"
                " AND NOT EXISTS (SELECT 1 FROM page_text_refs r WHERE r.url = g.url AND r.sha256 = g.sha256"
                " AND r.session_id <> ALL(%s))",
                (ids, ids),
            )
            return max(0, cur.rowcount)

    async def sweep_unreferenced(self) -> int:
        """Delete every text no session refers to (a full scan: gc, not every delete)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "DELETE FROM page_text p WHERE NOT EXISTS"
                " (SELECT 1 FROM page_text_refs r WHERE r.url = p.url AND r.sha256 = p.sha256)"
            )
            return max(0, cur.rowcount)

    async def sessions_referring(self) -> set[str]:
        async with self._pool.connection() as conn:
            cur = await conn.execute("SELECT DISTINCT session_id FROM page_text_refs")
            return {str(row["session_id"]) for row in await cur.fetchall()}

    async def stats(self) -> tuple[int, int]:
        """(texts stored, characters stored)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute("SELECT COUNT(*) AS n, COALESCE(SUM(length), 0) AS chars FROM page_text")
            row = await cur.fetchone()
        return (int(row["n"]), int(row["chars"])) if row else (0, 0)

    async def reclaim_space(self, *, convert: bool = False) -> int:
        """Autovacuum makes deleted rows' space reusable; nothing to do here."""
        return 0
