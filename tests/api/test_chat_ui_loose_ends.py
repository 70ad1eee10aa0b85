"""Agent Chat UI's loose ends on the LangGraph routes (issue 43, item 7), against a real server with httpx and
the official SDK, as the UI calls them:
- its stop: the SDK's useStream creates runs with `on_disconnect: "cancel"` and drops the stream (and may call
  runs.cancel); the research stops on the server, and the next question on the thread is accepted at once (it
  starts when the stopped run's report is written) instead of a 409;
- its Cancel as the UI really sends it (Agent Chat UI passes `streamResumable: true`, so useStream 1.8 creates
  the run with `on_disconnect: "continue"` and `stream_resumable: true`, and its stop only drops the stream):
  the run is stopped unless a client streams it again within the grace, and the next question stops it at once
  (seen in Chromium: the run went on to its end, and the next question was a 409 while it ran);
- "Mark as Resolved" on the clarification form (`command: {goto: "__end__"}`) ends the wait: research goes on
  with the question as asked (it was a 422);
- regenerate (a run with no input) on a thread waiting for a clarification asks the question again (a 409);
- the chat reply to a clarification stays in `messages`, after the questions, once research goes on."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient

from research_tool.api.langgraph import service as langgraph_service
from tests.support.polling import eventually

from .conftest import OK_BODY, LiveApi, client_of, collecting

pytestmark = pytest.mark.slow
SLOW_INPUT = {**OK_BODY, "tier": "deep"}  # with a slow Wikipedia: runs for minutes unless stopped
CHAT_OPTIONS = {k: v for k, v in OK_BODY.items() if k != "query"}
REPLY = "the programming language"


async def stopped_by_the_user(api: LiveApi, thread_id: str) -> None:
    async def stopped() -> bool:
        record = await api.services.store.get(thread_id)
        return record.status == "completed" and record.stop_reason == "user_requested"

    await eventually(stopped, within_s=60)


async def test_dropping_an_on_disconnect_cancel_stream_stops_the_run_and_the_next_question_starts(
    slow_api: LiveApi,
) -> None:
    tid = (await client_of(slow_api).threads.create())["thread_id"]
    body = {"assistant_id": "research", "input": SLOW_INPUT, "stream_mode": ["values"], "on_disconnect": "cancel"}
    async with slow_api.client.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response:
        assert response.status_code == 200
        async for _line in response.aiter_lines():
            if await collecting(slow_api, tid):
                break  # the UI's stop: the stream is dropped mid-run
    await stopped_by_the_user(slow_api, tid)

    follow_up = {"assistant_id": "research", "input": {**OK_BODY, "query": "What does subprocess.run return?"}}
    asked = await slow_api.client.post(f"/threads/{tid}/runs", json=follow_up)
    assert asked.status_code == 200, asked.text
    values = await client_of(slow_api).runs.join(tid, asked.json()["run_id"])
    assert isinstance(values, dict) and values["query"] == "What does subprocess.run return?" and values["answer"]


async def test_after_the_sdks_cancel_the_next_question_is_taken_at_once(slow_api: LiveApi) -> None:
    sdk = client_of(slow_api)
    tid = (await sdk.threads.create())["thread_id"]
    first = await sdk.runs.create(tid, "research", input=SLOW_INPUT)

    async def started() -> bool:
        return await collecting(slow_api, tid)

    await eventually(started)
    await sdk.runs.cancel(tid, first["run_id"])  # at once, as the UI does, without waiting
    follow_up = {"assistant_id": "research", "input": {**OK_BODY, "query": "What does subprocess.run return?"}}
    asked = await slow_api.client.post(f"/threads/{tid}/runs", json=follow_up)  # multitask_strategy: reject
    assert asked.status_code == 200, f"the next question was refused: {asked.text}"
    values = await sdk.runs.join(tid, asked.json()["run_id"])
    assert isinstance(values, dict) and values["answer"]
    cancelled = await sdk.runs.get(tid, first["run_id"])
    assert cancelled["status"] == "interrupted"


# What Agent Chat UI's useStream (SDK 1.8, `streamResumable: true`) sends for a question.
UI_STREAM = {"stream_mode": ["values"], "on_disconnect": "continue", "stream_resumable": True}


async def dropped_mid_run(api: LiveApi) -> tuple[str, str]:
    """A thread whose run the UI streamed and then cancelled (the stream dropped while the research collects)."""
    tid = (await client_of(api).threads.create())["thread_id"]
    body = {"assistant_id": "research", "input": SLOW_INPUT, **UI_STREAM}
    async with api.client.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response:
        assert response.status_code == 200
        run_id = response.headers["content-location"].rsplit("/", 1)[-1]
        async for _line in response.aiter_lines():
            if await collecting(api, tid):
                break  # Agent Chat UI's Cancel: the stream is dropped mid-run, nothing else is sent
    return tid, run_id


async def test_agent_chat_uis_cancel_stops_a_resumable_run_that_no_client_rejoins(
    slow_api: LiveApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(langgraph_service, "RESUMABLE_GRACE_S", 0.5)
    tid, run_id = await dropped_mid_run(slow_api)
    await stopped_by_the_user(slow_api, tid)  # before: the deep run went on for minutes
    run = await client_of(slow_api).runs.get(tid, run_id)
    assert run["status"] == "interrupted"


async def test_agent_chat_uis_next_question_after_its_cancel_stops_the_run_at_once(slow_api: LiveApi) -> None:
    tid, run_id = await dropped_mid_run(slow_api)  # the grace (5 s) is not waited for
    follow_up = {"assistant_id": "research", "input": {**OK_BODY, "query": "What does subprocess.run return?"}}
    asked = await slow_api.client.post(f"/threads/{tid}/runs/stream", json={**follow_up, **UI_STREAM})
    assert asked.status_code == 200, f"the next question was refused: {asked.text}"  # before: 409, thread busy
    assert "What does subprocess.run return?" in asked.text and "Sources:" in asked.text
    sdk = client_of(slow_api)
    assert (await sdk.runs.get(tid, run_id))["status"] == "interrupted"
    record = await slow_api.services.store.get(tid)
    assert record.query == "What does subprocess.run return?"


async def test_a_resumable_run_whose_client_rejoins_within_the_grace_goes_on(
    slow_api: LiveApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dropped resumable stream is not a cancel when the client streams the run again in time (the SDK's own
    reconnect, or reconnectOnMount after a reload): the run keeps going."""
    monkeypatch.setattr(langgraph_service, "RESUMABLE_GRACE_S", 30.0)
    tid, run_id = await dropped_mid_run(slow_api)
    protocol = slow_api.app.state.langgraph

    async def left_unwatched() -> bool:  # the server sees the client leave a moment after it has
        return bool(protocol.unwatched(run_id))

    await eventually(left_unwatched)
    async with slow_api.client.stream("GET", f"/threads/{tid}/runs/{run_id}/stream") as rejoined:
        assert rejoined.status_code == 200
        async for _line in rejoined.aiter_lines():
            break  # the first frame: the stream is open and counted

        async def grace_over() -> bool:
            return not any(t.get_name() == f"langgraph-unwatched-{tid}" for t in protocol._tasks)

        await eventually(grace_over)  # the rejoin ended the grace at once, without a cancel
        assert not protocol.unwatched(run_id)
        run = await client_of(slow_api).runs.get(tid, run_id)
        assert run["status"] == "running" and run.get("cancel_reason") is None
    await client_of(slow_api).runs.cancel(tid, run_id)  # the slow deep run is not waited for


