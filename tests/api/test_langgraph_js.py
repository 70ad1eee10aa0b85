"""The official JS client, `@langchain/langgraph-sdk` from npm, unmodified, in Node 20 against a live server:
`runs.stream` with several modes, `runs.create` + `runs.cancel` (wait, interrupt) + `runs.join`,
`threads.search`, and a 404, authenticated with the SDK's `x-api-key` (tests/langgraph_js/client.mjs).
Skips, saying why, when node or the npm package is absent (.ci/run installs it with `npm ci`)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from research_tool.bench.wiki_replay import WikiReplay

from .conftest import OK_BODY, QUESTION, LiveApi, SlowWiki, offline_settings, serve

JS_DIR = Path(__file__).resolve().parent.parent / "langgraph_js"
PACKAGE = JS_DIR / "node_modules" / "@langchain" / "langgraph-sdk" / "package.json"
TOKEN = "js-client-token"
NODE_TIMEOUT_S = 120.0


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the JS client check needs Node 20")
    if not PACKAGE.exists():
        pytest.skip(f"@langchain/langgraph-sdk is not installed: run `npm ci` in {JS_DIR} (.ci/run does)")
    return node


@pytest.fixture
async def secured(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> AsyncIterator[LiveApi]:
    settings = offline_settings(tmp_path / "data", wiki[0], api_token=TOKEN)
    async with serve(settings, headers={"Authorization": f"Bearer {TOKEN}"}) as live:
        yield live


@pytest.mark.slow
async def test_the_js_client_streams_cancels_joins_and_searches(secured: LiveApi) -> None:
    node = node_or_skip()
    process = await asyncio.create_subprocess_exec(
        node,
        str(JS_DIR / "client.mjs"),
        secured.base_url,
        TOKEN,
        cwd=JS_DIR,
        env={"PATH": str(Path(node).parent), "RESEARCH_INPUT": json.dumps(OK_BODY), "NO_COLOR": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=NODE_TIMEOUT_S)
    assert process.returncode == 0, stderr.decode()[-3000:]
    result = json.loads(stdout)

    parts = result["parts"]
    events = [p["event"] for p in parts]
    assert events[0] == "metadata" and parts[0]["data"]["run_id"]
    assert {"values", "updates", "custom"} <= set(events)
    assert parts[-1]["event"] in ("values", "custom")
    final = [p["data"] for p in parts if p["event"] == "values"][-1]
    assert final["answer"] and final["citations"] and final["messages"][-1]["type"] == "ai"
    assert all(p["id"] for p in parts if p["event"] != "metadata")
    assert (await secured.status(result["streamedThread"]))["status"] == "completed"

    assert result["cancelledRun"]["status"] == "interrupted"
    assert result["joined"]["stop_reason"] == "user_requested"
    assert set(result["found"]) == {result["streamedThread"], result["cancelledThread"]}
    assert result["missing"] == "404"


@pytest.fixture
async def slow_secured(tmp_path: Path, slow_wiki: SlowWiki) -> AsyncIterator[LiveApi]:
    with slow_wiki(0.1) as (url, _):
        settings = offline_settings(tmp_path / "data", url, api_token=TOKEN)
        async with serve(settings, headers={"Authorization": f"Bearer {TOKEN}"}) as live:
            yield live


def progress_shown(messages: list[dict[str, Any]]) -> bool:
    return (
        len(messages) == 2
        and messages[0]["content"] == QUESTION
        and messages[1]["type"] == "ai"
        and messages[1]["content"].startswith("Researching")
    )


@pytest.mark.slow
async def test_use_stream_shows_progress_asks_and_regenerates(slow_secured: LiveApi) -> None:
    """useStream (React, in Node) as Agent Chat UI drives it: the question stays and a progress line shows
    during the run, the cited answer replaces it; regenerate gives a new answer; a clarifying question is read
    as an interrupt with its questions (live and after a reload) and a chat reply answers it."""
    node = node_or_skip()
    process = await asyncio.create_subprocess_exec(
        node,
        str(JS_DIR / "use_stream.mjs"),
        slow_secured.base_url,
        TOKEN,
        cwd=JS_DIR,
        env={
            "PATH": str(Path(node).parent),
            "RESEARCH_OPTIONS": json.dumps({k: v for k, v in OK_BODY.items() if k != "query"}),
            "RESEARCH_QUESTION": QUESTION,
            "NO_COLOR": "1",
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=NODE_TIMEOUT_S)
    assert process.returncode == 0, stderr.decode()[-3000:]
    assert b"Error" not in stderr, stderr.decode()[-3000:]  # no console.error from the hook
    result = json.loads(stdout)

    # the question never disappears during the run; a progress line is the AI message until the answer
    during = [m for m in result["askDuring"] if m]
    assert during and all(m[0]["content"] == QUESTION for m in during)
    assert any(progress_shown(m) for m in during)
    done = result["askDone"]
    assert [m["type"] for m in done] == ["human", "ai"] and done[0]["content"] == QUESTION
    assert done[1]["content"].startswith(result["askValues"]["answer"]) and "Sources:" in done[1]["content"]
    assert "](<http" in done[1]["content"]  # the sources are markdown links
    assert result["askValues"]["citations"] and result["askValues"]["status"] == "completed"

    # regenerate: the same question again, a new answer message on the same thread
    assert result["regenerateCheckpoint"] and result["regenerateThread"] == result["askThread"]
    assert any(progress_shown(m) for m in result["regenerateDuring"] if m)
    again = result["regenerateDone"]
    assert [m["type"] for m in again] == ["human", "ai"] and again[0]["content"] == QUESTION
    assert again[1]["id"] != done[1]["id"] and "Sources:" in again[1]["content"]
    runs = (await slow_secured.client.get(f"/threads/{result['askThread']}/runs")).json()
    assert [r["status"] for r in runs] == ["success", "success"]

    # the clarifying question: an interrupt with the questions, live and read back from the history
    for interrupt in (result["interruptLive"], result["interruptReloaded"]):
        questions = interrupt["value"]["questions"]
        assert questions and interrupt["id"]
        request = interrupt["value"]["action_requests"][0]
        assert request["name"] == "clarify" and list(request["args"]) == questions
    assert result["interruptMessages"][0]["content"] == "Python"
    assert result["interruptLive"]["value"]["questions"][0] in result["interruptMessages"][1]["content"]

    # a chat reply answers it: the research goes on with the meaning chosen
    assert "the programming language" in result["replyValues"]["refined_query"]
    assert result["replyInterrupt"] is None and "Sources:" in result["replyDone"][-1]["content"]
    # the reply stays in the chat once research goes on (issue 43): question, the questions asked, reply, answer
    assert [m["type"] for m in result["replyDone"]] == ["human", "ai", "human", "ai"]
    assert result["replyDone"][2]["content"] == "the programming language"
    thread = (await slow_secured.client.get(f"/threads/{result['clarifyThread']}")).json()
    assert thread["status"] == "idle" and thread["metadata"]["graph_id"] == "research"
    # Agent Chat UI lists threads by `graph_id` = its Assistant ID when that is a name, by `assistant_id` if a uuid
    for search, found in (
        ({"graph_id": "research-clarify"}, [result["clarifyThread"]]),
        ({"assistant_id": thread["metadata"]["assistant_id"]}, [result["clarifyThread"]]),
        ({"graph_id": "research"}, [result["clarifyThread"], result["askThread"]]),
    ):
        listed = (await slow_secured.client.post("/threads/search", json={"metadata": search})).json()
        assert [t["thread_id"] for t in listed] == found, search


@pytest.mark.slow
async def test_use_streams_stop_stops_the_run_and_the_next_question_is_answered(slow_secured: LiveApi) -> None:
    """Agent Chat UI's stop (issue 43): useStream's stop() drops a run it created with on_disconnect "cancel";
    the research stops on the server (the run ends `interrupted`), and the question asked right after is taken
    (no 409) and answered."""
    node = node_or_skip()
    process = await asyncio.create_subprocess_exec(
        node,
        str(JS_DIR / "use_stream_stop.mjs"),
        slow_secured.base_url,
        TOKEN,
        cwd=JS_DIR,
        env={
            "PATH": str(Path(node).parent),
            "RESEARCH_OPTIONS": json.dumps({**{k: v for k, v in OK_BODY.items() if k != "query"}, "tier": "deep"}),
            "NO_COLOR": "1",
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=NODE_TIMEOUT_S)
    assert process.returncode == 0, stderr.decode()[-3000:]
    result = json.loads(stdout)
    assert result["errors"] == [], result["errors"]  # no "thread ... is busy with a run" for the next question
    statuses = [r["status"] for r in sorted(result["runs"], key=lambda r: r["created_at"])]
    assert statuses == ["interrupted", "success"], statuses
    assert result["next"]["messages"][0]["content"] == "How do I read a JSON file?"
