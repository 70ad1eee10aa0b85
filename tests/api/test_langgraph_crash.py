"""A LangGraph run survives `kill -9`: a real uvicorn process is SIGKILLed while a run started with the
official Python client is collecting; a new process on the same data dir resumes the session, and
`runs.join` from the same client returns the run's final state."""

from __future__ import annotations

import os
import signal
from pathlib import Path

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
