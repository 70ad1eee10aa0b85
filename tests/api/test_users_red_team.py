"""Issue 44's red team: two users (alice, bob) and an admin (carol) on one server, over every route of REST,
LangGraph, the WebSocket and SSE streams and MCP. Bob reads, streams, stops, deletes or resumes nothing of alice's
(404 every time, as for an id that does not exist), lists and searches show him only his own, and carol sees both.

`ROUTES` names every route the app serves with how its ownership is probed; `test_every_route_is_probed` fails for
a route the table does not name, so a new route cannot be added without saying who may use it.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import _IncludedRouter
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, TextContent
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedError

from research_tool.api.app import create_app
from research_tool.bench.wiki_replay import WikiReplay
from research_tool.core.settings import Settings
from research_tool.runtime.backends import open_users

from .conftest import OK_BODY, LiveApi, offline_settings, serve

pytestmark = pytest.mark.slow

# kind of each route: owned (bob 404, carol not), list (bob's shows none of alice's, carol's shows both),
# create (what it makes is the caller's own), open (no per-user data: any key), unserved (404 for everyone),
# page (the static page and docs shells: public)
ROUTES: dict[tuple[str, str], str] = {
    ("GET", "/healthz"): "page",
    ("POST", "/api/research/start"): "create",
    ("GET", "/api/research"): "list",
    ("GET", "/api/research/{session_id}/status"): "owned",
    ("POST", "/api/research/{session_id}/stop"): "owned",
    ("POST", "/api/research/{session_id}/clarify"): "owned",
    ("GET", "/api/research/{session_id}/report"): "owned",
    ("DELETE", "/api/research/{session_id}"): "owned",
    ("GET", "/api/research/{session_id}/events"): "owned",
    ("POST", "/run"): "create",
    ("GET", "/metrics"): "open",
    ("GET", "/openapi.json"): "open",
    ("GET", "/api/providers"): "open",
    ("WS", "/api/research/{session_id}/ws"): "owned",
    ("GET", "/ok"): "open",
    ("GET", "/info"): "open",
    ("POST", "/assistants/search"): "open",
    ("POST", "/assistants/count"): "open",
    ("GET", "/assistants/{assistant_id}"): "open",
    ("GET", "/assistants/{assistant_id}/graph"): "open",
    ("GET", "/assistants/{assistant_id}/schemas"): "open",
    ("GET", "/assistants/{assistant_id}/subgraphs"): "open",
    ("POST", "/threads"): "create",
    ("POST", "/threads/search"): "list",
    ("POST", "/threads/count"): "list",
    ("GET", "/threads/{thread_id}"): "owned",
    ("PATCH", "/threads/{thread_id}"): "owned",
    ("DELETE", "/threads/{thread_id}"): "owned",
    ("GET", "/threads/{thread_id}/state"): "owned",
    ("GET", "/threads/{thread_id}/state/{checkpoint_id}"): "owned",
    ("POST", "/threads/{thread_id}/state/checkpoint"): "owned",
    ("POST", "/threads/{thread_id}/state"): "unserved",
    ("POST", "/threads/prune"): "unserved",
    ("POST", "/threads/{thread_id}/history"): "owned",
    ("POST", "/threads/{thread_id}/runs"): "owned",
    ("POST", "/threads/{thread_id}/runs/stream"): "owned",
    ("POST", "/runs/stream"): "create",
    ("POST", "/threads/{thread_id}/runs/wait"): "owned",
    ("POST", "/runs/wait"): "create",
    ("GET", "/threads/{thread_id}/runs"): "owned",
    ("GET", "/threads/{thread_id}/runs/{run_id}"): "owned",
    ("GET", "/threads/{thread_id}/runs/{run_id}/join"): "owned",
    ("GET", "/threads/{thread_id}/runs/{run_id}/stream"): "owned",
    ("POST", "/threads/{thread_id}/runs/{run_id}/cancel"): "owned",
    ("POST", "/mcp"): "owned",  # its tools: research_status, stop_research, get_report (probed below)
    ("GET", "/mcp"): "open",
    ("DELETE", "/mcp"): "open",
    ("GET", "/"): "page",
    ("GET", "/docs"): "page",
    ("GET", "/redoc"): "page",
    ("GET", "/docs-assets/redoc.standalone.js"): "page",
    ("MOUNT", "/docs-assets"): "page",
    ("MOUNT", "/static"): "page",
}
RUN_INPUT = {"input": OK_BODY, "assistant_id": "research"}


def served_routes(app: FastAPI) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()

    def walk(routes: list[Any], prefix: str) -> None:
        for route in routes:
            if isinstance(route, _IncludedRouter):
                walk(route.original_router.routes, prefix + (route.include_context.prefix or ""))
                continue
            path = prefix + route.path
            methods = getattr(route, "methods", None)
            if methods is None:
                found.add(("WS" if "websocket" in type(route).__name__.lower() else "MOUNT", path))
            else:
                found.update((m, path) for m in methods if m != "HEAD")

    walk(app.routes, "")
    return found


def test_every_route_is_probed() -> None:
    """A route that is not in ROUTES has no ownership rule said for it: add it to the table (and its probe)."""
    served = served_routes(create_app(Settings(_env_file=None)))  # type: ignore[call-arg]
    assert served - set(ROUTES) == set(), "routes without an ownership rule in ROUTES"
    assert set(ROUTES) - served == set(), "ROUTES names routes the app no longer serves"


@dataclass
class Team:
    live: LiveApi
    keys: dict[str, str]
    data_dir: Path

    def headers(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[who]}"}

    async def call(self, who: str, method: str, path: str, body: Any = None) -> httpx.Response:
        return await self.live.client.request(method, path, json=body, headers=self.headers(who))


@pytest.fixture
async def team(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> AsyncIterator[Team]:
    settings = offline_settings(tmp_path / "data", wiki[0], max_concurrent_sessions=6)
    async with open_users(settings) as users:
        keys = {"alice": await users.add("alice"), "bob": await users.add("bob")}
        keys["carol"] = await users.add("carol", admin=True)
    async with serve(settings) as live:
        yield Team(live, keys, settings.data_dir)


async def ws_outcome(team: Team, who: str, session_id: str) -> tuple[int | None, int]:
    """(close code, messages received) of the progress WebSocket, the key as a browser sends it."""
    token = base64.urlsafe_b64encode(team.keys[who].encode()).decode().rstrip("=")
    url = f"{team.live.ws_url}/api/research/{session_id}/ws"
    received = 0
    async with connect(url, subprotocols=["research-tool", f"bearer.{token}"]) as ws:  # type: ignore[list-item]
        with contextlib.suppress(ConnectionClosedError):
            async for _ in ws:
                received += 1
    return ws.close_code, received


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def mcp_calls(team: Team, who: str, session_id: str) -> dict[str, CallToolResult]:
    http = create_mcp_http_client(headers=team.headers(who))
    async with http, Client(streamable_http_client(f"{team.live.base_url}/mcp", http_client=http)) as client:
        return {
            name: await client.call_tool(name, {"session_id": session_id})
            for name in ("research_status", "get_report", "stop_research")
        }


async def alices_things(team: Team) -> dict[str, str]:
    """A finished REST session and a finished LangGraph thread (with a run and a checkpoint) of alice's."""
    started = await team.call("alice", "POST", "/api/research/start", OK_BODY)
    assert started.status_code == 202, started.text
    sid = started.json()["session_id"]
    thread = await team.call("alice", "POST", "/threads", {"metadata": {"team": "a"}})
    tid = thread.json()["thread_id"]
    waited = await team.call("alice", "POST", f"/threads/{tid}/runs/wait", RUN_INPUT)
    assert waited.status_code == 200, waited.text
    for _ in range(600):
        status = (await team.call("alice", "GET", f"/api/research/{sid}/status")).json()
        if status["status"] == "completed":
            break
        await team.live.services.runner.until_finished(sid)
    runs = (await team.call("alice", "GET", f"/threads/{tid}/runs")).json()
    state = (await team.call("alice", "GET", f"/threads/{tid}/state")).json()
    return {
        "session_id": sid,
        "thread_id": tid,
        "run_id": runs[0]["run_id"],
        "checkpoint_id": state["checkpoint"]["checkpoint_id"],
        "assistant_id": "research",
    }


