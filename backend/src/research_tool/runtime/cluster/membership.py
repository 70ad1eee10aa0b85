"""How composition joins a process to the cluster, without importing psycopg on the embedded (SQLite) path:
the cluster modules are imported only when a Postgres pool is there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from research_tool.core.settings import Settings
from research_tool.runtime.runner import SessionRunner

if TYPE_CHECKING:
    from research_tool.runtime.cluster.leases import SessionLeases
    from research_tool.runtime.cluster.node import ClusterNode


def cluster_leases(settings: Settings, pool: Any) -> SessionLeases | None:
    """The process's leases when it shares a Postgres database (`pool`), else None (embedded SQLite)."""
    if pool is None:
        return None
    from research_tool.runtime.cluster.leases import SessionLeases
    from research_tool.runtime.cluster.node import new_worker_id

    return SessionLeases(pool, new_worker_id(), settings.lease_ttl_s)


@asynccontextmanager
async def cluster_membership(
    settings: Settings, runner: SessionRunner, events: Any, leases: SessionLeases | None, *, worker: bool
) -> AsyncIterator[ClusterNode | None]:
    """`cluster_node` for a process on Postgres (`worker`: claim sessions from the queue); nothing on SQLite."""
    if leases is None or not settings.database_url:
        yield None
        return
    from research_tool.runtime.cluster.node import cluster_node

    async with cluster_node(
        conninfo=settings.database_url,
        runner=runner,
        events=events,
        leases=leases,
        run_worker=worker,
        max_concurrent=settings.max_concurrent_sessions,
        poll_s=settings.worker_poll_s,
    ) as node:
        yield node
