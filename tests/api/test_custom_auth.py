"""LangGraph custom auth (issue 44): RESEARCH_AUTH names a `langgraph_sdk.Auth` in a file, and the server honours
it as LangGraph Platform does, driven by the official Python SDK (`langgraph_sdk.get_client`) against a real
uvicorn: its authenticate handler decides who calls (every route: REST, LangGraph, WebSocket, MCP), the metadata
its `@auth.on` handler adds is stored on threads and runs, its filters narrow every read and search, `False` is a
403; and the red team's rule holds: bob gets nothing of alice's (404), an admin (permission `admin`) sees both.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from textwrap import dedent

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedError

from research_tool.api.custom_auth import auth_path, filter_matches, load_custom_auth
from research_tool.bench.wiki_replay import WikiReplay
from research_tool.core.errors import BadInputError

from .conftest import OK_BODY, LiveApi, offline_settings, serve

pytestmark = pytest.mark.slow

AUTH_FILE = dedent(
    """
    from langgraph_sdk import Auth

    auth = Auth()
    USERS = {
        "tok-alice": {"identity": "alice", "permissions": ["threads:write"]},
        "tok-bob": {"identity": "bob", "permissions": ["threads:write"]},
        "tok-carol": {"identity": "carol", "permissions": ["admin"]},
    }
    SEEN = []


    @auth.authenticate
    async def authenticate(authorization: str | None, path: str) -> Auth.types.MinimalUserDict:
        token = (authorization or "").partition(" ")[2]
        if token not in USERS:
            raise Auth.exceptions.HTTPException(status_code=401, detail="who are you?")
        return USERS[token]


    @auth.on
    async def owner_only(ctx: Auth.types.AuthContext, value: dict) -> dict | None:
        SEEN.append((ctx.resource, ctx.action, ctx.user.identity))
        if "admin" in ctx.permissions:
            return None
        filters = {"owner": ctx.user.identity}
        if isinstance(value.get("metadata"), dict) or ctx.action in ("create", "create_run"):
            value.setdefault("metadata", {})
            value["metadata"].update(filters)
        return filters


    @auth.on.assistants.search
    async def no_assistants_for_bob(ctx: Auth.types.AuthContext, value: dict) -> bool:
        return ctx.user.identity != "bob"
    """
)
RUN_INPUT = dict(OK_BODY)


@pytest.fixture
async def custom(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> AsyncIterator[LiveApi]:
    (tmp_path / "team_auth.py").write_text(AUTH_FILE)
    settings = offline_settings(tmp_path / "data", wiki[0], auth=f"{tmp_path / 'team_auth.py'}:auth")
    async with serve(settings) as live:
        yield live


def sdk(api: LiveApi, token: str) -> LangGraphClient:
    return get_client(url=api.base_url, api_key=None, headers={"Authorization": f"Bearer {token}"})


def status_of(exc: BaseException) -> int:
    assert isinstance(exc, httpx.HTTPStatusError), repr(exc)
    return exc.response.status_code


async def test_the_handlers_decide_who_sees_what(custom: LiveApi) -> None:
    alice, bob, carol = sdk(custom, "tok-alice"), sdk(custom, "tok-bob"), sdk(custom, "tok-carol")

    thread = await alice.threads.create(metadata={"topic": "subprocess"})
    tid = thread["thread_id"]
    assert thread["metadata"]["owner"] == "alice" and thread["metadata"]["topic"] == "subprocess"  # stored
    values = await alice.runs.wait(tid, "research", input=RUN_INPUT)
    assert isinstance(values, dict) and values["answer"]
    runs = await alice.runs.list(tid)
    assert runs[0]["metadata"]["owner"] == "alice"  # the run's metadata as the handler left it

    # bob: every read, change, stream or run of alice's thread is a 404; his search does not find it
    for call in (
        lambda: bob.threads.get(tid),
        lambda: bob.threads.get_state(tid),
        lambda: bob.threads.get_history(tid),
        lambda: bob.threads.update(tid, metadata={"owner": "bob"}),
        lambda: bob.runs.list(tid),
        lambda: bob.runs.get(tid, runs[0]["run_id"]),
        lambda: bob.runs.join(tid, runs[0]["run_id"]),
        lambda: bob.runs.cancel(tid, runs[0]["run_id"]),
        lambda: bob.runs.wait(tid, "research", input=RUN_INPUT),
        lambda: bob.runs.create(tid, "research", input=RUN_INPUT, if_not_exists="create"),
        lambda: bob.threads.delete(tid),
    ):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await call()
        assert status_of(refused.value) == 404
    assert tid not in {t["thread_id"] for t in await bob.threads.search(limit=100)}
    with pytest.raises(httpx.HTTPStatusError) as taken:
        await bob.threads.create(thread_id=tid, if_exists="do_nothing")
    assert status_of(taken.value) == 409
    with pytest.raises(httpx.HTTPStatusError) as streamed:
        _ = [part async for part in bob.runs.join_stream(tid, runs[0]["run_id"], stream_mode="values")]
    assert status_of(streamed.value) == 404

    # bob's own thread: the handler stamps it his; alice's search does not find it, filtered by metadata
    bobs = await bob.threads.create(metadata={"topic": "json"})
    assert bobs["metadata"]["owner"] == "bob"
    found = {t["thread_id"] for t in await alice.threads.search(limit=100)}
    assert tid in found and bobs["thread_id"] not in found
    assert await alice.threads.search(metadata={"topic": "json"}) == []
    assert await alice.threads.count() == 1

    # the handler's `False` is a 403; an unknown token is the handler's own 401
    with pytest.raises(httpx.HTTPStatusError) as denied:
        await bob.assistants.search()
    assert status_of(denied.value) == 403
    assert await alice.assistants.search()
    with pytest.raises(httpx.HTTPStatusError) as unknown:
        await sdk(custom, "tok-mallory").threads.search()
    assert status_of(unknown.value) == 401 and "who are you?" in unknown.value.response.text

    # carol (permission `admin`): sees both, may change alice's
    everyone = {t["thread_id"] for t in await carol.threads.search(limit=100)}
    assert {tid, bobs["thread_id"]} <= everyone
    assert (await carol.threads.get(tid))["values"]["answer"] == values["answer"]

    # the same identities own REST sessions: bob cannot read alice's thread as a session either
    rest = custom.client
    assert (
        await rest.get(f"/api/research/{tid}/status", headers={"Authorization": "Bearer tok-bob"})
    ).status_code == 404
    assert (
        await rest.get(f"/api/research/{tid}/status", headers={"Authorization": "Bearer tok-alice"})
    ).status_code == 200
    assert (await rest.get("/api/research")).status_code == 401  # no token: the handler refuses
    listed = (await rest.get("/api/research", headers={"Authorization": "Bearer tok-bob"})).json()["sessions"]
    assert tid not in {s["session_id"] for s in listed}

    # the WebSocket asks the handler too: bob's socket to alice's session is closed as for an unknown one
    url = f"{custom.ws_url}/api/research/{tid}/ws"
    async with connect(url, additional_headers={"Authorization": "Bearer tok-bob"}) as ws:
        with contextlib.suppress(ConnectionClosedError):
            async for _ in ws:
                pass
    assert ws.close_code == 4404

    # the handler was called for each kind of request, with the caller's identity
    seen = custom.app.state.custom_auth.handler("threads", "read").__globals__["SEEN"]
    for expected in (
        ("threads", "create", "alice"),
        ("threads", "create_run", "alice"),
        ("threads", "read", "bob"),
        ("threads", "update", "bob"),
        ("threads", "delete", "bob"),
        ("threads", "search", "alice"),
    ):
        assert expected in seen, expected

    await carol.threads.delete(tid)
    with pytest.raises(httpx.HTTPStatusError) as gone:
        await alice.threads.get(tid)
    assert status_of(gone.value) == 404


def test_langgraph_json_names_the_handler(tmp_path: Path) -> None:
    (tmp_path / "team_auth.py").write_text(AUTH_FILE)
    (tmp_path / "langgraph.json").write_text(json.dumps({"graphs": {}, "auth": {"path": "./team_auth.py:auth"}}))
    settings = offline_settings(tmp_path / "data")
    assert auth_path(settings, tmp_path) == "./team_auth.py:auth"
    loaded = load_custom_auth(settings, tmp_path)
    assert loaded is not None and loaded.handler("threads", "read") is not None
    with pytest.raises(BadInputError):
        load_custom_auth(offline_settings(tmp_path / "data", auth=f"{tmp_path / 'team_auth.py'}:missing"), tmp_path)
    with pytest.raises(BadInputError):
        load_custom_auth(offline_settings(tmp_path / "data", auth="json:dumps"), tmp_path)  # not an Auth


def test_filters_match_as_langgraph_documents() -> None:
    metadata = {"owner": "alice", "tags": ["a", "b"]}
    assert filter_matches({"owner": "alice"}, metadata)
    assert filter_matches({"owner": {"$eq": "alice"}}, metadata)
    assert filter_matches({"tags": {"$contains": "a"}}, metadata)
    assert filter_matches({"tags": {"$contains": ["a", "b"]}}, metadata)
    assert not filter_matches({"tags": {"$contains": ["a", "c"]}}, metadata)
    assert not filter_matches({"owner": "bob"}, metadata)
    assert not filter_matches({"owner": {"$regex": ".*"}}, metadata)  # unknown operators match nothing
