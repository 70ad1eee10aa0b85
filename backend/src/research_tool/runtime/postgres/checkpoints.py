"""The checkpoint saver in Postgres: langgraph-checkpoint-postgres's AsyncPostgresSaver on the process's pool.

The library implements `aprune(strategy="keep_latest")` itself (each thread keeps its newest checkpoint per
namespace with its writes and the blobs that checkpoint references); this adds what the janitor asks of a
saver besides (runtime/stores.PrunableCheckpointer).
"""

from __future__ import annotations

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from research_tool.runtime.postgres.pool import Pool


class PrunablePostgresSaver(AsyncPostgresSaver):
    def __init__(self, pool: Pool) -> None:
        super().__init__(pool)

    async def thread_ids(self) -> set[str]:
        async with self._cursor() as cur:
            await cur.execute("SELECT DISTINCT thread_id FROM checkpoints")
            return {str(row["thread_id"]) for row in await cur.fetchall()}

    async def reclaim_space(self, *, convert: bool = False) -> int:
        """Autovacuum makes deleted rows' space reusable (a VACUUM FULL would lock the tables); nothing to do."""
        return 0
