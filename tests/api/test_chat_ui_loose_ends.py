"""Agent Chat UI's loose ends on the LangGraph routes (issue 43, item 7), against a real server with httpx and
the official SDK, as the UI calls them:
- its stop: the SDK's useStream creates runs with `on_disconnect: "cancel"` and drops the stream (and may call
  runs.cancel); the research stops on the server, and the next question on the thread is accepted at once (it
  starts when the stopped run's report is written) instead of a 409;
- "Mark as Resolved" on the clarification form (`command: {goto: "__end__"}`) ends the wait: research goes on
  with the question as asked (it was a 422);
- regenerate (a run with no input) on a thread waiting for a clarification asks the question again (a 409);
- the chat reply to a clarification stays in `messages`, after the questions, once research goes on."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient

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
