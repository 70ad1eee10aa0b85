"""A LangGraph run survives `kill -9`: a real uvicorn process is SIGKILLed while a run started with the
official Python client is collecting; a new process on the same data dir resumes the session, and
`runs.join` from the same client returns the run's final state."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from research_tool.bench.wiki_replay import Page, running_wiki
from tests.support.polling import eventually

from .conftest import OK_BODY, free_socket
from .test_crash_resume import client_when_healthy, server_env, uvicorn_process


@pytest.mark.slow
async def test_a_run_killed_mid_collect_resumes_and_join_returns_its_final_state(
    tmp_path: Path, wiki_pages: list[Page]
) -> None:
    with running_wiki(delay_s=0.3, pages=wiki_pages) as (wiki_url, _):
        env = server_env(tmp_path / "data", wiki_url)
        port = free_socket().getsockname()[1]
        sdk = get_client(url=f"http://127.0.0.1:{port}", api_key=None)
        with uvicorn_process(env, tmp_path, port) as first:
            async with client_when_healthy(first, port) as client:
                thread = await sdk.threads.create(metadata={"case": "kill-9"})
                tid = thread["thread_id"]
                run = await sdk.runs.create(tid, "research", input=OK_BODY)

                async def collecting() -> bool:
                    status = (await client.get(f"/api/research/{tid}/status")).json()
                    return bool(status["current_phase"] == "collect" and status["sources_found"])

                await eventually(collecting)
                os.kill(first.pid, signal.SIGKILL)
                first.wait(timeout=10)
        with uvicorn_process(env, tmp_path, port) as second:
            async with client_when_healthy(second, port):
                values = await sdk.runs.join(tid, run["run_id"])
                assert isinstance(values, dict) and values["answer"] and values["citations"]
                assert values["stop_reason"] and values["messages"][-1]["type"] == "ai"
                assert (await sdk.runs.get(tid, run["run_id"]))["status"] == "success"
                thread = await sdk.threads.get(tid)
                assert thread["status"] == "idle" and thread["metadata"]["case"] == "kill-9"


THREADS = 12
# One round each: the process is killed as soon as that many regenerates have been answered, while the others
# are at every step of theirs (the server works on them one database write at a time).
KILL_AFTER_ANSWERS = (1, 4, 8)


@pytest.mark.slow
async def test_a_regenerate_killed_at_any_instant_keeps_the_old_round_or_the_new_run(
    tmp_path: Path, wiki_pages: list[Page]
) -> None:
    """`kill -9` while regenerates (`input: null`) replace finished rounds: twelve threads regenerated at once,
    the process killed once 1, 4 or 8 of them have been answered. After the restarts every thread is there, and
    every run the server accepted is there and ends in success."""
    with running_wiki(delay_s=0.0, pages=wiki_pages) as (wiki_url, _):
        env = server_env(tmp_path / "data", wiki_url) | {"RESEARCH_MAX_CONCURRENT_SESSIONS": "32"}
        port = free_socket().getsockname()[1]
        accepted: dict[str, set[str]] = {}
        with uvicorn_process(env, tmp_path, port) as first:
            async with client_when_healthy(first, port) as client:
                for _ in range(THREADS):
                    done = await client.post("/runs/wait", json={"input": OK_BODY, "on_completion": "keep"})
                    assert done.status_code == 200, done.text
                    thread = done.headers["content-location"].split("/")[2]
                    accepted[thread] = set()
        for kill_after in KILL_AFTER_ANSWERS:
            with uvicorn_process(env, tmp_path, port) as server:
                async with client_when_healthy(server, port) as client:
                    for tid in accepted:  # every round idle first: a regenerate replaces a finished round
                        await until_idle(client, tid)
                    sent = [
                        asyncio.create_task(client.post(f"/threads/{tid}/runs", json={"input": None}))
                        for tid in accepted
                    ]
                    pending: set[asyncio.Task[httpx.Response]] = set(sent)
                    while len(sent) - len(pending) < kill_after:
                        _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    os.kill(server.pid, signal.SIGKILL)
                    server.wait(timeout=10)
                    for tid, task in zip(accepted, sent, strict=True):
                        with contextlib.suppress(httpx.HTTPError):
                            answer = await task
                            if answer.status_code == 200:
                                accepted[tid].add(answer.json()["run_id"])
        with uvicorn_process(env, tmp_path, port) as last:
            async with client_when_healthy(last, port) as client:
                for tid, runs in accepted.items():
                    assert (await client.get(f"/threads/{tid}")).status_code == 200, tid
                    assert (await client.get(f"/api/research/{tid}/status")).status_code == 200, tid
                    await until_idle(client, tid)
                    listed = {r["run_id"]: r["status"] for r in (await client.get(f"/threads/{tid}/runs")).json()}
                    assert runs <= set(listed), (tid, runs, listed)  # no accepted run is lost
                    assert all(status == "success" for status in listed.values()), listed
                    state = (await client.get(f"/threads/{tid}/state")).json()
                    assert state["values"]["answer"], tid


async def until_idle(client: httpx.AsyncClient, thread_id: str) -> None:
    async def idle() -> bool:
        answer = await client.get(f"/threads/{thread_id}")
        assert answer.status_code == 200, (thread_id, answer.text)
        return bool(answer.json()["status"] == "idle")

    await eventually(idle, within_s=60)
