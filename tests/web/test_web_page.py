"""The web page at `/`, in Debian's Chromium against a real server subprocess, with every request that is
not for 127.0.0.1 blocked: a question runs to a report (live phases, cycles, saturation and sources on
the way; citations link to the source list; exports download), a session is stopped, a clarifying
question is answered, a dropped WebSocket reconnects with `after=N` and a reload mid-session misses
and repeats nothing, and past sessions are listed and deleted. Text from sources stays text."""

from __future__ import annotations

import asyncio
import json
import typing
from pathlib import Path
from typing import Any

import httpx
import pytest

from research_tool.bench.server_process import ServerProcess, uvicorn_server
from research_tool.bench.wiki_replay import WikiReplay
from research_tool.models.domain import DomainName
from research_tool.models.request import PrivacyMode
from research_tool.models.tiers import TierName

from .conftest import TIMEOUT_MS, Outside, server_env

# the browser first: without one every test skips before its server subprocess and replay server start
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("browser")]

QUESTION = "How do I run a subprocess with a timeout and capture its output?"
TOKEN = "web-page-test-token"


# --- helpers -----------------------------------------------------------------------------------------


class Watched:
    """A page with its console errors and uncaught exceptions recorded."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))


async def open_page(context: Any, base_url: str) -> Watched:
    page = await context.new_page()
    watched = Watched(page)
    await page.goto(base_url + "/")
    await page.wait_for_selector("#provider-list input[value='local']")
    return watched


async def ask(page: Any, question: str, *, providers: list[str], tier: str = "", clarify: bool = False) -> str:
    await page.fill("#question", question)
    await page.select_option("#tier", tier)
    for name in providers:
        await page.check(f"#provider-list input[value='{name}']")
    if clarify:
        await page.check("#clarify")
    await page.click("#start-button")
    await page.wait_for_url("**/?session=*")
    session_id: str = await page.evaluate("new URLSearchParams(location.search).get('session')")
    return session_id


async def wait_for_report(page: Any) -> None:
    await page.wait_for_selector("#report:not([hidden]) #answer", timeout=TIMEOUT_MS)


async def logged_seqs(page: Any) -> list[int]:
    seqs: list[str] = await page.eval_on_selector_all("#event-log li", "items => items.map(i => i.dataset.seq)")
    return [int(s) for s in seqs]


async def server_events(
    http: httpx.AsyncClient, base_url: str, session_id: str, token: str | None = None
) -> list[dict[str, Any]]:
    """Every stored event of a finished session, from the SSE route (it ends after the final event)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = await http.get(f"{base_url}/api/research/{session_id}/events", params={"after": 0}, headers=headers)
    events = []
    for frame in response.text.split("\n\n"):
        data = [line[len("data: ") :] for line in frame.splitlines() if line.startswith("data: ")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


async def assert_log_is_complete(
    page: Any, http: httpx.AsyncClient, base_url: str, session_id: str
) -> list[dict[str, Any]]:
    events = await server_events(http, base_url, session_id)
    assert events and events[-1]["type"] == "session_completed"
    assert await logged_seqs(page) == [e["seq"] for e in events] == list(range(1, len(events) + 1))
    return events


def assert_clean(watched: Watched, outside: Outside) -> None:
    assert outside.attempts == [], f"the page tried to reach outside loopback: {outside.attempts}"
    assert watched.errors == [], watched.errors


# --- a whole session -----------------------------------------------------------------------------------


async def test_a_question_runs_to_a_cited_report(
    server: ServerProcess, context: Any, outside: Outside, http: httpx.AsyncClient, artifacts_dir: Path
) -> None:
    watched = await open_page(context, server.base_url)
    page = watched.page

    # the form offers what the API accepts
    for select, literal in (("#tier", TierName), ("#domain", DomainName), ("#privacy", PrivacyMode)):
        values = await page.eval_on_selector_all(f"{select} option", "os => os.map(o => o.value).filter(Boolean)")
        assert sorted(values) == sorted(typing.get_args(literal)), select
    unavailable = await page.eval_on_selector_all("#provider-list input:disabled", "inputs => inputs.map(i => i.value)")
    assert "tavily" in unavailable and "local" not in unavailable  # no key for tavily; the corpus is configured

    session_id = await ask(page, QUESTION, providers=["local"], tier="simple")
    await wait_for_report(page)

    # the live view: phases, cycles, saturation per cycle, sources as they arrived
    events = await assert_log_is_complete(page, http, server.base_url, session_id)
    found = [e for e in events if e["type"] == "source_found"]
    cycles = [e for e in events if e["type"] == "saturation"]
    assert found and cycles
    assert await page.locator("#live-sources li").count() == len(found)
    assert await page.locator("#saturation-rows tr").count() == len(cycles)
    assert await page.text_content("#session-cycle") == str(cycles[-1]["data"]["iteration"])
    assert (await page.text_content("#session-status")) == "completed"
    assert await page.is_hidden("#stop-button")

    # the report: the answer first, its [n] markers link into the source list, findings carry marks
    report = (await http.get(f"{server.base_url}/api/research/{session_id}/report")).json()
    answer_text = await page.text_content("#answer")
    assert answer_text and answer_text.strip()
    cite_targets = await page.eval_on_selector_all("#answer a.cite", "links => links.map(a => a.getAttribute('href'))")
    assert cite_targets, "the answer's citations are links"
    for target in cite_targets:
        assert await page.locator(target).count() == 1, target
    assert await page.locator("#sources li").count() == len(report["citations"])
    on_question = [f for f in report["findings"] if f["bears_on_question"]]
    assert await page.locator("#findings li.finding").count() == len(on_question)
    also = len(report["findings"]) - len(on_question)  # listed under "Also in the sources", with no mark
    assert await page.locator("#also-in-sources li.finding").count() == also
    assert await page.locator("#also-in-sources .mark").count() == 0
    verified = sum(1 for f in on_question if f["verified"] and not f["contradictions"])
    assert await page.locator("#findings .mark.verified").count() == verified
    await page.click("#answer a.cite >> nth=0")
    assert await page.evaluate("location.hash") == cite_targets[0]
    if report.get("short_answer"):
        assert await page.text_content("#short-answer")

    # text from the sources stays text: the markup in a document's title is shown, never run
    live_text = await page.text_content("#live-sources")
    assert '<img src=x onerror="window.__pwned=1">' in (live_text or "")
    assert await page.evaluate("window.__pwned") is None
    assert await page.locator("main img").count() == 0

    # exports download with the API's content
    for fmt, marker in (("md", "# "), ("json", '"session_id"'), ("html", "<html"), ("bib", "@")):
        async with page.expect_download() as download_info:
            await page.click(f"#report button[data-format='{fmt}']")
        download = await download_info.value
        assert download.suggested_filename == f"research-{session_id}.{fmt}"
        content = await asyncio.to_thread(Path(await download.path()).read_text, encoding="utf-8")
        assert marker in content, (fmt, content[:200])

    shot = artifacts_dir / "web-report.png"
    await page.screenshot(path=str(shot), full_page=True)
    print(f"\nscreenshot of the finished report: {shot}")

    # the session list shows it; deleting it removes it here and on the server
    item = page.locator(f"#session-list li[data-session-id='{session_id}']")
    assert QUESTION in (await item.text_content() or "")
    page.once("dialog", lambda dialog: dialog.accept())
    await item.locator("button.delete").click()
    await page.wait_for_url(f"{server.base_url}/")
    await item.wait_for(state="detached")
    assert (await http.get(f"{server.base_url}/api/research/{session_id}/status")).status_code == 404
    assert_clean(watched, outside)


async def test_stop_and_clarify_from_the_page(
    server: ServerProcess, context: Any, outside: Outside, http: httpx.AsyncClient
) -> None:
    watched = await open_page(context, server.base_url)
    page = watched.page

    # stop: a session on the slow Wikipedia replay is stopped once it has found something
    session_id = await ask(page, QUESTION, providers=["wikipedia"], tier="deep")
    await page.wait_for_selector("#live-sources li")
    await page.click("#stop-button")
    await wait_for_report(page)
    status = (await http.get(f"{server.base_url}/api/research/{session_id}/status")).json()
    assert status["status"] == "completed" and status["stop_reason"] == "user_requested"
    assert "completed: stopped at the user's request" in (await page.text_content("#report") or "")
    assert await page.locator("#event-log li[data-type='stop_requested']").count() == 1
    await assert_log_is_complete(page, http, server.base_url, session_id)

    # clarify: an ambiguous question waits for answers given on the page
    await page.click("#new-link")
    session_id = await ask(page, "Python", providers=["local"], tier="simple", clarify=True)
    await page.wait_for_selector("#clarify-card:not([hidden]) input[name='answer']")
    assert (await page.text_content("#session-status")) == "awaiting clarification"
    await page.fill("#answer-0", "subprocess timeouts")
    await page.click("#clarify-button")
    await wait_for_report(page)
    assert await page.is_hidden("#clarify-card")
    report = (await http.get(f"{server.base_url}/api/research/{session_id}/report")).json()
    assert "subprocess timeouts" in report["refined_query"]
    await assert_log_is_complete(page, http, server.base_url, session_id)
    assert_clean(watched, outside)


async def test_a_dropped_connection_and_a_reload_miss_and_repeat_nothing(
    server: ServerProcess, context: Any, outside: Outside, http: httpx.AsyncClient
) -> None:
    watched = await open_page(context, server.base_url)
    page = watched.page
    urls: list[str] = []
    drop_after = 6

    async def flaky(ws: Any) -> None:
        """The first connection is cut after a few events; later ones pass everything through."""
        urls.append(ws.url)
        first = len(urls) == 1
        upstream = ws.connect_to_server()
        sent = 0

        async def forward(message: str | bytes) -> None:
            nonlocal sent
            if first and sent >= drop_after:
                return
            ws.send(message)
            sent += 1
            if first and sent == drop_after:
                await ws.close(code=4000, reason="dropped by the test")

        upstream.on_message(forward)

    await page.route_web_socket("**/api/research/*/ws*", flaky)
    session_id = await ask(page, QUESTION, providers=["wikipedia"], tier="simple")
    await wait_for_report(page)
    assert len(urls) >= 2
    assert urls[0].endswith("?after=0") and urls[1].endswith(f"?after={drop_after}")
    await assert_log_is_complete(page, http, server.base_url, session_id)

    # a reload mid-session replays the stored events and follows the rest live (a deep session on the slow
    # replay runs far longer than this takes; the page stops it once the reload has caught up)
    await page.click("#new-link")
    session_id = await ask(page, QUESTION, providers=["wikipedia"], tier="deep")
    await page.wait_for_selector("#live-sources li")
    await page.reload()
    await page.wait_for_selector("#live-sources li")
    status = (await http.get(f"{server.base_url}/api/research/{session_id}/status")).json()
    assert status["status"] == "running", "the reload happened mid-session"
    await page.click("#stop-button")
    await wait_for_report(page)
    await assert_log_is_complete(page, http, server.base_url, session_id)
    assert_clean(watched, outside)


# --- a server with a token ------------------------------------------------------------------------------


async def test_with_a_token_the_page_asks_once_and_streams_with_it(
    tmp_path: Path,
    corpus_dir: Path,
    slow_wiki: tuple[str, WikiReplay],
    http: httpx.AsyncClient,
    context: Any,
    outside: Outside,
) -> None:
    env = server_env(tmp_path / "data", corpus_dir, slow_wiki[0], RESEARCH_API_TOKEN=TOKEN)
    async with uvicorn_server(env, tmp_path / "server", http) as secured:
        page = await context.new_page()
        watched = Watched(page)
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url) if r.url.endswith("/api/providers") else None)
        await page.goto(secured.base_url + "/")
        await page.wait_for_selector("#token-dialog[open]")
        await page.fill("#token-input", "not-the-token")
        await page.click("#token-button")
        await page.wait_for_selector("#token-dialog[open] #token-error:not([hidden])")
        await page.fill("#token-input", TOKEN)
        await page.click("#token-button")
        await page.wait_for_selector("#provider-list input[value='local']")
        assert await page.evaluate("sessionStorage.getItem('research-tool.token')") == TOKEN

        await ask(page, QUESTION, providers=["local"], tier="simple")
        await wait_for_report(page)  # the WebSocket carried the token (as its subprotocol)
        assert await page.locator("#event-log li[data-type='session_completed']").count() == 1

        await page.reload()  # same tab: the token is remembered, nothing asks again
        await wait_for_report(page)
        assert await page.locator("#token-dialog[open]").count() == 0
        await page.goto(secured.base_url + "/docs")  # the docs fetch /openapi.json with the tab's token
        await page.wait_for_selector(".swagger-ui .opblock-summary-path")
        assert await page.is_hidden("#token-box")
        watched.errors = [e for e in watched.errors if "401" not in e]  # the refused first calls
        assert_clean(watched, outside)


