"""Per-user limits (issue 44): RESEARCH_USER_MAX_CONCURRENT_SESSIONS and RESEARCH_USER_MAX_SESSIONS_PER_DAY.

50 starts by one user at once against a limit of 5: exactly 5 are accepted and 45 get 429 with Retry-After and a
one-line reason; nothing is lost or half-created (5 rows, each with its first event and its audit line). Another
user is not held back by the first one's sessions; the local single user (no users, no token) has no limit.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from research_tool.core.errors import SessionStateError
from research_tool.runtime.backends import open_users

from .conftest import OK_BODY, SlowWiki, offline_settings, serve

pytestmark = pytest.mark.slow
STARTS = 50
LIMIT = 5


async def test_fifty_concurrent_starts_against_a_limit_of_five(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    with slow_wiki(1.0) as (url, _):  # the accepted sessions keep running while the others are refused
        settings = offline_settings(
            tmp_path / "data", url, max_concurrent_sessions=20, user_max_concurrent_sessions=LIMIT
        )
        async with open_users(settings) as users:
            alice, bob = await users.add("alice"), await users.add("bob")
        async with serve(settings) as live:
            headers = {"X-Api-Key": alice}
            answers = await asyncio.gather(
                *(live.client.post("/api/research/start", json=OK_BODY, headers=headers) for _ in range(STARTS))
            )
            codes = sorted(r.status_code for r in answers)
            assert codes.count(202) == LIMIT and codes.count(429) == STARTS - LIMIT, codes
            refused = next(r for r in answers if r.status_code == 429)
            assert int(refused.headers["retry-after"]) >= 1
            error = refused.json()["error"]
            assert error["type"] == "user_limit" and error["retryable"] is True
            assert "\n" not in error["message"] and "RESEARCH_USER_MAX_CONCURRENT_SESSIONS=5" in error["message"]

            accepted = {r.json()["session_id"] for r in answers if r.status_code == 202}
            listed = (await live.client.get("/api/research", headers=headers)).json()
            assert listed["total"] == LIMIT and {s["session_id"] for s in listed["sessions"]} == accepted
            for sid in accepted:  # none half-created: each has its row, its first event and its audit line
                assert (await live.services.events.replay(sid))[0].type == "session_queued"
            starts = [r for r in await live.services.users.audit_rows(limit=500) if r.action == "start"]
            assert {r.target for r in starts} == accepted and {r.actor for r in starts} == {"alice"}

            # bob is not held back by alice's sessions
            bobs = await live.client.post("/api/research/start", json=OK_BODY, headers={"X-Api-Key": bob})
            assert bobs.status_code == 202, bobs.text
            # once one of alice's has finished (stopped here), she may start one more, and only one
            await live.client.post(f"/api/research/{sorted(accepted)[0]}/stop", headers=headers)
            await live.services.runner.until_finished(sorted(accepted)[0])
            again = await asyncio.gather(
                *(live.client.post("/api/research/start", json=OK_BODY, headers=headers) for _ in range(5))
            )
            assert sorted(r.status_code for r in again) == [202, 429, 429, 429, 429]
            for sid in await live.services.store.ids(statuses=("queued", "running", "awaiting_clarification")):
                await live.services.runner.request_stop(sid)


async def test_sessions_per_day(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    with slow_wiki(0.0) as (url, _):
        settings = offline_settings(tmp_path / "data", url, user_max_sessions_per_day=3)
        async with open_users(settings) as users:
            key = await users.add("alice")
        async with serve(settings) as live:
            headers = {"Authorization": f"Bearer {key}"}
            first = [await live.client.post("/api/research/start", json=OK_BODY, headers=headers) for _ in range(3)]
            assert [r.status_code for r in first] == [202, 202, 202]
            # deleting a session does not give its start back
            sid = first[0].json()["session_id"]
            await live.services.runner.until_finished(sid)
            assert (await live.client.delete(f"/api/research/{sid}", headers=headers)).status_code == 204
            over = await live.client.post("/api/research/start", json=OK_BODY, headers=headers)
            assert over.status_code == 429
            assert 1 <= int(over.headers["retry-after"]) <= 86_401
            assert "RESEARCH_USER_MAX_SESSIONS_PER_DAY=3" in over.json()["error"]["message"]
            # the same limit holds for a LangGraph run and /run alike
            run = await live.client.post(
                "/runs/wait", json={"assistant_id": "research", "input": OK_BODY}, headers=headers
            )
            assert run.status_code == 429, run.text
            assert (await live.client.post("/run", json=OK_BODY, headers=headers)).status_code == 429
            # a new round on one of her finished threads is refused before the old round is touched
            kept = first[1].json()["session_id"]
            await live.services.runner.until_finished(kept)
            rerun = await live.client.post(
                f"/threads/{kept}/runs/wait", json={"assistant_id": "research", "input": OK_BODY}, headers=headers
            )
            assert rerun.status_code == 429, rerun.text
            assert (await live.client.get(f"/api/research/{kept}/report", headers=headers)).status_code == 200
            assert (await live.client.get(f"/threads/{kept}/runs", headers=headers)).json() == []
            # nothing half-made: the refused LangGraph run left no thread behind (her threads are her 2 sessions)
            listed = (await live.client.get("/api/research", headers=headers)).json()
            assert listed["total"] == 2
            threads = (await live.client.post("/threads/search", json={}, headers=headers)).json()
            assert {t["thread_id"] for t in threads} == {s["session_id"] for s in listed["sessions"]}


async def test_the_local_user_has_no_limit(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    with slow_wiki(0.0) as (url, _):
        settings = offline_settings(tmp_path / "data", url, user_max_concurrent_sessions=1, user_max_sessions_per_day=1)
        async with serve(settings) as live:
            for _ in range(3):
                assert (await live.client.post("/api/research/start", json=OK_BODY)).status_code == 202


async def test_the_daily_token_budget_reserves_each_sessions_budget(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    """50 starts at once against a day of 5 sessions' token budgets: exactly 5 (each unfinished session holds its
    whole RESEARCH_TOKEN_BUDGET until it has finished and its real spend is written)."""
    with slow_wiki(1.0) as (url, _):
        settings = offline_settings(
            tmp_path / "data", url, max_concurrent_sessions=20, token_budget=1000, user_max_tokens_per_day=5000
        )
        async with open_users(settings) as users:
            key = await users.add("alice")
        async with serve(settings) as live:
            headers = {"X-Api-Key": key}
            answers = await asyncio.gather(
                *(live.client.post("/api/research/start", json=OK_BODY, headers=headers) for _ in range(STARTS))
            )
            codes = sorted(r.status_code for r in answers)
            assert codes.count(202) == LIMIT and codes.count(429) == STARTS - LIMIT, codes
            message = next(r for r in answers if r.status_code == 429).json()["error"]["message"]
            assert "RESEARCH_USER_MAX_TOKENS_PER_DAY=5000" in message and "\n" not in message
            # what finished sessions spent counts too: 4,500 spent today leaves no room for a 1,000-token budget
            for sid in [r.json()["session_id"] for r in answers if r.status_code == 202]:
                with contextlib.suppress(SessionStateError):  # finished already
                    await live.services.runner.request_stop(sid)
                await live.services.runner.until_finished(sid)
            await live.services.users.audit("alice", "tokens", "earlier-session", "4500")
            over = await live.client.post("/api/research/start", json=OK_BODY, headers=headers)
            assert over.status_code == 429 and "has spent 4500 model tokens today" in over.text


async def test_an_enqueued_run_needs_a_start_left_today(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    with slow_wiki(0.5) as (url, _):
        settings = offline_settings(tmp_path / "data", url, user_max_sessions_per_day=1)
        async with open_users(settings) as users:
            key = await users.add("alice")
        async with serve(settings, headers={"X-Api-Key": key}) as live:
            run = {"assistant_id": "research", "input": OK_BODY, "if_not_exists": "create"}
            first = await live.client.post("/threads/t-alice/runs", json=run)
            assert first.status_code == 200, first.text
            queued = await live.client.post("/threads/t-alice/runs", json={**run, "multitask_strategy": "enqueue"})
            assert queued.status_code == 429 and "RESEARCH_USER_MAX_SESSIONS_PER_DAY=1" in queued.text
            runs = (await live.client.get("/threads/t-alice/runs")).json()
            assert [r["run_id"] for r in runs] == [first.json()["run_id"]]  # nothing enqueued
            await live.services.runner.request_stop("t-alice")
