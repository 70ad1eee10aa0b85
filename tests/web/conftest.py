"""Fixtures for the web page tests: a real `uvicorn` server subprocess on 127.0.0.1 (offline engine, a
small local corpus written for these tests, Wikipedia pointed at a slow replay server on loopback and
every other provider at a closed port), and Debian's Chromium driven by Playwright with every request
that is not for 127.0.0.1 blocked and recorded (the tests assert that none was attempted).

Screenshots go to `tmp/artifacts/` at the repository root (git-ignored); the tests print their paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from research_tool.bench.server_process import ServerProcess, uvicorn_server
from research_tool.bench.wiki_replay import Page, WikiReplay, build_pages, running_wiki
from research_tool.core.settings import PROVIDER_NAMES
from research_tool.providers.fetching.browser import CHROMIUM_FLAGS, browser_unavailable_reason, find_chromium

UNAVAILABLE = browser_unavailable_reason()
CLOSED_PORT_URL = "http://127.0.0.1:9"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
WIKI_DELAY_S = 0.4  # each replayed Wikipedia answer waits this long: a session lasts long enough to watch
PAGE_CHARS = 2500
TIMEOUT_MS = 60_000
REPO = Path(__file__).resolve().parents[2]

# Documents written for these tests. One title carries markup that must stay text on the page.
CORPUS: dict[str, str] = {
    "subprocess-run.txt": (
        "subprocess.run runs a command with a timeout\n\n"
        "subprocess.run(args, capture_output=True, timeout=5) runs the command described by args and waits for it. "
        "If the timeout expires, the child process is killed and waited for, and TimeoutExpired is raised. "
        "With capture_output=True the standard output and standard error are captured in the CompletedProcess."
    ),
    "timeout-expired.txt": (
        "subprocess.TimeoutExpired is raised when a timeout expires\n\n"
        "TimeoutExpired is raised when the timeout expires while waiting for a child process. "
        "Its output and stderr attributes hold whatever the child wrote before it was killed."
    ),
    "popen-communicate.txt": (
        "Popen.communicate waits for a process with a timeout\n\n"
        "Popen.communicate(input=None, timeout=None) sends data to stdin and reads stdout and stderr until the end. "
        "If the process does not terminate after timeout seconds, a TimeoutExpired exception is raised; "
        "the child process is not killed, so kill it and call communicate again to finish the conversation."
    ),
    "untrusted-title.txt": (
        '<img src=x onerror="window.__pwned=1">Notes on subprocess timeouts <script>window.__pwned=2</script>\n\n'
        "A subprocess timeout makes run() kill the child process after the given number of seconds. "
        "The timeout argument is also accepted by call(), check_call() and check_output()."
    ),
    "asyncio-subprocess.txt": (
        "asyncio subprocesses and timeouts\n\n"
        "asyncio.create_subprocess_exec starts a child process; wrap process.communicate() in asyncio.wait_for "
        "to give it a timeout, and kill the process when the timeout expires."
    ),
}


@dataclass
class Outside:
    """Requests the browser tried to send anywhere but loopback (each one aborted)."""

    attempts: list[str] = field(default_factory=list)


def is_loopback(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about"):
        return True
    return (parts.hostname or "") in LOOPBACK_HOSTS


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """`tmp/artifacts/` at the repository root (git-ignored), kept after the run for a person to look at."""
    path = REPO / "tmp" / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, text in CORPUS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def slow_wiki() -> Iterator[tuple[str, WikiReplay]]:
    pages = [Page(p.pageid, p.title, p.text[:PAGE_CHARS], p.words) for p in build_pages()]
    with running_wiki(delay_s=WIKI_DELAY_S, pages=pages) as served:
        yield served


def server_env(data_dir: Path, corpus: Path, wiki_url: str, **extra: str) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        {
            "RESEARCH_DATA_DIR": str(data_dir),
            "RESEARCH_LLM": "offline",
            "RESEARCH_CORPUS_DIRS": str(corpus),
            "RESEARCH_LOG_LEVEL": "WARNING",
            "RESEARCH_CPU_WORKERS": "0",
            "RESEARCH_CLARIFY_TIMEOUT_S": "120",
            "RESEARCH_WIKIPEDIA_BASE_URL": wiki_url,
            "RESEARCH_WIKIPEDIA_RPS": "500",
        }
    )
    for name in PROVIDER_NAMES:
        if name not in ("wikipedia", "local"):
            env[f"RESEARCH_{name.upper()}_BASE_URL"] = CLOSED_PORT_URL
    env.update(extra)
    return env


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30.0, trust_env=False) as client:
        yield client


@pytest.fixture
async def server(
    tmp_path: Path, corpus_dir: Path, slow_wiki: tuple[str, WikiReplay], http: httpx.AsyncClient
) -> AsyncIterator[ServerProcess]:
    env = server_env(tmp_path / "data", corpus_dir, slow_wiki[0])
    async with uvicorn_server(env, tmp_path / "server", http) as served:
        yield served


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if UNAVAILABLE is not None:
        pytest.skip(f"no browser for the web page tests: {UNAVAILABLE}")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=find_chromium(), args=list(CHROMIUM_FLAGS))
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
def outside() -> Outside:
    return Outside()


async def guard_context(context: Any, outside: Outside) -> None:
    """Abort (and record) every request and WebSocket that is not for loopback."""

    async def on_request(route: Any) -> None:
        if is_loopback(route.request.url):
            await route.fallback()
        else:
            outside.attempts.append(route.request.url)
            await route.abort("blockedbyclient")

    async def on_websocket(ws: Any) -> None:
        if is_loopback(ws.url):
            ws.connect_to_server()
        else:
            outside.attempts.append(ws.url)
            await ws.close(code=1008, reason="blocked by the test")

    await context.route("**/*", on_request)
    await context.route_web_socket(re.compile(".*"), on_websocket)


@dataclass
class PageProblems:
    """Console errors and uncaught exceptions the page produced."""

    errors: list[str] = field(default_factory=list)


@pytest.fixture
async def context(browser: Any, outside: Outside) -> AsyncIterator[Any]:
    ctx = await browser.new_context(viewport={"width": 1360, "height": 900}, accept_downloads=True)
    ctx.set_default_timeout(TIMEOUT_MS)
    await guard_context(ctx, outside)
    try:
        yield ctx
    finally:
        await ctx.close()