async def test_with_users_the_page_asks_for_a_key_and_says_whose_sessions_it_lists(
    tmp_path: Path,
    corpus_dir: Path,
    slow_wiki: tuple[str, WikiReplay],
    http: httpx.AsyncClient,
    context: Any,
    outside: Outside,
) -> None:
    """Issue 44: a server with users asks for the key once (this tab's sessionStorage); alice's list is titled hers
    and holds only her sessions; an admin's list is everyone's, each session with its owner."""
    from research_tool.core.settings import Settings
    from research_tool.runtime.backends import open_users

    data_dir = tmp_path / "data"
    async with open_users(Settings(_env_file=None, data_dir=data_dir)) as users:  # type: ignore[call-arg]
        alice, carol = await users.add("alice"), await users.add("carol", admin=True)
    env = server_env(data_dir, corpus_dir, slow_wiki[0])
    async with uvicorn_server(env, tmp_path / "server", http) as served:
        page = await context.new_page()
        watched = Watched(page)
        await page.goto(served.base_url + "/")
        await page.wait_for_selector("#token-dialog[open]")
        await page.fill("#token-input", alice)
        await page.click("#token-button")
        await page.wait_for_selector("#provider-list input[value='local']")
        await ask(page, QUESTION, providers=["local"], tier="simple")
        await wait_for_report(page)
        await page.click("#refresh-sessions")
        await page.locator("#sessions-title", has_text="Sessions of alice").wait_for()
        assert await page.locator("#session-list li").count() == 1
        assert await page.locator(".session-owner").count() == 0

        await page.evaluate(f"sessionStorage.setItem('research-tool.token', {carol!r})")
        await page.goto(served.base_url + "/")
        await page.locator("#sessions-title", has_text="Sessions of every user (you: carol, admin)").wait_for()
        await page.wait_for_selector(".session-owner")
        assert await page.locator(".session-owner").all_inner_texts() == ["alice"]
        watched.errors = [e for e in watched.errors if "401" not in e]  # the first, keyless calls
        assert_clean(watched, outside)


