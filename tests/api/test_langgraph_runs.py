"""LangGraph runs on research sessions with the official clients, unmodified: a cancel mid-run (our stop: a
partial report), multitask reject/enqueue, a clarifying question as an interrupt answered with
Command(resume=...), a dropped stream rejoined exactly with Last-Event-ID, and RemoteGraph used as a node
of a small parent graph."""

from __future__ import annotations

from contextlib import aclosing
from typing import Annotated, Any, TypedDict

import httpx
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command

from tests.support.polling import eventually

from .conftest import OK_BODY, QUESTION, LiveApi, client_of, collecting

SLOW_INPUT = {**OK_BODY, "tier": "standard"}


@pytest.mark.slow
async def test_cancel_mid_run_stops_with_a_partial_report_and_enqueued_runs_follow(slow_api: LiveApi) -> None:
    sdk = client_of(slow_api)
    tid = (await sdk.threads.create())["thread_id"]
    first = await sdk.runs.create(tid, "research", input=SLOW_INPUT)
    assert first["status"] in ("pending", "running")
    with pytest.raises(httpx.HTTPStatusError) as busy:
        await sdk.runs.create(tid, "research", input=SLOW_INPUT, multitask_strategy="reject")
    assert busy.value.response.status_code == 409
    follow_up = "How do I read and write JSON files with the json module?"
    queued = await sdk.runs.create(tid, "research", input={**OK_BODY, "query": follow_up}, multitask_strategy="enqueue")
    assert queued["status"] == "pending"
    assert (await sdk.threads.get(tid))["status"] == "busy"

    await eventually(lambda: collecting(slow_api, tid))
    await sdk.runs.cancel(tid, first["run_id"], wait=True, action="interrupt")
    cancelled = await sdk.runs.get(tid, first["run_id"])
    assert cancelled["status"] == "interrupted"

    # the enqueued run starts once the first has ended: a new research round on the same thread
    values = await sdk.runs.join(tid, queued["run_id"])
    assert values["query"] == follow_up and values["answer"]
    assert (await sdk.runs.get(tid, queued["run_id"]))["status"] == "success"
    assert [r["status"] for r in await sdk.runs.list(tid)] == ["success", "interrupted"]
    assert (await slow_api.status(tid))["query"] == follow_up


async def test_cancel_answers_with_the_partial_report(slow_api: LiveApi) -> None:
    sdk = client_of(slow_api)
    tid = (await sdk.threads.create())["thread_id"]
    run = await sdk.runs.create(tid, "research", input=SLOW_INPUT)
    await eventually(lambda: collecting(slow_api, tid))
    await sdk.runs.cancel(tid, run["run_id"], wait=True)
    state = await sdk.threads.get_state(tid)
    assert state["values"]["stop_reason"] == "user_requested"
    assert state["values"]["answer"] and state["values"]["messages"][-1]["type"] == "ai"
    assert (await sdk.threads.get(tid))["status"] == "idle"


async def test_a_clarifying_question_is_an_interrupt_and_resume_answers_it(api: LiveApi) -> None:
    sdk = client_of(api)
    tid = (await sdk.threads.create())["thread_id"]
    ambiguous = {**OK_BODY, "query": "Python", "clarify": True}
    parts = [p async for p in sdk.runs.stream(tid, "research", input=ambiguous, stream_mode=["updates", "values"])]
    interrupts = [p.data["__interrupt__"] for p in parts if p.event == "updates" and "__interrupt__" in p.data]
    assert len(interrupts) == 1 and interrupts[0][0]["value"]["questions"] and interrupts[0][0]["id"]
    assert "__interrupt__" in parts[-1].data  # the stream ends at the question

    thread = await sdk.threads.get(tid)
    assert thread["status"] == "interrupted"
    pending = [i for found in thread["interrupts"].values() for i in found]
    assert [i["id"] for i in pending] == [interrupts[0][0]["id"]]
    asked = await sdk.runs.list(tid)
    assert asked[0]["status"] == "interrupted"
    state = await sdk.threads.get_state(tid)
    assert state["next"] == ["ask"] and state["interrupts"][0]["value"]["questions"]

    values = await sdk.runs.wait(tid, "research", command={"resume": "the programming language"})
    assert isinstance(values, dict) and values["answer"]
    assert "the programming language" in values["refined_query"]
    assert (await sdk.threads.get(tid))["status"] == "idle"
    assert [r["status"] for r in await sdk.runs.list(tid)] == ["success", "interrupted"]
    with pytest.raises(httpx.HTTPStatusError) as nothing_to_resume:
        await sdk.runs.wait(tid, "research", command={"resume": "again"})
    assert nothing_to_resume.value.response.status_code == 409


@pytest.mark.slow
async def test_a_dropped_stream_resumes_exactly_from_its_last_event_id(slow_api: LiveApi) -> None:
    sdk = client_of(slow_api)
    tid = (await sdk.threads.create())["thread_id"]
    modes: Any = ["custom", "updates", "values"]
    run = await sdk.runs.create(tid, "research", input=SLOW_INPUT, stream_mode=modes)
    first: list[Any] = []
    async with aclosing(sdk.runs.join_stream(tid, run["run_id"], stream_mode=modes)) as stream:
        async for part in stream:
            first.append(part)
            if part.event == "updates" and "plan" in part.data:
                break  # the client drops mid-run
    assert first[-1].id
    rest = [p async for p in sdk.runs.join_stream(tid, run["run_id"], stream_mode=modes, last_event_id=first[-1].id)]
    assert rest[0].event == "metadata"
    whole = [p async for p in sdk.runs.join_stream(tid, run["run_id"], stream_mode=modes)]
    seen = [(p.id, p.event) for p in first + rest[1:] if p.event != "metadata"]
    assert seen == [(p.id, p.event) for p in whole if p.event != "metadata"]
    assert whole[-1].event == "values" and whole[-1].data["answer"]


