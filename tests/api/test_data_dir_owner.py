"""One process owns a SQLite data dir (issue 22): after a server is killed with SIGKILL mid-session, two
servers started at once on its data dir used to both resume every session and fail them all on duplicate
event numbers. Now one of them takes the data dir and the other exits 2 with one line naming the owner's
PID; so does a CLI run that would write sessions, while `sessions` still reads. The survivor completes every
session with its events numbered 1..N, no gap, no duplicate. Real `research-tool serve` processes on
127.0.0.1. Also: `serve` on a non-loopback host without a token refuses to start."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from research_tool.bench.wiki_replay import Page, running_wiki
from research_tool.core.settings import Settings
from research_tool.runtime.http_server import is_loopback_host, open_serving_refusal
from tests.support.polling import eventually
from tests.support.servers import START_TIMEOUT_S, cli, first_healthy, serve

from .conftest import OK_BODY, free_socket, sse_events
from .test_crash_resume import QUESTIONS, server_env, statuses

SESSIONS = int(os.environ.get("RESEARCH_TEST_OWNER_SESSIONS", "3"))  # the check: 6


def error_lines(process: subprocess.Popen[bytes]) -> list[str]:
    assert process.stderr is not None
    return [line for line in process.stderr.read().decode().splitlines() if line.strip()]


async def exit_code(process: subprocess.Popen[bytes]) -> int | None:
    async def exited() -> bool:
        return process.poll() is not None

    await eventually(exited, within_s=START_TIMEOUT_S, every_s=0.05)
    return process.poll()


async def run_cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *cli(*args), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.slow
async def test_two_servers_on_a_killed_servers_data_dir_one_refused_and_every_session_gapless(
    tmp_path: Path, wiki_pages: list[Page]
) -> None:
    with running_wiki(delay_s=0.4, pages=wiki_pages) as (wiki_url, _):
        env = server_env(tmp_path / "data", wiki_url)
        env.update(RESEARCH_MAX_CONCURRENT_SESSIONS=str(SESSIONS))  # all running when the server is killed
        port = free_socket().getsockname()[1]
        with serve(env, tmp_path, port) as first:
            assert await first_healthy({port: first}) == port
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as client:
                ids = []
                for n in range(SESSIONS):
                    question = f"{QUESTIONS[n % len(QUESTIONS)]} (variant {n})"
                    started = await client.post("/api/research/start", json={**OK_BODY, "query": question})
                    assert started.status_code == 202, started.text
                    ids.append(started.json()["session_id"])

                async def all_running() -> bool:
                    return all(s["status"] == "running" for s in await statuses(client, ids))

                await eventually(all_running)
            first.send_signal(signal.SIGKILL)
            assert first.wait(timeout=10) == -signal.SIGKILL

        ports = [free_socket().getsockname()[1] for _ in range(2)]
        with ExitStack() as stack:
            servers = {p: stack.enter_context(serve(env, tmp_path, p)) for p in ports}
            owner_port = await first_healthy(servers)
            owner = servers[owner_port]
            refused = next(process for p, process in servers.items() if p != owner_port)
            assert await exit_code(refused) == 2
            lines = error_lines(refused)
            assert len(lines) == 1 and f"process {owner.pid}" in lines[0], lines

            (run_code, _, run_err), (list_code, listed, list_err) = await asyncio.gather(
                run_cli(env, "run", "another question", "--providers", "wikipedia"), run_cli(env, "sessions", "--json")
            )
            assert run_code == 2 and run_err.strip().count("\n") == 0 and f"process {owner.pid}" in run_err, run_err
            assert list_code == 0, list_err
            assert {s["session_id"] for s in json.loads(listed)["sessions"]} == set(ids)

            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{owner_port}", timeout=30, trust_env=False
            ) as client:

                async def all_completed() -> bool:
                    now = await statuses(client, ids)
                    assert not any(s["status"] == "failed" for s in now), now
                    return all(s["status"] == "completed" for s in now)

                await eventually(all_completed, within_s=60, every_s=0.1)
                for sid in ids:
                    events = sse_events((await client.get(f"/api/research/{sid}/events", params={"after": 0})).text)
                    seqs = [e["seq"] for e in events]
                    assert seqs == list(range(1, len(seqs) + 1)), f"gap or duplicate in {seqs}"
                    assert events[-1]["type"] == "session_completed"
            # `show` reads beside the live owner, also when it must render the report from the checkpoint
            shutil.rmtree(tmp_path / "data" / "exports" / ids[0], ignore_errors=True)
            show_code, report, show_err = await run_cli(env, "show", ids[0], "--format", "json")
            assert show_code == 0, show_err
            assert json.loads(report)["citations"]


def test_serve_on_a_network_address_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    # 192.0.2.1 (TEST-NET-1) is on no interface here: nothing is ever bound, whatever the code does.
    env = server_env(tmp_path / "data", "http://127.0.0.1:9")
    refused = subprocess.run(cli("serve", "--host", "192.0.2.1", "--port", "8000"), env=env, capture_output=True)
    assert refused.returncode == 2
    lines = [line for line in refused.stderr.decode().splitlines() if line.strip()]
    assert len(lines) == 1 and "RESEARCH_API_TOKEN" in lines[0] and "--allow-unauthenticated" in lines[0], lines


def test_only_a_loopback_host_or_a_token_or_the_flag_lets_serve_start_without_one() -> None:
    no_token = Settings(_env_file=None)  # type: ignore[call-arg]
    with_token = Settings(_env_file=None, api_token="s3cret")  # type: ignore[call-arg]
    for host in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"):
        assert is_loopback_host(host)
        assert open_serving_refusal(no_token, host, allow_unauthenticated=False) is None
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.org"):
        assert not is_loopback_host(host)
        assert open_serving_refusal(no_token, host, allow_unauthenticated=False) is not None
        assert open_serving_refusal(no_token, host, allow_unauthenticated=True) is None
        assert open_serving_refusal(with_token, host, allow_unauthenticated=False) is None
