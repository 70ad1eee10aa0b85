"""Issue 32: what a red team broke in the LangGraph routes, run as they ran it against one real server.

A deleted thread id re-created with if_exists=do_nothing (it hung for good: a re-entrant thread lock),
metadata nested 300 deep (stored, then every /threads/search answered 500), a refused stateless run (its
thread was written first and left behind), NUL bytes in a run's input and a resume answer, a stateless
stream whose client leaves, a finished run joined after the next round began, a join stream racing a
DELETE, locks of unknown thread ids, and cross-origin streams and cancels."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx
import pytest
import pytest_asyncio
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from research_tool.api.langgraph.service import LangGraphProtocol
from research_tool.bench.wiki_replay import Page, running_wiki
from tests.support.polling import eventually

from .conftest import OK_BODY, LiveApi, offline_settings, serve

pytestmark = pytest.mark.asyncio(loop_scope="module")  # the tests share one server

ANSWER_S = 10.0  # every request here answers well within this, or the test fails (it used to hang)
FOLLOW_UP = "How do I read and write JSON files with the json module?"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory, wiki_pages: list[Page]) -> AsyncIterator[LiveApi]:
    data_dir = tmp_path_factory.mktemp("langgraph_red_team") / "data"
    with running_wiki(delay_s=0.1, pages=wiki_pages) as (url, _):  # a session takes a few seconds
        async with serve(offline_settings(data_dir, url)) as live:
            live.client.timeout = httpx.Timeout(ANSWER_S)
            yield live


@pytest.fixture
def sdk(api: LiveApi) -> LangGraphClient:
    return get_client(url=api.base_url, api_key=None)


def protocol_of(api: LiveApi) -> LangGraphProtocol:
    protocol: LangGraphProtocol = api.app.state.langgraph
    return protocol


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"x": value}
    return value


async def thread_count(api: LiveApi) -> int:
    response = await api.client.post("/threads/count", json={})
    assert response.status_code == 200, response.text
    return int(response.json())


async def session_count(api: LiveApi) -> int:
    response = await api.client.get("/api/research", params={"limit": 1})
    assert response.status_code == 200, response.text
    return int(response.json()["total"])


async def test_a_deleted_threads_id_can_be_created_again_and_answers(api: LiveApi, sdk: LangGraphClient) -> None:
    tid = (await sdk.threads.create())["thread_id"]
    await sdk.runs.create(tid, "research", input=OK_BODY)
    assert (await api.client.delete(f"/api/research/{tid}")).status_code == 204  # the session, not the thread

    again = await api.client.post("/threads", json={"thread_id": tid, "if_exists": "do_nothing"})
    assert again.status_code == 200, again.text
    assert again.json()["thread_id"] == tid and again.json()["status"] == "idle"
    assert (await api.client.get(f"/threads/{tid}")).status_code == 200
    run = await api.client.post(f"/threads/{tid}/runs", json={"assistant_id": "research", "input": OK_BODY})
    assert run.status_code == 200, run.text
    assert (await api.client.delete(f"/threads/{tid}")).status_code == 204
    assert (await api.client.get(f"/threads/{tid}")).status_code == 404


async def test_deep_metadata_is_refused_before_anything_is_stored(api: LiveApi, sdk: LangGraphClient) -> None:
    threads, sessions = await thread_count(api), await session_count(api)
    deep = nested(300)
    created = await api.client.post("/threads", json={"metadata": deep})
    assert created.status_code == 422, created.text
    tid = (await sdk.threads.create(metadata={"kept": 1}))["thread_id"]
    patched = await api.client.patch(f"/threads/{tid}", json={"metadata": deep})
    assert patched.status_code == 422, patched.text
    assert (await sdk.threads.get(tid))["metadata"]["kept"] == 1
    waited = await api.client.post("/runs/wait", json={"assistant_id": "research", "input": OK_BODY, "metadata": deep})
    assert waited.status_code == 422, waited.text
    unknown_field = await api.client.post("/runs/wait", json={"assistant_id": "research", "input": {"nope": 1}})
    assert unknown_field.status_code == 422, unknown_field.text  # refused after its thread used to be written
    assert await thread_count(api) == threads + 1 and await session_count(api) == sessions
    assert (await api.client.post("/threads/search", json={"limit": 1000})).status_code == 200
    await sdk.threads.delete(tid)


async def test_a_row_stored_before_the_limit_does_not_break_search(api: LiveApi) -> None:
    """A data dir written by a server without the depth limit: the row reads as empty metadata."""
    protocol = protocol_of(api)
    await protocol.runs.put_thread("poisoned-thread", nested(300))
    try:
        found = await api.client.post("/threads/search", json={"limit": 1000})
        assert found.status_code == 200, found.text
        shown = next(t for t in found.json() if t["thread_id"] == "poisoned-thread")
        assert "x" not in shown["metadata"]
    finally:
        await protocol.runs.delete_thread("poisoned-thread")


async def test_nul_in_a_runs_input_or_a_resume_answer_is_a_422(api: LiveApi, sdk: LangGraphClient) -> None:
    sessions = await session_count(api)
    nul_input = {**OK_BODY, "query": "subprocess\u0000 timeout"}
    refused = await api.client.post("/runs/wait", json={"assistant_id": "research", "input": nul_input})
    assert refused.status_code == 422, refused.text
    start = await api.client.post("/api/research/start", json=nul_input)
    assert start.status_code == 422, start.text
    assert await session_count(api) == sessions

    tid = (await sdk.threads.create())["thread_id"]
    ambiguous = {**OK_BODY, "query": "Python", "clarify": True}
    await sdk.runs.wait(tid, "research", input=ambiguous)
    assert (await sdk.threads.get(tid))["status"] == "interrupted"
    resume = await api.client.post(
        f"/threads/{tid}/runs/wait", json={"assistant_id": "research", "command": {"resume": "the\u0000 language"}}
    )
    assert resume.status_code == 422, resume.text
    clarify = await api.client.post(f"/api/research/{tid}/clarify", json={"answers": ["the\u0000 language"]})
    assert clarify.status_code == 422, clarify.text
    values = await sdk.runs.wait(tid, "research", command={"resume": "the programming language"})
    assert isinstance(values, dict) and "\u0000" not in str(values.get("refined_query"))
    await sdk.threads.delete(tid)


@pytest.mark.parametrize("on_disconnect", ["continue", "cancel"])
async def test_a_stateless_stream_whose_client_leaves_leaves_nothing(api: LiveApi, on_disconnect: str) -> None:
    threads, sessions = await thread_count(api), await session_count(api)
    body = {"assistant_id": "research", "input": OK_BODY, "stream_mode": "updates", "on_disconnect": on_disconnect}
    async with api.client.stream("POST", "/runs/stream", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("event: updates"):
                break  # the client leaves mid-run
    await eventually(lambda: _counts_are(api, threads, sessions), within_s=60)


async def _counts_are(api: LiveApi, threads: int, sessions: int) -> bool:
    return await thread_count(api) == threads and await session_count(api) == sessions


async def test_a_finished_runs_join_shows_its_own_round(api: LiveApi, sdk: LangGraphClient) -> None:
    tid = (await sdk.threads.create())["thread_id"]
    first = await sdk.runs.create(tid, "research", input=OK_BODY)
    first_values = await sdk.runs.join(tid, first["run_id"])
    assert isinstance(first_values, dict) and first_values["query"] == OK_BODY["query"]
    second = await sdk.runs.create(tid, "research", input={**OK_BODY, "query": FOLLOW_UP})
    assert (await sdk.runs.join(tid, second["run_id"]))["query"] == FOLLOW_UP

    joined = await sdk.runs.join(tid, first["run_id"])
    assert joined["query"] == OK_BODY["query"] and joined["answer"] == first_values["answer"]
    parts = [p async for p in sdk.runs.join_stream(tid, first["run_id"], stream_mode="values")]
    shown = [p.data for p in parts if p.event == "values"]
    assert shown and all(part.get("query") == OK_BODY["query"] for part in shown)
    assert (await sdk.runs.get(tid, first["run_id"]))["status"] == "success"
    await sdk.threads.delete(tid)


async def test_a_join_stream_racing_a_delete_ends_with_an_error_part(api: LiveApi, sdk: LangGraphClient) -> None:
    tid = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.create(tid, "research", input={**OK_BODY, "tier": "standard"})
    parts: list[Any] = []
    async with aclosing(sdk.runs.join_stream(tid, run["run_id"], stream_mode="updates")) as stream:
        async for part in stream:  # a broken chunked body raises here (httpx.RemoteProtocolError)
            parts.append(part)
            if part.event == "updates" and len(parts) == 2:
                assert (await api.client.delete(f"/threads/{tid}")).status_code == 204
    assert parts[-1].event == "error" and parts[-1].data["error"] == "ThreadDeleted"


async def test_locks_of_unknown_threads_are_freed(api: LiveApi) -> None:
    protocol = protocol_of(api)
    body = {"assistant_id": "research", "input": OK_BODY}
    answers = await asyncio.gather(*(api.client.post(f"/threads/unknown-{i}/runs", json=body) for i in range(200)))
    assert {a.status_code for a in answers} == {404}
    assert protocol.locks_held == 0


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/threads/{tid}/runs/{rid}/cancel"),
        ("GET", "/threads/{tid}/runs/{rid}/stream"),
        ("POST", "/threads/{tid}/runs/stream"),
        ("POST", "/runs/stream"),
        ("DELETE", "/threads/{tid}"),
    ],
)
async def test_a_foreign_origin_may_neither_stream_nor_change(
    api: LiveApi, sdk: LangGraphClient, method: str, path: str
) -> None:
    tid = (await sdk.threads.create())["thread_id"]
    rid = (await sdk.runs.create(tid, "research", input=OK_BODY))["run_id"]
    url = path.format(tid=tid, rid=rid)
    refused = await api.client.request(method, url, headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["type"] == "origin_not_allowed"
    assert (await sdk.runs.get(tid, rid))["status"] in ("running", "success")  # not cancelled
    await sdk.runs.join(tid, rid)
    own = await api.client.request("GET", f"/threads/{tid}/runs/{rid}/stream", headers={"Origin": api.base_url})
    assert own.status_code == 200
    await sdk.threads.delete(tid)