class Chat(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]
    answer: str
    citations: list[dict[str, Any]]
    stop_reason: str


@pytest.mark.slow
async def test_remote_graph_as_a_node_of_a_parent_graph(api: LiveApi) -> None:
    remote = RemoteGraph("research", url=api.base_url, api_key=None)
    builder = StateGraph(Chat)
    builder.add_node("research", remote)
    builder.add_edge(START, "research")
    builder.add_edge("research", END)
    parent = builder.compile()
    result = await parent.ainvoke(
        {"messages": [{"role": "user", "content": QUESTION}]},
        {"configurable": {"providers": ["wikipedia"], "fetch": False, "tier": "simple"}},
    )
    assert result["answer"] and result["citations"] and result["stop_reason"]
    assert result["messages"][-1].type == "ai" and "Sources:" in result["messages"][-1].content
    sdk = client_of(api)
    assert await sdk.threads.search() == []  # a stateless run: nothing left behind

    # with a thread: the remote graph's own state is readable through RemoteGraph too
    thread = await sdk.threads.create()
    config: Any = {"configurable": {"thread_id": thread["thread_id"], "fetch": False, "tier": "simple"}}
    out = await remote.ainvoke({"query": QUESTION, "providers": ["wikipedia"]}, config)
    state = await remote.aget_state(config)
    assert state.values["answer"] == out["answer"]
    paused = await remote.ainvoke({**OK_BODY, "query": "Python", "clarify": True}, config)
    assert paused.get("__interrupt__") or (await sdk.threads.get(thread["thread_id"]))["status"] == "interrupted"
    resumed = await remote.ainvoke(Command(resume=["the programming language"]), config)
    assert "the programming language" in resumed["refined_query"]


async def test_a_chat_asks_for_clarification_reads_it_in_history_and_answers_with_the_form(api: LiveApi) -> None:
    """What a chat UI does: clarify turned on through config.configurable, the interrupt read from the head of
    /history, answered with the human-in-the-loop form's `edit` decision; an input-less run on a thread with no
    session names no question (422)."""
    sdk = client_of(api)
    tid = (await sdk.threads.create())["thread_id"]
    nothing = await api.client.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "research", "input": None})
    assert nothing.status_code == 422
    chat = {"messages": [{"type": "human", "content": "Python"}]}
    options = {k: v for k, v in OK_BODY.items() if k != "query"}
    values = await sdk.runs.wait(tid, "research", input=chat, config={"configurable": {**options, "clarify": True}})
    assert isinstance(values, dict)
    (asked,) = values["__interrupt__"]
    questions = asked["value"]["questions"]
    assert questions and values["messages"][-1]["type"] == "ai" and questions[0] in values["messages"][-1]["content"]

    (head, *_) = await sdk.threads.get_history(tid, limit=3)
    assert head["next"] == ["ask"] and [i["id"] for i in head["interrupts"]] == [asked["id"]]
    assert [i["id"] for t in head["tasks"] for i in t["interrupts"]] == [asked["id"]]
    form = head["interrupts"][0]["value"]
    assert form["review_configs"] == [{"action_name": "clarify", "allowed_decisions": ["edit"]}]
    args = form["action_requests"][0]["args"]
    assert list(args) == questions and not any(args.values())

    answer = {"type": "edit", "edited_action": {"name": "clarify", "args": {questions[0]: "the programming language"}}}
    done = await sdk.runs.wait(tid, "research", command={"resume": {"decisions": [answer]}})
    assert isinstance(done, dict) and "the programming language" in done["refined_query"]
    assert "__interrupt__" not in done and "Sources:" in done["messages"][-1]["content"]


@pytest.mark.slow
async def test_enqueued_runs_keep_what_they_were_a_regenerate_and_an_assistants_clarify(slow_api: LiveApi) -> None:
    """Issue 45 item 5: an enqueued run starts as it was asked, not rebuilt from its body alone. An enqueued
    regenerate (`input: null`) researches the thread's question again (it used to end `error`); an enqueued
    run of the `research-clarify` assistant asks its clarifying question (it used to lose `clarify: true`)."""
    sdk = client_of(slow_api)
    tid = (await sdk.threads.create())["thread_id"]
    first = await sdk.runs.create(tid, "research", input=SLOW_INPUT)
    regenerate = await slow_api.client.post(
        f"/threads/{tid}/runs", json={"input": None, "multitask_strategy": "enqueue"}
    )
    assert regenerate.status_code == 200 and regenerate.json()["status"] == "pending", regenerate.text
    ambiguous = {**OK_BODY, "query": "Python"}
    clarify = await sdk.runs.create(tid, "research-clarify", input=ambiguous, multitask_strategy="enqueue")
    assert clarify["status"] == "pending"

    await eventually(lambda: collecting(slow_api, tid))
    await sdk.runs.cancel(tid, first["run_id"], wait=True, action="interrupt")
    again = await sdk.runs.join(tid, regenerate.json()["run_id"])
    assert again["query"] == QUESTION and again["answer"], again
    assert (await sdk.runs.get(tid, regenerate.json()["run_id"]))["status"] == "success"

    asked = await sdk.runs.join(tid, clarify["run_id"])
    assert asked["__interrupt__"][0]["value"]["questions"], asked
    assert (await sdk.runs.get(tid, clarify["run_id"]))["status"] == "interrupted"
    assert (await sdk.threads.get(tid))["status"] == "interrupted"
