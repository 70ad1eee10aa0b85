"""Per-user limits across API nodes (issue 44): two `serve --no-worker` processes on one Postgres database, 50
starts by one user at once, split between them, against RESEARCH_USER_MAX_CONCURRENT_SESSIONS=5 (and against a
daily token budget of five sessions' RESEARCH_TOKEN_BUDGET): exactly 5 are accepted (queued: no worker runs
them) and 45 get 429; the count is claimed under a per-user advisory lock in the same transaction as the insert,
so the two nodes cannot overshoot together.

Skips when Postgres (127.0.0.1:5432, or RESEARCH_TEST_POSTGRES_URL) cannot be reached.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.runtime.backends import open_users
from tests.support.cluster import api_client, running_cluster

pytest.importorskip("psycopg", reason="the cluster tests need the 'postgres' extra (psycopg)")

BODY = {"query": "How do I copy a directory tree?", "providers": ["wikipedia"], "fetch": False, "tier": "simple"}
STARTS = 50
LIMIT = 5


LIMITS = {
    "concurrent": {"RESEARCH_USER_MAX_CONCURRENT_SESSIONS": str(LIMIT)},
    # five sessions' token budgets a day: each unfinished session holds its whole budget
    "tokens": {"RESEARCH_TOKEN_BUDGET": "1000", "RESEARCH_USER_MAX_TOKENS_PER_DAY": str(LIMIT * 1000)},
}


@pytest.mark.slow
@pytest.mark.parametrize("limit", sorted(LIMITS))
async def test_fifty_starts_through_two_api_nodes_against_a_limit_of_five(tmp_path: Path, limit: str) -> None:
    with running_cluster(tmp_path, **LIMITS[limit]) as harness:
        settings = Settings(_env_file=None, database_url=harness.database_url, data_dir=tmp_path / "data")  # type: ignore[call-arg]
        async with open_users(settings) as users:
            key = await users.add("alice")
        first, second = harness.start_api(), harness.start_api()
        async with api_client(harness, first) as one, api_client(harness, second) as two:
            headers = {"X-Api-Key": key}
            answers = await asyncio.gather(
                *(
                    (one if i % 2 else two).post("/api/research/start", json=BODY, headers=headers)
                    for i in range(STARTS)
                )
            )
            codes = sorted(r.status_code for r in answers)
            assert codes.count(202) == LIMIT and codes.count(429) == STARTS - LIMIT, codes
            assert all(r.headers.get("retry-after") for r in answers if r.status_code == 429)
            accepted = {r.json()["session_id"] for r in answers if r.status_code == 202}
            listed = (await one.get("/api/research", params={"limit": 100}, headers=headers)).json()
            assert {s["session_id"] for s in listed["sessions"]} == accepted and listed["total"] == LIMIT
