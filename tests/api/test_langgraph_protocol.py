"""LangGraph's server protocol driven by the official, unmodified Python client (`langgraph_sdk.get_client`)
against a live server on 127.0.0.1: assistants, threads, runs, SSE streams; a thread is a research session
(listed, read and deleted through either API); bad input is a 404/422, never a 500; no key is a 401."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from research_tool.bench.wiki_replay import Page, running_wiki

from .conftest import OK_BODY, QUESTION, LiveApi, offline_settings, serve

pytestmark = pytest.mark.asyncio(loop_scope="module")  # the tests share one server

TOKEN = "langgraph-test-token"
INPUT = dict(OK_BODY)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def secured(tmp_path_factory: pytest.TempPathFactory, wiki_pages: list[Page]) -> AsyncIterator[LiveApi]:
    data_dir = tmp_path_factory.mktemp("langgraph_protocol") / "data"
    with running_wiki(delay_s=0.0, pages=wiki_pages) as (url, _):
        settings = offline_settings(data_dir, url, api_token=TOKEN)
        async with serve(settings, headers={"Authorization": f"Bearer {TOKEN}"}) as live:
            yield live


@pytest.fixture
def sdk(secured: LiveApi) -> LangGraphClient:
    return get_client(url=secured.base_url, api_key=TOKEN)


def status_code(exc: BaseException) -> int:
    assert isinstance(exc, httpx.HTTPStatusError), repr(exc)
    return exc.response.status_code


async def test_assistant_and_server_info(sdk: LangGraphClient) -> None:
    found = await sdk.assistants.search(graph_id="research")
    assert [(a["graph_id"], a["name"]) for a in found] == [("research", "research"), ("research", "research-clarify")]
    assert found[1]["config"] == {"configurable": {"clarify": True}}
    assert await sdk.assistants.get("research-clarify") == found[1]
    assistant = await sdk.assistants.get(found[0]["assistant_id"])
    assert assistant["assistant_id"] == found[0]["assistant_id"]
    assert (await sdk.assistants.get("research"))["graph_id"] == "research"
    graph = await sdk.assistants.get_graph("research")
    names = {n["id"] for n in graph["nodes"]}
    assert {"clarify", "collect", "synthesize", "export"} <= names and graph["edges"]
    schemas = await sdk.assistants.get_schemas("research")
    assert "query" in schemas["input_schema"]["properties"] and "messages" in schemas["input_schema"]["properties"]
    assert "tier" in schemas["context_schema"]["properties"] and "query" not in schemas["context_schema"]["properties"]
    assert "answer" in schemas["output_schema"]["properties"]
    assert await sdk.assistants.search(graph_id="agent") == []
    with pytest.raises(httpx.HTTPStatusError) as missing:
        await sdk.assistants.get("no-such-assistant")
    assert status_code(missing.value) == 404
    async with httpx.AsyncClient(base_url=str(sdk.http.client.base_url), trust_env=False) as raw:
        ok = await raw.get("/ok", headers={"x-api-key": TOKEN})
        assert ok.status_code == 200 and ok.json() == {"ok": True}
        assert (await raw.get("/info", headers={"x-api-key": TOKEN})).json()["flags"]["crons"] is False


async def test_a_thread_is_a_research_session(sdk: LangGraphClient, secured: LiveApi) -> None:
    thread = await sdk.threads.create(metadata={"owner": "tests"})
    tid = thread["thread_id"]
    assert thread["status"] == "idle" and thread["metadata"]["owner"] == "tests"
    assert (await sdk.threads.create(thread_id=tid, if_exists="do_nothing"))["thread_id"] == tid
    with pytest.raises(httpx.HTTPStatusError) as twice:
        await sdk.threads.create(thread_id=tid)
    assert status_code(twice.value) == 409

    values = await sdk.runs.wait(tid, "research", input=INPUT)
    assert isinstance(values, dict)
    assert values["answer"] and values["citations"] and values["stop_reason"]
    assert values["messages"][0]["type"] == "human" and values["messages"][0]["content"] == QUESTION
    assert values["messages"][-1]["type"] == "ai" and "Sources:" in values["messages"][-1]["content"]

    # the same session through the research API
    status = await secured.status(tid)
    assert status["status"] == "completed"
    report = await secured.report(tid)
    assert report["answer"] == values["answer"]
    listed = (await secured.client.get("/api/research", params={"limit": 100})).json()["sessions"]
    assert tid in {s["session_id"] for s in listed}

    shown = await sdk.threads.get(tid)
    assert shown["status"] == "idle" and shown["values"]["answer"] == values["answer"]
    state = await sdk.threads.get_state(tid)
    assert state["values"]["answer"] == values["answer"] and state["next"] == []
    assert state["checkpoint"]["thread_id"] == tid and state["checkpoint"]["checkpoint_id"]
    history = await sdk.threads.get_history(tid, limit=3)
    assert 1 <= len(history) <= 3 and history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    runs = await sdk.runs.list(tid)
    assert [r["status"] for r in runs] == ["success"]
    assert (await sdk.runs.get(tid, runs[0]["run_id"]))["status"] == "success"
    joined = await sdk.runs.join(tid, runs[0]["run_id"])
    assert joined["answer"] == values["answer"]

    found = await sdk.threads.search(metadata={"owner": "tests"}, status="idle")
    assert [t["thread_id"] for t in found] == [tid]
    assert await sdk.threads.search(metadata={"owner": "nobody"}) == []

    # and the reverse: a session started through /api/research is a thread
    sid = await secured.start()
    assert (await sdk.threads.get(sid))["thread_id"] == sid
    assert sid in {t["thread_id"] for t in await sdk.threads.search(metadata={"graph_id": "research"}, limit=50)}
    await secured.wait_status(sid, "completed")
    assert (await secured.client.delete(f"/api/research/{sid}")).status_code == 204
    with pytest.raises(httpx.HTTPStatusError) as gone:
        await sdk.threads.get(sid)
    assert status_code(gone.value) == 404

    await sdk.threads.delete(tid)
    assert (await secured.client.get(f"/api/research/{tid}/status")).status_code == 404
    with pytest.raises(httpx.HTTPStatusError) as deleted:
        await sdk.threads.get(tid)
    assert status_code(deleted.value) == 404


async def test_stream_modes_in_sse_framing(sdk: LangGraphClient, secured: LiveApi) -> None:
    thread = await sdk.threads.create()
    tid = thread["thread_id"]
    created: list[Any] = []
    parts = [
        part
        async for part in sdk.runs.stream(
            tid,
            "research",
            input={"messages": [{"role": "user", "content": QUESTION}]},
            context={"providers": ["wikipedia"], "fetch": False, "tier": "simple"},
            stream_mode=["values", "updates", "custom", "messages-tuple"],
            on_run_created=created.append,
        )
    ]
    kinds = [p.event for p in parts]
    assert kinds[0] == "metadata" and parts[0].data["run_id"] == created[0]["run_id"]
    assert {"values", "updates", "custom", "messages"} <= set(kinds)
    updates = [next(iter(p.data)) for p in parts if p.event == "updates"]
    assert updates.index("collect") < updates.index("synthesize") < updates.index("export")
    custom = [p.data["type"] for p in parts if p.event == "custom"]
    assert custom.count("phase_started") >= 5 and custom[-1] == "session_completed"
    values = [p.data for p in parts if p.event == "values"]
    assert values[0]["query"] == QUESTION and values[-1]["answer"]
    message, meta = next(p.data for p in parts if p.event == "messages")
    assert message["type"] == "ai" and message["content"].startswith(values[-1]["answer"])
    assert meta["langgraph_node"] == "export" and meta["run_id"] == created[0]["run_id"]
    ids = [p.id for p in parts if p.event != "metadata"]
    assert all(ids) and len(set(ids)) == len(ids)
    # the options came as the run's context: the session ran with them
    record = await secured.services.store.get(tid)
    assert record.request.providers == ["wikipedia"] and record.request.tier == "simple"
    assert record.query == QUESTION


async def test_bad_input_is_a_4xx_and_no_key_a_401(sdk: LangGraphClient, secured: LiveApi) -> None:
    missing_thread = "0123456789abcdef0123456789abcdef"
    calls = [
        sdk.threads.get(missing_thread),
        sdk.threads.get_state(missing_thread),
        sdk.threads.delete(missing_thread),
        sdk.runs.list(missing_thread),
        sdk.runs.get(missing_thread, "no-run"),
        sdk.runs.create(missing_thread, "research", input=INPUT),
    ]
    for call in calls:
        with pytest.raises(httpx.HTTPStatusError) as failed:
            await call
        assert status_code(failed.value) == 404
    thread = await sdk.threads.create()
    tid = thread["thread_id"]
    for bad in (
        {"assistant_id": "nope", "input": INPUT},
        {"assistant_id": "research", "input": INPUT, "stream_mode": "telepathy"},
        {"assistant_id": "research", "input": {"nonsense": 1}},
        {"assistant_id": "research", "input": {"messages": []}},
        {"assistant_id": "research", "input": INPUT, "multitask_strategy": "rollback"},
    ):
        response = await secured.client.post(f"/threads/{tid}/runs/stream", json=bad)
        assert response.status_code in (404, 422), (bad, response.text)
        assert response.status_code == (404 if bad["assistant_id"] == "nope" else 422), response.text
    with pytest.raises(httpx.HTTPStatusError) as no_run:
        await sdk.runs.get(tid, "0000")
    assert status_code(no_run.value) == 404

    async with httpx.AsyncClient(base_url=secured.base_url, trust_env=False) as anonymous:
        routes = [
            ("GET", "/ok"),
            ("GET", "/info"),
            ("POST", "/assistants/search"),
            ("GET", "/assistants/research"),
            ("GET", "/assistants/research/graph"),
            ("GET", "/assistants/research/schemas"),
            ("POST", "/threads"),
            ("POST", "/threads/search"),
            ("GET", f"/threads/{tid}"),
            ("PATCH", f"/threads/{tid}"),
            ("DELETE", f"/threads/{tid}"),
            ("GET", f"/threads/{tid}/state"),
            ("POST", f"/threads/{tid}/history"),
            ("POST", f"/threads/{tid}/runs"),
            ("POST", f"/threads/{tid}/runs/stream"),
            ("POST", f"/threads/{tid}/runs/wait"),
            ("GET", f"/threads/{tid}/runs"),
            ("GET", f"/threads/{tid}/runs/r1"),
            ("GET", f"/threads/{tid}/runs/r1/join"),
            ("GET", f"/threads/{tid}/runs/r1/stream"),
            ("POST", f"/threads/{tid}/runs/r1/cancel"),
            ("POST", "/runs/stream"),
            ("POST", "/runs/wait"),
        ]
        for method, path in routes:
            for headers in ({}, {"x-api-key": "wrong"}):
                response = await anonymous.request(method, path, json={}, headers=headers)
                assert response.status_code == 401, (method, path, response.text)
    assert (await sdk.threads.get(tid))["thread_id"] == tid  # still there


async def test_stateless_wait_and_stream(sdk: LangGraphClient, secured: LiveApi) -> None:
    before = await sdk.threads.count()
    values = await sdk.runs.wait(None, "research", input=INPUT)
    assert isinstance(values, dict) and values["answer"]
    events = [p.event async for p in sdk.runs.stream(None, "research", input=INPUT, stream_mode="updates")]
    assert events[0] == "metadata" and events.count("updates") >= 5
    assert await sdk.threads.count() == before  # stateless runs leave no thread behind