# --- the API docs, offline ---------------------------------------------------------------------------------


async def test_docs_and_redoc_render_without_the_internet(
    server: ServerProcess, context: Any, outside: Outside
) -> None:
    page = await context.new_page()
    watched = Watched(page)
    await page.goto(server.base_url + "/docs")
    await page.wait_for_selector(".swagger-ui .opblock-summary-path")
    paths = await page.eval_on_selector_all(".opblock-summary-path", "ps => ps.map(p => p.textContent)")
    assert any("/api/research/start" in p for p in paths)

    await page.goto(server.base_url + "/redoc")
    await page.wait_for_selector("#redoc .api-content h1, #redoc [role='navigation']")
    assert "Research Tool" in (await page.text_content("#redoc") or "")
    # ReDoc's sidebar logo is served by the server itself (api/routes/pages.py), so nothing is blocked
    assert_clean(watched, outside)


# --- the report view with fields a run on the test corpus does not produce ----------------------------------

HOSTILE = '<img src=x onerror="window.__pwned=3">'
CRAFTED_REPORT: dict[str, Any] = {
    "session_id": "0" * 32,
    "query": "Does the timeout kill the child?",
    "refined_query": "Does the timeout kill the child?",
    "domain": "technical",
    "tier": "simple",
    "privacy_mode": "cloud_allowed",
    "status": "completed",
    "stop_reason": "fact_saturation",
    "short_answer": f"Yes: run() kills it [1]. {HOSTILE}",
    "answered": False,
    "answer": f"run() kills the child [1] but communicate() does not [2].\n\n- a bullet {HOSTILE} [3]\n\n_A note._",
    "findings": [
        {"statement": "run() kills the child. [1]", "citations": ["[1]"], "confidence": 0.8, "verified": True,
         "contradictions": []},
        {"statement": "communicate() kills the child. [2]", "citations": ["[2]"], "confidence": 0.5,
         "verified": False, "contradictions": [f"communicate() does not kill the child {HOSTILE}"]},
        {"statement": "Barriers can be broken. [2]", "citations": ["[2]"], "confidence": 0.5, "verified": False,
         "contradictions": [], "bears_on_question": False},
    ],
    "citations": [
        {"id": "[1]", "title": f"Docs {HOSTILE}", "url": "https://docs.example.org/subprocess", "type": "web",
         "location": "docs.example.org", "provider": "tavily", "authors": [], "year": None, "doi": None,
         "retrieved_at": "2026-01-01T00:00:00+00:00"},
        {"id": "[2]", "title": "Scripted", "url": "javascript:window.__pwned=4", "type": "web", "location": "x",
         "provider": "brave", "authors": ["A. Author"], "year": 2024, "doi": "10.1/x",
         "retrieved_at": "2026-01-01T00:00:00+00:00"},
    ],
    "entities": [],
    "gaps": [f"nothing on Windows {HOSTILE}"],
    "saturation": [],
    "metadata": {"timestamp": "2026-01-01T00:00:00+00:00", "engine": "offline", "model": "offline",
                 "token_count": 0, "iterations": 1, "duration_s": 1.0, "provider_calls": 2, "access_failures": 0,
                 "degraded_mode": False},
}  # fmt: skip
RENDER = """async (report) => {
  const { renderReport } = await import("/static/report.js");
  const box = document.getElementById("report");
  renderReport(box, report, { onExport: () => {} });
  box.hidden = false;
}"""