async def waiting_thread(sdk: LangGraphClient) -> tuple[str, list[str]]:
    """A chat thread whose research asked a clarifying question and waits for the answer."""
    tid = (await sdk.threads.create())["thread_id"]
    chat = {"messages": [{"type": "human", "content": "Python"}]}
    values = await sdk.runs.wait(
        tid, "research", input=chat, config={"configurable": {**CHAT_OPTIONS, "clarify": True}}
    )
    assert isinstance(values, dict)
    (asked,) = values["__interrupt__"]
    return tid, list(asked["value"]["questions"])


async def test_mark_as_resolved_ends_the_wait_and_research_goes_on(api: LiveApi) -> None:
    sdk = client_of(api)
    tid, _questions = await waiting_thread(sdk)
    resolved = await api.client.post(
        f"/threads/{tid}/runs/wait", json={"assistant_id": "research", "command": {"goto": "__end__"}}
    )
    assert resolved.status_code == 200, resolved.text
    values: dict[str, Any] = resolved.json()
    assert "__interrupt__" not in values and values["answer"] and values["status"] == "completed"
    assert (await sdk.threads.get(tid))["status"] == "idle"


async def test_regenerate_on_a_waiting_thread_asks_the_question_again(api: LiveApi) -> None:
    sdk = client_of(api)
    tid, _questions = await waiting_thread(sdk)
    again = await api.client.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "research", "input": None})
    assert again.status_code == 200, again.text
    values: dict[str, Any] = again.json()
    assert "__interrupt__" not in values and values["answer"] and values["query"] == "Python"


async def test_the_chat_reply_to_a_clarification_stays_in_messages(api: LiveApi) -> None:
    sdk = client_of(api)
    tid, questions = await waiting_thread(sdk)
    done = await sdk.runs.wait(tid, "research", input={"messages": [{"type": "human", "content": REPLY}]})
    assert isinstance(done, dict) and REPLY in done["refined_query"]
    messages = done["messages"]
    kinds = [m["type"] for m in messages]
    assert kinds == ["human", "ai", "human", "ai"], kinds
    assert messages[0]["content"] == "Python"
    assert questions[0] in messages[1]["content"]
    assert messages[2]["content"] == REPLY
    assert "Sources:" in messages[3]["content"]
    assert len({m["id"] for m in messages}) == 4
    state = await sdk.threads.get_state(tid)
    assert [m["content"] for m in state["values"]["messages"]][:3] == [m["content"] for m in messages][:3]