OWNED_BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/api/research/{session_id}/clarify"): {"answers": ["yes"]},
    ("PATCH", "/threads/{thread_id}"): {"metadata": {"stolen": True}},
    ("POST", "/threads/{thread_id}/state/checkpoint"): {"checkpoint": {"checkpoint_id": "{checkpoint_id}"}},
    ("POST", "/threads/{thread_id}/history"): {"limit": 3},
    ("POST", "/threads/{thread_id}/runs"): {**RUN_INPUT, "if_not_exists": "create"},
    ("POST", "/threads/{thread_id}/runs/stream"): {**RUN_INPUT, "if_not_exists": "create"},
    ("POST", "/threads/{thread_id}/runs/wait"): {**RUN_INPUT, "if_not_exists": "create"},
}
# Changes an admin's probe must not make before the others have run (checked at the end instead)
DESTRUCTIVE = {("DELETE", "/api/research/{session_id}"), ("DELETE", "/threads/{thread_id}")}
# An admin's probe that would start a new round on alice's thread: checked by bob only
STARTS_A_RUN = {
    ("POST", "/threads/{thread_id}/runs"),
    ("POST", "/threads/{thread_id}/runs/stream"),
    ("POST", "/threads/{thread_id}/runs/wait"),
}


def filled(template: str, ids: dict[str, str]) -> str:
    return template.format(**ids)


