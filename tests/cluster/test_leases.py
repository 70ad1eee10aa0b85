"""Session leases on a real Postgres database: one claimant per session, a dead worker's session claimable
once its lease ends, renewals that report lost leases, and the notifications the database sends on commit."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the cluster tests need the 'postgres' extra (psycopg)")

from research_tool.runtime.cluster.leases import SessionLeases
from research_tool.runtime.cluster.notifications import (
    CONTROL_CHANNEL,
    EVENTS_CHANNEL,
    QUEUE_CHANNEL,
    NotificationListener,
)
from tests.support.polling import eventually


async def add_session(pool: Any, status: str = "queued") -> str:
    session_id = uuid.uuid4().hex
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO sessions (id, query, request, status, created_at, updated_at)"
            " VALUES (%s, 'q', '{}'::jsonb, %s, now(), now())",
            (session_id, status),
        )
    return session_id


async def test_each_session_is_claimed_by_one_worker_oldest_first(pool: Any) -> None:
    ids = [await add_session(pool) for _ in range(6)]
    await add_session(pool, status="completed")  # finished: never claimed
    workers = [SessionLeases(pool, f"w{i}", ttl_s=30) for i in range(3)]

    async def drain(leases: SessionLeases) -> list[str]:
        got = []
        while (sid := await leases.claim_next()) is not None:
            got.append(sid)
        return got

    claimed = await asyncio.gather(*(drain(w) for w in workers))
    flat = [sid for got in claimed for sid in got]
    assert sorted(flat) == sorted(ids), "every unfinished session once, no finished one"
    assert len(set(flat)) == len(flat)
    assert await workers[0].claim(ids[0]) is (ids[0] in claimed[0]), "a held session is not taken"


async def test_a_dead_workers_session_is_claimable_after_its_lease_and_the_old_holder_learns_it_lost(
    pool: Any,
) -> None:
    sid = await add_session(pool)
    dead = SessionLeases(pool, "dead", ttl_s=1)
    alive = SessionLeases(pool, "alive", ttl_s=30)
    assert await dead.claim_next() == sid
    assert await alive.claim_next() is None, "the lease still holds"

    async def taken() -> bool:
        return await alive.claim_next() == sid

    await eventually(taken, within_s=5, every_s=0.1)
    kept, lost = await dead.renew()
    assert kept == [] and lost == {sid} and dead.held == set()
    kept, lost = await alive.renew()
    assert [h.session_id for h in kept] == [sid] and not lost

    await alive.release(sid)
    assert await SessionLeases(pool, "third", ttl_s=30).claim(sid), "released: claimable at once"


async def test_renewal_reports_a_stop_written_by_another_process(pool: Any) -> None:
    sid = await add_session(pool, status="running")
    leases = SessionLeases(pool, "w", ttl_s=30)
    assert await leases.claim(sid)
    async with pool.connection() as conn:
        await conn.execute("UPDATE sessions SET stop_requested = true WHERE id = %s", (sid,))
    kept, _ = await leases.renew()
    assert kept[0].stop_requested and not kept[0].has_answers


async def test_the_database_notifies_inserts_events_stops_and_releases(pool: Any, database_url: str) -> None:
    listener = NotificationListener(database_url)
    heard: list[tuple[str, str]] = []
    for channel in (EVENTS_CHANNEL, QUEUE_CHANNEL, CONTROL_CHANNEL):
        listener.subscribe(channel, lambda payload, channel=channel: heard.append((channel, payload)))
    await listener.start()
    try:
        sid = await add_session(pool)
        leases = SessionLeases(pool, "w", ttl_s=30)
        assert await leases.claim(sid)
        async with pool.connection() as conn:
            await conn.execute(
                "INSERT INTO events (session_id, seq, ts, type, message, data)"
                " VALUES (%s, 1, now(), 'session_queued', 'm', '{}'::jsonb)",
                (sid,),
            )
            await conn.execute("UPDATE sessions SET progress = '{}'::jsonb WHERE id = %s", (sid,))  # no wake-up
            await conn.execute("UPDATE sessions SET stop_requested = true WHERE id = %s", (sid,))
            await conn.execute("UPDATE sessions SET clarify_answers = '[\"a\"]'::jsonb WHERE id = %s", (sid,))
        await leases.release(sid)
        async with pool.connection() as conn:
            await conn.execute("DELETE FROM sessions WHERE id = %s", (sid,))
        expected = [
            (QUEUE_CHANNEL, sid),
            (EVENTS_CHANNEL, f"{sid}:1"),
            (CONTROL_CHANNEL, f"stop:{sid}"),
            (CONTROL_CHANNEL, f"answers:{sid}"),
            (QUEUE_CHANNEL, sid),
            (CONTROL_CHANNEL, f"deleted:{sid}"),
        ]

        async def all_heard() -> bool:
            return len(heard) >= len(expected)

        await eventually(all_heard, within_s=5)
        assert heard == expected
    finally:
        await listener.aclose()


async def test_the_listener_reconnects_and_says_so(pool: Any, database_url: str) -> None:
    listener = NotificationListener(database_url)
    reconnected = asyncio.Event()
    listener.on_reconnect(reconnected.set)
    heard: list[str] = []
    listener.subscribe(QUEUE_CHANNEL, heard.append)
    await listener.start()
    try:
        reconnected.clear()  # the first connect calls it too
        async with pool.connection() as conn:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()"
            )
        await asyncio.wait_for(reconnected.wait(), timeout=10)
        assert listener.reconnects >= 1
        sid = await add_session(pool)

        async def heard_it() -> bool:
            return sid in heard

        await eventually(heard_it, within_s=5)
    finally:
        await listener.aclose()
