"""Bad requests get the right 4xx and the JSON error shape `{"error": {"type", "message", "retryable"}}`,
never a 500: one table, one server (with one finished session and one waiting for answers)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedError

from research_tool.bench.wiki_replay import build_pages, running_wiki

from .conftest import QUESTION, LiveApi, offline_settings, serve

IN_MODULE_LOOP = pytest.mark.asyncio(loop_scope="module")  # the tests share one server

UNKNOWN = "0123456789abcdef0123456789abcdef"
OK = {"query": QUESTION, "providers": ["wikipedia"], "fetch": False, "tier": "simple"}


@dataclass
class Sessions:
    api: LiveApi
    done: str  # completed
    waiting: str  # awaiting clarification (not completed, not answerable by /stop races)
    corpus: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sessions(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sessions]:
    root = tmp_path_factory.mktemp("bad_input")
    corpus = root / "corpus"
    corpus.mkdir()
    with running_wiki(delay_s=0.0, pages=build_pages(("subprocess", "json"))) as (url, _):
        settings = offline_settings(root / "data", url, clarify_timeout_s=600.0, corpus_dirs=str(corpus))
        async with serve(settings) as api:
            done = await api.start()
            await api.wait_status(done, "completed")
            waiting = await api.start(query="Python", clarify=True)
            await api.wait_status(waiting, "awaiting_clarification")
            yield Sessions(api, done, waiting, corpus)


def start(**fields: Any) -> dict[str, Any]:
    return {**OK, **fields}


def without(key: str) -> dict[str, Any]:
    return {k: v for k, v in OK.items() if k != key}


# (id, method, path, json body | raw bytes | None, status, error type); {done} / {waiting} / {unknown} are filled in
CASES: list[tuple[str, str, str, Any, int, str]] = [
    ("missing query", "POST", "/api/research/start", without("query"), 422, "validation_error"),
    ("empty query", "POST", "/api/research/start", start(query=""), 422, "validation_error"),
    ("blank query", "POST", "/api/research/start", start(query="   \n "), 422, "validation_error"),
    ("oversized query", "POST", "/api/research/start", start(query="why " * 600), 422, "validation_error"),
    ("query not a string", "POST", "/api/research/start", start(query=42), 422, "validation_error"),
    ("query null", "POST", "/api/research/start", start(query=None), 422, "validation_error"),
    ("unknown tier", "POST", "/api/research/start", start(tier="huge"), 422, "validation_error"),
    ("unknown domain", "POST", "/api/research/start", start(domain="astrology"), 422, "validation_error"),
    ("unknown privacy mode", "POST", "/api/research/start", start(privacy_mode="public"), 422, "validation_error"),
    ("unknown provider", "POST", "/api/research/start", start(providers=["altavista"]), 422, "validation_error"),
    ("empty provider list", "POST", "/api/research/start", start(providers=[]), 422, "validation_error"),
    ("providers not a list", "POST", "/api/research/start", start(providers="wikipedia"), 422, "validation_error"),
    ("unknown format", "POST", "/api/research/start", start(formats=["pdf"]), 422, "validation_error"),
    ("clarify not a bool", "POST", "/api/research/start", start(clarify="maybe"), 422, "validation_error"),
    ("negative time limit", "POST", "/api/research/start", start(max_execution_time_s=-5), 422, "validation_error"),
    ("unknown field", "POST", "/api/research/start", start(should_stop=True), 422, "validation_error"),
    ("body is a list", "POST", "/api/research/start", ["query"], 422, "validation_error"),
    ("malformed JSON", "POST", "/api/research/start", b'{"query": "why', 400, "malformed_json"),
    ("body over the size limit", "POST", "/api/research/start", start(query="x" * 70_000), 413, "payload_too_large"),
    ("provider without its key", "POST", "/api/research/start", start(providers=["tavily"]), 400, "bad_input"),
    ("cloud provider in local_only", "POST", "/api/research/start", start(privacy_mode="local_only"), 400, "bad_input"),
    (
        "corpus outside the server's folders",
        "POST",
        "/api/research/start",
        start(corpus_dirs=["/etc"]),
        400,
        "bad_input",
    ),
    ("corpus path with a NUL byte", "POST", "/api/research/start", start(corpus_dirs=["a\u0000b"]), 400, "bad_input"),
    (
        "query with a lone surrogate",
        "POST",
        "/api/research/start",
        b'{"query": "why \\ud954"}',
        422,
        "validation_error",
    ),
    ("/run with an empty query", "POST", "/run", start(query=""), 422, "validation_error"),
    ("/run with malformed JSON", "POST", "/run", b"{", 400, "malformed_json"),
    ("status of an unknown session", "GET", "/api/research/{unknown}/status", None, 404, "not_found"),
    ("stop of an unknown session", "POST", "/api/research/{unknown}/stop", None, 404, "not_found"),
    ("clarify of an unknown session", "POST", "/api/research/{unknown}/clarify", {"answers": ["a"]}, 404, "not_found"),
    ("report of an unknown session", "GET", "/api/research/{unknown}/report", None, 404, "not_found"),
    ("delete of an unknown session", "DELETE", "/api/research/{unknown}", None, 404, "not_found"),
    ("events of an unknown session", "GET", "/api/research/{unknown}/events", None, 404, "not_found"),
    ("session id too long", "GET", "/api/research/" + "a" * 300 + "/status", None, 422, "validation_error"),
    ("report before completion", "GET", "/api/research/{waiting}/report", None, 409, "conflict"),
    ("report in an unknown format", "GET", "/api/research/{done}/report?format=pdf", None, 422, "validation_error"),
    (
        "clarify a session that is not waiting",
        "POST",
        "/api/research/{done}/clarify",
        {"answers": ["a"]},
        409,
        "conflict",
    ),
    ("clarify with no answers", "POST", "/api/research/{waiting}/clarify", {"answers": []}, 422, "validation_error"),
    (
        "clarify with a blank answer",
        "POST",
        "/api/research/{waiting}/clarify",
        {"answers": [" "]},
        422,
        "validation_error",
    ),
    (
        "clarify answers not a list",
        "POST",
        "/api/research/{waiting}/clarify",
        {"answers": "yes"},
        422,
        "validation_error",
    ),
    (
        "clarify with an unknown field",
        "POST",
        "/api/research/{waiting}/clarify",
        {"answers": ["a"], "x": 1},
        422,
        "validation_error",
    ),
    ("stop a finished session", "POST", "/api/research/{done}/stop", None, 409, "conflict"),
    ("list with limit 0", "GET", "/api/research?limit=0", None, 422, "validation_error"),
    ("list with limit over the page size", "GET", "/api/research?limit=1000", None, 422, "validation_error"),
    ("list with a negative offset", "GET", "/api/research?offset=-1", None, 422, "validation_error"),
    ("list with a non-numeric limit", "GET", "/api/research?limit=ten", None, 422, "validation_error"),
    ("events with a negative after", "GET", "/api/research/{done}/events?after=-1", None, 422, "validation_error"),
    ("unknown route", "GET", "/api/nothing-here", None, 404, "not_found"),
    ("wrong method", "PUT", "/api/research/start", OK, 405, "method_not_allowed"),
]


@IN_MODULE_LOOP
@pytest.mark.parametrize(("name", "method", "path", "body", "status", "error_type"), CASES, ids=[c[0] for c in CASES])
async def test_bad_request_gets_a_4xx_json_error(
    sessions: Sessions, name: str, method: str, path: str, body: Any, status: int, error_type: str
) -> None:
    url = path.format(unknown=UNKNOWN, done=sessions.done, waiting=sessions.waiting)
    if isinstance(body, bytes):
        kwargs: dict[str, Any] = {"content": body, "headers": {"Content-Type": "application/json"}}
    else:
        kwargs = {"json": body} if body is not None else {}
    response = await sessions.api.client.request(method, url, **kwargs)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"type", "message", "retryable"}
    assert error["type"] == error_type
    assert isinstance(error["message"], str) and error["message"]
    assert error["retryable"] is False


@IN_MODULE_LOOP
async def test_a_refused_start_creates_no_session(sessions: Sessions) -> None:
    before = (await sessions.api.client.get("/api/research")).json()["total"]
    refused = await sessions.api.client.post("/api/research/start", json=start(providers=["tavily"]))
    assert refused.status_code == 400 and "tavily" in refused.json()["error"]["message"]
    assert (await sessions.api.client.get("/api/research")).json()["total"] == before


@IN_MODULE_LOOP
async def test_corpus_folder_inside_the_servers_folders_is_accepted(sessions: Sessions) -> None:
    (sessions.corpus / "notes.md").write_text("# Notes\n\nThe subprocess module runs programs.\n")
    response = await sessions.api.client.post(
        "/api/research/start", json=start(providers=["local"], corpus_dirs=[str(sessions.corpus)])
    )
    assert response.status_code == 202, response.text
    await sessions.api.wait_status(response.json()["session_id"], "completed")


@IN_MODULE_LOOP
async def test_chunked_body_over_the_limit_is_refused(sessions: Sessions) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"query": "'
        for _ in range(40):
            yield b"x" * 4096
        yield b'"}'

    response = await sessions.api.client.post(
        "/api/research/start", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "payload_too_large"


@IN_MODULE_LOOP
async def test_websocket_to_an_unknown_session_closes_with_4404(sessions: Sessions) -> None:
    async with connect(f"{sessions.api.ws_url}/api/research/{UNKNOWN}/ws") as ws:
        with pytest.raises(ConnectionClosedError) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4404
    assert UNKNOWN in closed.value.rcvd.reason


@IN_MODULE_LOOP
@pytest.mark.parametrize("after", ["minus-one", "-1", "%C2%B2", "1.5", "9" * 40])
async def test_websocket_with_a_bad_after_closes_with_4400(sessions: Sessions, after: str) -> None:
    async with connect(f"{sessions.api.ws_url}/api/research/{sessions.done}/ws?after={after}") as ws:
        with pytest.raises(ConnectionClosedError) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4400


def test_table_is_big_enough() -> None:
    assert len(CASES) >= 25
    assert len({c[0] for c in CASES}) == len(CASES)
    assert all(400 <= c[4] < 500 for c in CASES)
    assert json.dumps([c[3] for c in CASES if not isinstance(c[3], bytes)])


@IN_MODULE_LOOP
@pytest.mark.parametrize("route", ["/api/research/start", "/run"])
async def test_corpus_path_the_os_refuses_is_bad_input(sessions: Sessions, route: str) -> None:
    """A path component over 255 bytes makes every file call raise OSError (ENAMETOOLONG): 400, not 500."""
    too_long = str(sessions.corpus / ("x" * 300))
    nested_long = str(sessions.corpus / "a" / ("y" * 256) / "b")
    for folder in (too_long, nested_long):
        response = await sessions.api.client.post(route, json=start(providers=["local"], corpus_dirs=[folder]))
        assert response.status_code == 400, response.text
        assert response.json()["error"]["type"] == "bad_input"
