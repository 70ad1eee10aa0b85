"""Issue 45 item 6: an answer to a clarifying question is checked the same way however it arrives: `POST
/api/research/{id}/clarify`, a LangGraph `command.resume` (a string, a list, the interrupt form's `edit`
decision) or a chat reply. A NUL (it landed in `refined_query`), an answer over 2,000 characters (a 60,000-
character one was taken, and every later regenerate of the thread was then refused) and more than 10 answers
(8,000 were taken) are a 422 that leaves the question pending; the longest answers allowed still leave a
thread that regenerates."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from langgraph_sdk import get_client

from research_tool.bench.wiki_replay import Page, running_wiki
from research_tool.models.api import MAX_ANSWER_CHARS, MAX_ANSWERS

from .conftest import OK_BODY, LiveApi, offline_settings, serve

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory, wiki_pages: list[Page]) -> AsyncIterator[LiveApi]:
    data_dir = tmp_path_factory.mktemp("clarification_answers") / "data"
    with running_wiki(delay_s=0.0, pages=wiki_pages) as (url, _):
        async with serve(offline_settings(data_dir, url)) as live:
            live.client.timeout = httpx.Timeout(30)
            yield live


async def asking_thread(api: LiveApi) -> tuple[str, list[str]]:
    sdk = get_client(url=api.base_url, api_key=None)
    tid = (await sdk.threads.create())["thread_id"]
    values = await sdk.runs.wait(tid, "research", input={**OK_BODY, "query": "Python", "clarify": True})
    assert isinstance(values, dict)
    return tid, list(values["__interrupt__"][0]["value"]["questions"])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def asking(api: LiveApi) -> tuple[str, list[str]]:
    """One thread waiting for answers: every refused answer leaves it so."""
    return await asking_thread(api)


def form(question: str, answer: str) -> dict[str, Any]:
    return {"decisions": [{"type": "edit", "edited_action": {"name": "clarify", "args": {question: answer}}}]}


LONG = "a" * 60_000


@pytest.mark.parametrize(
    "how",
    [
        "form_nul",
        "form_long",
        "resume_long",
        "resume_many",
        "chat_reply_long",
        "chat_reply_nul",
        "rest_long",
        "rest_many",
    ],
)
async def test_an_answer_breaking_a_rule_is_a_422_however_it_arrives(
    api: LiveApi, asking: tuple[str, list[str]], how: str
) -> None:
    tid, questions = asking
    run = f"/threads/{tid}/runs/wait"
    bodies: dict[str, tuple[str, dict[str, Any]]] = {
        "form_nul": (run, {"command": {"resume": form(questions[0], "the\u0000 language")}}),
        "form_long": (run, {"command": {"resume": form(questions[0], LONG)}}),
        "resume_long": (run, {"command": {"resume": LONG}}),
        "resume_many": (run, {"command": {"resume": ["x"] * 8000}}),
        "chat_reply_long": (run, {"input": {"messages": [{"role": "user", "content": LONG}]}}),
        "chat_reply_nul": (run, {"input": {"messages": [{"role": "user", "content": "the\u0000 language"}]}}),
        "rest_long": (f"/api/research/{tid}/clarify", {"answers": [LONG]}),
        "rest_many": (f"/api/research/{tid}/clarify", {"answers": ["x"] * 8000}),
    }
    path, body = bodies[how]
    refused = await api.client.post(path, json=body)
    assert refused.status_code == 422, refused.text
    thread = (await api.client.get(f"/threads/{tid}")).json()
    assert thread["status"] == "interrupted"  # still asking: nothing was taken
    status = (await api.client.get(f"/api/research/{tid}/status")).json()
    assert status["status"] == "awaiting_clarification"


async def test_the_longest_answers_allowed_leave_a_thread_that_regenerates(api: LiveApi) -> None:
    tid, _ = await asking_thread(api)
    answers = [f"answer {i} " + "b" * (MAX_ANSWER_CHARS - 10) for i in range(MAX_ANSWERS)]
    answered = await api.client.post(f"/threads/{tid}/runs/wait", json={"command": {"resume": answers}})
    assert answered.status_code == 200, answered.text
    again = await api.client.post(f"/threads/{tid}/runs/wait", json={"input": None})
    assert again.status_code == 200, again.text
    assert again.json()["answer"]