def filled_body(body: Any, ids: dict[str, str]) -> Any:
    return json.loads(json.dumps(body).replace("{checkpoint_id}", ids["checkpoint_id"])) if body else body


async def test_bob_gets_nothing_of_alices_and_carol_sees_both(team: Team) -> None:
    ids = await alices_things(team)
    sid, tid = ids["session_id"], ids["thread_id"]
    failures: list[str] = []
    for (method, path), kind in ROUTES.items():
        if kind != "owned" or method in ("WS", "MOUNT") or path == "/mcp":
            continue
        url, body = filled(path, ids), filled_body(OWNED_BODIES.get((method, path)), ids)
        bobs = await team.call("bob", method, url, body)
        if bobs.status_code != 404:
            failures.append(f"bob {method} {path}: {bobs.status_code} {bobs.text[:200]}")
        elif sid in bobs.text and "unknown" not in bobs.text:
            failures.append(f"bob {method} {path}: the 404 shows alice's data")
        if (method, path) in DESTRUCTIVE | STARTS_A_RUN:
            continue
        carols = await team.call("carol", method, url, body)
        if carols.status_code in (401, 403, 404):
            failures.append(f"carol {method} {path}: {carols.status_code} {carols.text[:200]}")
    assert failures == [], "\n".join(failures)

    # a thread id of alice's cannot be taken over by creating it again
    again = await team.call("bob", "POST", "/threads", {"thread_id": tid, "if_exists": "do_nothing"})
    assert again.status_code == 409 and "team" not in again.text

    # the streams: SSE and the WebSocket (the key as a browser's subprotocol)
    assert (await team.call("bob", "GET", f"/api/research/{sid}/events?after=0")).status_code == 404
    assert await ws_outcome(team, "bob", sid) == (4404, 0)
    code, received = await ws_outcome(team, "carol", sid)
    assert code == 1000 and received > 0
    code, received = await ws_outcome(team, "alice", sid)
    assert code == 1000 and received > 0

    # MCP over HTTP: bob's tools find no session of alice's; carol's do
    for name, result in (await mcp_calls(team, "bob", sid)).items():
        assert result.is_error and "not_found" in text_of(result), (name, text_of(result))
    carols = await mcp_calls(team, "carol", sid)
    assert not carols["research_status"].is_error and not carols["get_report"].is_error

    # lists and searches: bob's own only, carol's everyone's
    bob_start = await team.call("bob", "POST", "/api/research/start", OK_BODY)
    bob_sid = bob_start.json()["session_id"]
    bob_thread = (await team.call("bob", "POST", "/threads", {"metadata": {"team": "b"}})).json()["thread_id"]
    listed = {s["session_id"] for s in (await team.call("bob", "GET", "/api/research?limit=100")).json()["sessions"]}
    assert bob_sid in listed and sid not in listed and tid not in listed
    found = {t["thread_id"] for t in (await team.call("bob", "POST", "/threads/search", {"limit": 100})).json()}
    assert bob_thread in found and tid not in found and sid not in found
    searched = (await team.call("bob", "POST", "/threads/search", {"metadata": {"team": "a"}})).json()
    assert searched == []
    assert (await team.call("bob", "POST", "/threads/count", {})).json() == len(found)
    everyone = {
        s["session_id"] for s in (await team.call("carol", "GET", "/api/research?limit=100")).json()["sessions"]
    }
    assert {sid, tid, bob_sid} <= everyone
    carol_found = {t["thread_id"] for t in (await team.call("carol", "POST", "/threads/search", {"limit": 100})).json()}
    assert {tid, bob_thread} <= carol_found
    alices = {s["session_id"] for s in (await team.call("alice", "GET", "/api/research?limit=100")).json()["sessions"]}
    assert sid in alices and bob_sid not in alices

    # what bob starts statelessly or with /run is his: alice cannot see it
    stateless = await team.call("bob", "POST", "/runs/wait", {**RUN_INPUT, "on_completion": "keep"})
    assert stateless.status_code == 200, stateless.text
    stateless_tid = stateless.headers["content-location"].split("/")[2]
    assert (await team.call("alice", "GET", f"/threads/{stateless_tid}")).status_code == 404
    assert (await team.call("bob", "GET", f"/threads/{stateless_tid}")).status_code == 200

    # the unserved routes are unserved for everyone; the open ones answer any key
    for (method, path), kind in ROUTES.items():
        if kind == "unserved":
            assert (await team.call("carol", method, filled(path, ids), {})).status_code == 404
        if kind == "open" and method == "GET" and "{" not in path and path != "/mcp":
            assert (await team.call("bob", method, path)).status_code == 200, path

    # an admin's new round on alice's session (a thread too) leaves it alice's
    rerun = await team.call("carol", "POST", f"/threads/{sid}/runs/wait", RUN_INPUT)
    assert rerun.status_code == 200, rerun.text
    assert (await team.call("alice", "GET", f"/api/research/{sid}/status")).status_code == 200
    assert (await team.call("bob", "GET", f"/threads/{sid}")).status_code == 404
    owners = {
        s["session_id"]: s["owner"] for s in (await team.call("carol", "GET", "/api/research")).json()["sessions"]
    }
    assert owners[sid] == "alice" and owners[bob_sid] == "bob"

    # an admin's delete works on anyone's; afterwards alice's things are gone for her too
    assert (await team.call("bob", "DELETE", f"/api/research/{sid}")).status_code == 404
    assert (await team.call("carol", "DELETE", f"/api/research/{sid}")).status_code == 204
    assert (await team.call("alice", "GET", f"/api/research/{sid}/status")).status_code == 404
    assert (await team.call("bob", "DELETE", f"/threads/{tid}")).status_code == 404
    assert (await team.call("carol", "DELETE", f"/threads/{tid}")).status_code == 204
    assert (await team.call("alice", "GET", f"/threads/{tid}")).status_code == 404

    # no key, a wrong key, a revoked key: 401 (a server with users is never open)
    assert (await team.live.client.get("/api/research")).status_code == 401
    wrong = team.keys["bob"][:-4] + "AAAA"
    assert (await team.live.client.get("/api/research", headers={"X-Api-Key": wrong})).status_code == 401
    assert (await team.live.client.get("/api/research", headers={"X-Api-Key": team.keys["bob"]})).status_code == 200
    assert await team.live.services.users.revoke("bob", actor="carol")
    assert (await team.call("bob", "GET", "/api/research")).status_code == 401

    # the audit log names who did what, never a key
    rows = await team.live.services.users.audit_rows(limit=1000)
    seen = {(r.actor, r.action, r.target) for r in rows}
    assert ("alice", "start", sid) in seen and ("carol", "delete", sid) in seen and ("carol", "delete", tid) in seen
    assert ("carol", "user_revoked", "bob") in seen
    assert not any(key in json.dumps([r.__dict__ for r in rows]) for key in team.keys.values())