async def test_the_report_view_shows_the_short_answer_marks_and_keeps_hostile_text_inert(
    server: ServerProcess, context: Any, outside: Outside
) -> None:
    watched = await open_page(context, server.base_url)
    page = watched.page
    await page.evaluate(RENDER, CRAFTED_REPORT)

    first = await page.eval_on_selector("#report", "r => r.querySelector('p').id")
    assert first == "short-answer"  # the short answer comes before everything else
    assert HOSTILE in (await page.text_content("#short-answer") or "")
    assert await page.locator("#report .not-answered").count() == 1
    assert await page.locator("#findings .mark.verified").count() == 1
    assert await page.locator("#findings .mark.contradicted").count() == 1
    assert await page.locator("#findings li.finding").count() == 2  # the finding off the question is not among them
    also = page.locator("#also-in-sources li")
    assert await also.count() == 1 and await page.locator("#also-in-sources .mark").count() == 0
    assert "Barriers can be broken" in (await also.text_content() or "")
    assert "does not kill the child" in (await page.text_content("#findings .contradictions") or "")
    assert await page.locator("#answer ul li").count() == 1 and await page.locator("#answer .note").count() == 1
    hrefs = await page.eval_on_selector_all("#report a", "links => links.map(a => a.getAttribute('href'))")
    assert "https://docs.example.org/subprocess" in hrefs
    assert not [h for h in hrefs if not h.startswith(("#source-", "https://"))], hrefs
    assert await page.locator("#report img").count() == 0
    assert await page.evaluate("window.__pwned") is None

    # a report without the newer fields renders without them
    plain = {k: v for k, v in CRAFTED_REPORT.items() if k not in ("short_answer", "answered")}
    await page.evaluate(RENDER, plain)
    assert await page.locator("#short-answer").count() == 0
    assert await page.locator("#report .not-answered").count() == 0
    assert await page.locator("#answer a.cite").count() == 2  # [3] names no listed source: it stays text
    assert "[3]" in (await page.text_content("#answer ul") or "")
    assert_clean(watched, outside)
