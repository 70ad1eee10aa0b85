"""A chat UI served from this machine (Agent Chat UI on http://localhost:3000) reaches `research-tool serve`
on its default loopback address with nothing configured: the CORS preflight of `/threads/search` answers
with the page's origin. Only pages of this machine are allowed, only on a loopback-only server; a server on
any other address allows only RESEARCH_CORS_ORIGINS (tests/api/test_auth.py, test_host_guard.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from research_tool.bench.wiki_replay import WikiReplay
from research_tool.runtime.http_server import APP_FACTORY, LOOPBACK_APP_FACTORY, app_factory
from tests.support.polling import eventually

from .conftest import OK_BODY, LiveApi, free_socket, offline_settings, serve
from .test_crash_resume import client_when_healthy, server_env

LOCAL_UI = "http://localhost:3000"
PREFLIGHT = {
    "Origin": LOCAL_UI,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "content-type,x-api-key",
}


@pytest.mark.parametrize(
    ("host", "factory"),
    [
        ("127.0.0.1", LOOPBACK_APP_FACTORY),
        ("localhost", LOOPBACK_APP_FACTORY),
        ("::1", LOOPBACK_APP_FACTORY),
        ("0.0.0.0", APP_FACTORY),
        ("192.168.1.5", APP_FACTORY),
        ("myhost.example", APP_FACTORY),
    ],
)
def test_only_a_loopback_server_allows_local_pages(host: str, factory: str) -> None:
    assert app_factory(host) == factory


@contextmanager
def serve_process(env: dict[str, str], cwd: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """`research-tool serve` on 127.0.0.1, as `make serve` starts it."""
    command = [sys.executable, "-m", "research_tool", "serve", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()


async def test_serve_on_loopback_answers_a_local_ui_preflight(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> None:
    port = free_socket().getsockname()[1]
    with serve_process(server_env(tmp_path / "data", wiki[0]), tmp_path, port) as process:
        async with client_when_healthy(process, port) as client:
            for path in ("/threads/search", "/threads", "/api/research/start"):
                allowed = await client.options(path, headers=PREFLIGHT)
                assert allowed.status_code == 200, (path, allowed.text)
                assert allowed.headers["access-control-allow-origin"] == LOCAL_UI
                assert "x-api-key" in allowed.headers["access-control-allow-headers"].lower()
                assert "access-control-allow-credentials" not in allowed.headers
            info = await client.get("/info", headers={"Origin": "http://127.0.0.1:3000"})
            assert info.status_code == 200 and info.headers["access-control-allow-origin"] == "http://127.0.0.1:3000"
            for foreign in ("http://evil.example", "http://localhost.evil.example:3000", "https://localhost:3000"):
                refused = await client.options("/threads/search", headers={**PREFLIGHT, "Origin": foreign})
                assert "access-control-allow-origin" not in refused.headers, foreign
            # The local page may also read a progress stream (the Origin guard of the streams); others may not
            started = await client.post("/api/research/start", json={**OK_BODY, "query": "subprocess timeout"})
            session_id = started.json()["session_id"]

            async def finished() -> bool:
                status = (await client.get(f"/api/research/{session_id}/status")).json()
                return bool(status["status"] == "completed")

            await eventually(finished)
            events = f"/api/research/{session_id}/events"
            assert (await client.get(events, headers={"Origin": LOCAL_UI})).status_code == 200
            assert (await client.get(events, headers={"Origin": "http://evil.example"})).status_code == 403


async def test_an_app_not_known_to_be_loopback_allows_no_local_page(
    tmp_path: Path, wiki: tuple[str, WikiReplay]
) -> None:
    api: LiveApi
    async with serve(offline_settings(tmp_path / "data", wiki[0])) as api:
        refused = await api.client.options("/threads/search", headers=PREFLIGHT)
        assert "access-control-allow-origin" not in refused.headers