async def test_keys_never_reach_logs_stores_or_messages(
    tmp_path: Path, wiki: tuple[str, WikiReplay], capfd: pytest.CaptureFixture[str]
) -> None:
    """Every key (users', the token, wrong ones) is sent around a server logging at DEBUG; none appears in its
    output, in any file of its data dir (databases, WAL, exports) or in an answer."""
    token = "token-" + "x7" * 20
    settings = offline_settings(tmp_path / "data", wiki[0], api_token=token, log_level="DEBUG")
    async with open_users(settings) as users:
        keys = [await users.add("alice"), await users.add("carol", admin=True)]
    wrong = keys[0][:-6] + "ZZZZZZ"
    answers: list[str] = []
    async with serve(settings) as live:
        for key in [*keys, token, wrong]:
            headers = {"X-Api-Key": key}
            started = await live.client.post("/api/research/start", json=OK_BODY, headers=headers)
            answers.append(started.text)
            if started.status_code == 202:
                sid = started.json()["session_id"]
                await live.services.runner.until_finished(sid)
                for fmt in ("json", "md"):
                    report = await live.client.get(f"/api/research/{sid}/report?format={fmt}", headers=headers)
                    answers.append(report.text)
            answers.append((await live.client.get("/api/research", headers=headers)).text)
            bearer = {"Authorization": f"Bearer {key}"}
            answers.append((await live.client.post("/threads/search", json={}, headers=bearer)).text)
            answers.append((await live.client.post("/mcp", json={}, headers=bearer)).text)
            answers.append((await live.client.get("/metrics", headers=bearer)).text)
    captured = capfd.readouterr()
    assert "server_started" in captured.out + captured.err  # the server's own log lines were captured
    secrets_sent = [*keys, token, wrong]
    for secret in secrets_sent:
        assert secret not in captured.out and secret not in captured.err
        assert not any(secret in answer for answer in answers)
        for path in settings.data_dir.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
