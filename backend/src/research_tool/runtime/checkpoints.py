"""The checkpoint saver: LangGraph's AsyncSqliteSaver over `checkpoints.db`, plus pruning.

AsyncSqliteSaver (langgraph-checkpoint-sqlite 3.x) stores each checkpoint whole (`checkpoints` row: the
msgpack blob of every channel's value) and the writes of each task towards the next one (`writes` rows,
keyed by the checkpoint they follow). It leaves `aprune` unimplemented. A finished session needs only its
last checkpoint (it holds `final_report`; `aget_state` reads it and its own pending writes, never a
parent), so `aprune(strategy="keep_latest")` keeps that one and its writes and deletes the rest.

Checkpoints and writes are stored zlib-compressed (`CompressingSerializer`, issue 24): a session's state is
mostly repeated JSON-like text (facts, sources, entities, provider calls) and shrinks about fourfold. A blob
written before compression (type without the `zlib+` prefix) is still read as it was.

The research graph has no DeltaChannel (whose value is rebuilt from the parent chain and would be lost by
dropping ancestors); `assert_prunable` checks that whenever the graph is compiled with this saver.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from research_tool.runtime.storage import open_sqlite, reclaim_space

COMPRESSED_PREFIX = "zlib+"
COMPRESS_FROM_BYTES = 512  # smaller values (most pending writes) are left as they are
COMPRESSION_LEVEL = 6


class CompressingSerializer(JsonPlusSerializer):
    """LangGraph's serializer, with values of COMPRESS_FROM_BYTES or more zlib-compressed; the stored type says
    so (`zlib+msgpack`), so uncompressed blobs of older checkpoints load unchanged."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        kind, data = super().dumps_typed(obj)
        if len(data) < COMPRESS_FROM_BYTES:
            return kind, data
        return COMPRESSED_PREFIX + kind, zlib.compress(data, COMPRESSION_LEVEL)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, blob = data
        if kind.startswith(COMPRESSED_PREFIX):
            return super().loads_typed((kind.removeprefix(COMPRESSED_PREFIX), zlib.decompress(blob)))
        return super().loads_typed(data)


class PrunableSqliteSaver(AsyncSqliteSaver):
    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: each thread keeps its newest checkpoint per namespace (and that checkpoint's
        writes); `delete`: the threads lose every checkpoint."""
        if strategy == "delete":
            for thread_id in thread_ids:
                await self.adelete_thread(thread_id)
            return
        if strategy != "keep_latest":
            raise ValueError(f"unknown prune strategy: {strategy}")
        await self.setup()
        async with self.lock:
            for thread_id in thread_ids:
                for table in ("writes", "checkpoints"):
                    await self.conn.execute(
                        f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id < ("
                        "SELECT MAX(c.checkpoint_id) FROM checkpoints c "
                        f"WHERE c.thread_id = {table}.thread_id AND c.checkpoint_ns = {table}.checkpoint_ns)",
                        (str(thread_id),),
                    )
            await self.conn.commit()

    async def thread_ids(self) -> set[str]:
        await self.setup()
        async with self.lock, self.conn.execute("SELECT DISTINCT thread_id FROM checkpoints") as cur:
            return {str(row[0]) for row in await cur.fetchall()}

    async def reclaim_space(self, *, convert: bool = False) -> int:
        async with self.lock:
            return await reclaim_space(self.conn, convert=convert)


def assert_prunable(channels: dict[str, Any]) -> None:
    """Keep-latest pruning is only safe without DeltaChannel (see the module docstring)."""
    delta = sorted(name for name, channel in channels.items() if isinstance(channel, DeltaChannel))
    if delta:
        raise RuntimeError(f"keep-latest pruning would lose the DeltaChannel values of {delta}")


@asynccontextmanager
async def open_checkpointer(path: Path) -> AsyncIterator[PrunableSqliteSaver]:
    conn = await open_sqlite(path)
    try:
        saver = PrunableSqliteSaver(conn, serde=CompressingSerializer())
        await saver.setup()
        yield saver
    finally:
        await conn.close()
