"""LangGraph's server protocol (assistants, threads, runs, SSE streams) in the shapes the official SDKs parse,
behind the API's token (`Authorization: Bearer` or the SDKs' `x-api-key`). One assistant, graph `research`;
a thread is a research session. Not served: crons, the store, assistant CRUD and versions (docs/langgraph.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import AfterValidator

from research_tool import __version__
from research_tool.api.auth import Caller, require_token
from research_tool.api.custom_auth import filter_matches
from research_tool.api.errors import ApiError
from research_tool.api.langgraph.bodies import (
    GRAPH_ID,
    STREAM_MODES,
    AssistantSearch,
    CheckpointRequest,
    HistoryRequest,
    RunCreate,
    StreamModeName,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
)
from research_tool.api.langgraph.schemas import graph_json, graph_schemas
from research_tool.api.langgraph.service import CALLER, FILTERS, LangGraphProtocol
from research_tool.api.langgraph.shapes import assistant, assistants, is_assistant, run_json
from research_tool.api.langgraph.streaming import RunStream
from research_tool.api.trace_context import CallerTrace
from research_tool.core.untrusted_text import refuse_unsafe

langgraph = APIRouter(tags=["langgraph"], dependencies=[Depends(require_token)], include_in_schema=False)

ThreadId = Annotated[str, PathParam(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
# Run and checkpoint ids: no NUL or other control character (Postgres refuses NUL in text: the same 422 on
# every backend, never its DataError as a 500); an unknown id is a 404.
RunId = Annotated[str, PathParam(min_length=1, max_length=64), AfterValidator(refuse_unsafe)]
CheckpointId = Annotated[str, PathParam(min_length=1, max_length=64), AfterValidator(refuse_unsafe)]


async def protocol_of(request: Request, caller: Caller) -> LangGraphProtocol:
    """The protocol, acting for `caller` for the rest of the request (service.CALLER): a thread of anyone else's
    is unknown (404), searches show only the caller's own (an admin's: everyone's)."""
    protocol: LangGraphProtocol | None = getattr(request.app.state, "langgraph", None)
    if protocol is None:
        raise ApiError(503, "the server is starting or stopping", retryable=True)
    CALLER.set(caller)
    return protocol


Protocol = Annotated[LangGraphProtocol, Depends(protocol_of)]


async def authorize(request: Request, caller: Any, resource: str, action: str, value: dict[str, Any]) -> dict[str, Any]:
    """A RESEARCH_AUTH handler's say on (resource, action) (api/custom_auth.py): `value` as it changed it (the
    metadata it added), its filter kept for the rest of the request (FILTERS: the threads it must hold on)."""
    custom = getattr(request.app.state, "custom_auth", None)
    if custom is not None:
        found = await custom.authorize(caller, resource, action, value)
        if found:
            FILTERS.set((*FILTERS.get(), found))
    return value


def on(resource: str, action: str) -> Any:
    """A route dependency: the handler for (resource, action) with the path's ids as its value."""

    async def check(request: Request, caller: Caller) -> None:
        await authorize(request, caller, resource, action, dict(request.path_params))

    return Depends(check)


THREAD_READ, THREAD_UPDATE, THREAD_DELETE = on("threads", "read"), on("threads", "update"), on("threads", "delete")
ASSISTANT_READ = on("assistants", "read")


def assistant_allowed(shown: dict[str, Any]) -> bool:
    return all(filter_matches(f, shown.get("metadata") or {}) for f in FILTERS.get())


async def run_value(request: Request, caller: Any, thread_id: str | None, body: RunCreate) -> dict[str, Any] | None:
    """`threads.create_run`: the run's metadata as the handler left it goes on the run (and on a thread the run
    creates); returns that metadata when a handler was called, None otherwise."""
    if getattr(request.app.state, "custom_auth", None) is None:
        return None
    value: dict[str, Any] = {
        "thread_id": thread_id,
        "assistant_id": body.assistant_id,
        "run_id": None,
        "status": "pending",
        "metadata": dict(body.metadata or {}),
        "prevent_insert_if_inflight": True,
        "multitask_strategy": body.multitask_strategy,
        "if_not_exists": body.if_not_exists,
        "after_seconds": 0,
        "kwargs": body.model_dump(mode="json", exclude_none=True),
    }
    await authorize(request, caller, "threads", "create_run", value)
    metadata = value.get("metadata")
    body.metadata = dict(metadata) if isinstance(metadata, dict) else {}
    return body.metadata


def run_location(thread_id: str, run_id: str) -> str:
    return f"/threads/{thread_id}/runs/{run_id}"


# --- server ----------------------------------------------------------------------------------------


@langgraph.get("/ok")
async def ok() -> dict[str, bool]:
    return {"ok": True}


@langgraph.get("/info")
async def info() -> dict[str, Any]:
    return {
        "version": __version__,
        "langgraph_py_version": __version__,
        "flags": {"assistants": True, "crons": False, "langsmith": False, "store": False},
        "metadata": {"server": "research-tool", "graphs": [GRAPH_ID]},
    }


# --- assistants ------------------------------------------------------------------------------------


def known_assistant(assistant_id: str) -> None:
    if not is_assistant(assistant_id) or not assistant_allowed(assistant(assistant_id)):
        raise ApiError(404, f"unknown assistant: {assistant_id}; this server serves the graph '{GRAPH_ID}'")


@langgraph.post("/assistants/search")
async def search_assistants(body: AssistantSearch, request: Request, caller: Caller) -> list[dict[str, Any]]:
    await authorize(request, caller, "assistants", "search", body.model_dump(mode="json"))
    if body.graph_id not in (None, GRAPH_ID):
        return []
    found = [
        shown
        for shown in assistants()
        if body.name in (None, shown["name"])
        and not (body.metadata and any(shown["metadata"].get(k) != v for k, v in body.metadata.items()))
        and assistant_allowed(shown)
    ]
    return found[body.offset : body.offset + body.limit]


@langgraph.post("/assistants/count")
async def count_assistants(body: AssistantSearch, request: Request, caller: Caller) -> int:
    return len(await search_assistants(body, request, caller))


@langgraph.get("/assistants/{assistant_id}", dependencies=[ASSISTANT_READ])
async def get_assistant(assistant_id: str) -> dict[str, Any]:
    known_assistant(assistant_id)
    return assistant(assistant_id)


@langgraph.get("/assistants/{assistant_id}/graph", dependencies=[ASSISTANT_READ])
async def get_assistant_graph(assistant_id: str, protocol: Protocol) -> dict[str, Any]:
    known_assistant(assistant_id)
    return graph_json(protocol.services.runner.graph)


@langgraph.get("/assistants/{assistant_id}/schemas", dependencies=[ASSISTANT_READ])
async def get_assistant_schemas(assistant_id: str) -> dict[str, Any]:
    known_assistant(assistant_id)
    return graph_schemas()


@langgraph.get("/assistants/{assistant_id}/subgraphs", dependencies=[ASSISTANT_READ])
async def get_assistant_subgraphs(assistant_id: str) -> dict[str, Any]:
    known_assistant(assistant_id)
    return {}


# --- threads ---------------------------------------------------------------------------------------


@langgraph.post("/threads")
async def create_thread(body: ThreadCreate, protocol: Protocol, request: Request, caller: Caller) -> dict[str, Any]:
    if body.graph_id not in (None, GRAPH_ID):
        raise ApiError(404, f"unknown graph: {body.graph_id}; this server serves the graph '{GRAPH_ID}'")
    value = {"thread_id": body.thread_id, "metadata": dict(body.metadata), "if_exists": body.if_exists}
    await authorize(request, caller, "threads", "create", value)
    metadata = value.get("metadata")
    return await protocol.create_thread(
        body.thread_id, dict(metadata) if isinstance(metadata, dict) else {}, body.if_exists
    )


@langgraph.post("/threads/search")
async def search_threads(
    body: ThreadSearch, protocol: Protocol, request: Request, caller: Caller
) -> list[dict[str, Any]]:
    await authorize(request, caller, "threads", "search", body.model_dump(mode="json"))
    return await protocol.search_threads(
        metadata=body.metadata, status=body.status, ids=body.ids, limit=body.limit, offset=body.offset
    )


@langgraph.post("/threads/count")
async def count_threads(body: ThreadSearch, protocol: Protocol, request: Request, caller: Caller) -> int:
    await authorize(request, caller, "threads", "search", body.model_dump(mode="json"))
    found = await protocol.search_threads(
        metadata=body.metadata, status=body.status, ids=body.ids, limit=10**6, offset=0
    )
    return len(found)


@langgraph.get("/threads/{thread_id}", dependencies=[THREAD_READ])
async def get_thread(thread_id: ThreadId, protocol: Protocol) -> dict[str, Any]:
    return await protocol.thread_json(thread_id)


@langgraph.patch("/threads/{thread_id}")
async def patch_thread(
    thread_id: ThreadId, body: ThreadPatch, protocol: Protocol, request: Request, caller: Caller
) -> dict[str, Any]:
    value = {"thread_id": thread_id, "metadata": dict(body.metadata)}
    await authorize(request, caller, "threads", "update", value)
    metadata = value.get("metadata")
    return await protocol.patch_thread(thread_id, dict(metadata) if isinstance(metadata, dict) else {})


@langgraph.delete("/threads/{thread_id}", status_code=204, response_class=Response, dependencies=[THREAD_DELETE])
async def delete_thread(thread_id: ThreadId, protocol: Protocol) -> Response:
    await protocol.delete_thread(thread_id)
    return Response(status_code=204)


@langgraph.get("/threads/{thread_id}/state", dependencies=[THREAD_READ])
async def get_thread_state(thread_id: ThreadId, protocol: Protocol) -> dict[str, Any]:
    return await protocol.thread_state(thread_id)


@langgraph.get("/threads/{thread_id}/state/{checkpoint_id}", dependencies=[THREAD_READ])
async def get_thread_state_at(thread_id: ThreadId, checkpoint_id: CheckpointId, protocol: Protocol) -> dict[str, Any]:
    return await protocol.thread_state(thread_id, checkpoint_id)


@langgraph.post("/threads/{thread_id}/state/checkpoint", dependencies=[THREAD_READ])
async def get_thread_state_at_checkpoint(
    thread_id: ThreadId, body: CheckpointRequest, protocol: Protocol
) -> dict[str, Any]:
    return await protocol.thread_state(thread_id, body.checkpoint_id())


@langgraph.post("/threads/{thread_id}/state")
async def update_thread_state(thread_id: ThreadId) -> None:
    raise ApiError(404, "updating a thread's state by hand is not served (docs/langgraph.md)")


@langgraph.post("/threads/prune")
async def prune_threads() -> None:
    raise ApiError(404, "thread prune is not served (docs/langgraph.md)")


@langgraph.post("/threads/{thread_id}/history", dependencies=[THREAD_READ])
async def thread_history(thread_id: ThreadId, body: HistoryRequest, protocol: Protocol) -> list[dict[str, Any]]:
    return await protocol.history(thread_id, body.limit)


# --- runs ------------------------------------------------------------------------------------------


def stream_response(
    protocol: LangGraphProtocol, thread_id: str, run_id: str, modes: list[str], last_event_id: str | None
) -> StreamingResponse:
    stream = RunStream(protocol, thread_id, run_id, modes)
    location = run_location(thread_id, run_id)
    return StreamingResponse(
        stream.frames(last_event_id),
        media_type="text/event-stream",
        headers={
            "Content-Location": location,
            "Location": f"{location}/stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        },
    )


async def stateless_cleanup(protocol: LangGraphProtocol, body: RunCreate, thread_id: str, run_id: str) -> None:
    """A stateless run's thread goes once the run is final (now, or as soon as it is)."""
    if body.on_completion != "keep":
        run, _ = await protocol.get_run(thread_id, run_id)
        if run.final:
            await protocol.delete_thread(thread_id)
        else:
            protocol.forget_when_final(thread_id, run_id, cancel=False)


def stateless_left(protocol: LangGraphProtocol, body: RunCreate, thread_id: str, run_id: str) -> None:
    """The client of a stateless run left early (or the request failed): its thread still goes, at once with
    on_disconnect=cancel, else when the run is final. Synchronous: it runs even inside a cancelled task."""
    if body.on_completion != "keep":
        protocol.forget_when_final(thread_id, run_id, cancel=body.on_disconnect == "cancel")


@langgraph.post("/threads/{thread_id}/runs")
async def create_run(
    thread_id: ThreadId, body: RunCreate, protocol: Protocol, traceparent: CallerTrace, request: Request, caller: Caller
) -> JSONResponse:
    metadata = await run_value(request, caller, thread_id, body)
    run = await protocol.create_run(thread_id, body, traceparent, thread_metadata=metadata)
    shown, _ = await protocol.get_run(thread_id, run.run_id)
    return JSONResponse(
        run_json(shown, shown.status), headers={"Content-Location": run_location(thread_id, run.run_id)}
    )


@langgraph.post("/threads/{thread_id}/runs/stream")
async def stream_run(
    thread_id: ThreadId, body: RunCreate, protocol: Protocol, traceparent: CallerTrace, request: Request, caller: Caller
) -> StreamingResponse:
    metadata = await run_value(request, caller, thread_id, body)
    run = await protocol.create_run(thread_id, body, traceparent, thread_metadata=metadata)
    response = stream_response(protocol, thread_id, run.run_id, body.modes(), None)
    if body.on_disconnect == "cancel":  # what the SDKs' useStream sends: a client that leaves stops the run
        left: Callable[[], object] = lambda: protocol.cancel_when_left(thread_id, run.run_id)  # noqa: E731
    elif body.stream_resumable:  # Agent Chat UI's Cancel: stopped unless a client streams it again soon
        left = lambda: protocol.stop_unless_rejoined(thread_id, run.run_id)  # noqa: E731
    else:
        left = lambda: None  # noqa: E731
    watch_stream_end(response, left=left, watch=(protocol, run.run_id))
    return response


@langgraph.post("/runs/stream")
async def stream_stateless_run(
    body: RunCreate, protocol: Protocol, traceparent: CallerTrace, request: Request, caller: Caller
) -> StreamingResponse:
    metadata = await run_value(request, caller, None, body)
    run = await protocol.create_run(None, body, traceparent, thread_metadata=metadata)
    response = stream_response(protocol, run.thread_id, run.run_id, body.modes(), None)
    watch_stream_end(
        response,
        finished=lambda: stateless_cleanup(protocol, body, run.thread_id, run.run_id),
        left=lambda: stateless_left(protocol, body, run.thread_id, run.run_id),
        watch=(protocol, run.run_id),
    )
    del response.headers["location"]
    return response


def watch_stream_end(
    response: StreamingResponse,
    *,
    left: Callable[[], object],
    finished: Callable[[], Awaitable[object]] | None = None,
    watch: tuple[LangGraphProtocol, str] | None = None,
) -> None:
    """Around a streamed run: `finished` once its last frame is sent, `left` when it is not (the client disconnected,
    so this task is cancelled, or the stream failed). `watch`: the stream is counted as open on its run while it
    is (`LangGraphProtocol.stream_opened`), and no longer counted before `left` is called."""
    frames = response.body_iterator

    async def watched() -> AsyncIterator[Any]:
        done = False
        if watch is not None:
            watch[0].stream_opened(watch[1])
        try:
            async for chunk in frames:
                yield chunk
            if finished is not None:
                await finished()
            done = True
        finally:
            if watch is not None:
                watch[0].stream_closed(watch[1])
            if not done:
                left()

    response.body_iterator = watched()


async def wait_response(protocol: LangGraphProtocol, thread_id: str, run_id: str) -> JSONResponse:
    run = await protocol.until_final(thread_id, run_id)
    values = await protocol.final_values(thread_id, run)
    return JSONResponse(values, headers={"Content-Location": run_location(thread_id, run_id)})


@langgraph.post("/threads/{thread_id}/runs/wait")
async def wait_run(
    thread_id: ThreadId, body: RunCreate, protocol: Protocol, traceparent: CallerTrace, request: Request, caller: Caller
) -> JSONResponse:
    metadata = await run_value(request, caller, thread_id, body)
    run = await protocol.create_run(thread_id, body, traceparent, thread_metadata=metadata)
    try:
        return await wait_response(protocol, thread_id, run.run_id)
    except asyncio.CancelledError:  # the client left
        if body.on_disconnect == "cancel":
            protocol.cancel_when_left(thread_id, run.run_id)
        raise


@langgraph.post("/runs/wait")
async def wait_stateless_run(
    body: RunCreate, protocol: Protocol, traceparent: CallerTrace, request: Request, caller: Caller
) -> JSONResponse:
    metadata = await run_value(request, caller, None, body)
    run = await protocol.create_run(None, body, traceparent, thread_metadata=metadata)
    try:
        response = await wait_response(protocol, run.thread_id, run.run_id)
    except BaseException:
        stateless_left(protocol, body, run.thread_id, run.run_id)
        raise
    await stateless_cleanup(protocol, body, run.thread_id, run.run_id)
    return response


@langgraph.get("/threads/{thread_id}/runs", dependencies=[THREAD_READ])
async def list_runs(
    thread_id: ThreadId,
    protocol: Protocol,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    offset: Annotated[int, Query(ge=0)] = 0,
    status: Annotated[str | None, Query(max_length=20)] = None,
) -> list[dict[str, Any]]:
    await protocol.thread(thread_id)
    runs, _ = await protocol.settled_runs(thread_id)
    shown = [run_json(r, r.status) for r in reversed(runs) if status is None or r.status == status]
    return shown[offset : offset + limit]


@langgraph.get("/threads/{thread_id}/runs/{run_id}", dependencies=[THREAD_READ])
async def get_run(thread_id: ThreadId, run_id: RunId, protocol: Protocol) -> dict[str, Any]:
    run, _ = await protocol.get_run(thread_id, run_id)
    return run_json(run, run.status)


@langgraph.get("/threads/{thread_id}/runs/{run_id}/join", dependencies=[THREAD_READ])
async def join_run(thread_id: ThreadId, run_id: RunId, protocol: Protocol) -> JSONResponse:
    await protocol.get_run(thread_id, run_id)
    return await wait_response(protocol, thread_id, run_id)


@langgraph.get("/threads/{thread_id}/runs/{run_id}/stream", dependencies=[THREAD_READ])
async def join_run_stream(
    thread_id: ThreadId,
    run_id: RunId,
    protocol: Protocol,
    stream_mode: Annotated[list[StreamModeName] | None, Query()] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=64)] = None,
) -> StreamingResponse:
    run, _ = await protocol.get_run(thread_id, run_id)
    modes: list[str] = list(stream_mode) if stream_mode else RunCreate.model_validate(run.kwargs).modes()
    response = stream_response(protocol, thread_id, run_id, modes, last_event_id)
    watch_stream_end(response, left=lambda: None, watch=(protocol, run_id))  # a rejoin keeps a cancelled UI's run
    return response


@langgraph.post("/threads/{thread_id}/runs/{run_id}/cancel", dependencies=[THREAD_UPDATE])
async def cancel_run(
    thread_id: ThreadId,
    run_id: RunId,
    protocol: Protocol,
    wait: Annotated[bool, Query()] = False,
    action: Annotated[str, Query(max_length=20)] = "interrupt",
) -> Response:
    await protocol.cancel(thread_id, run_id, action)
    if wait:
        await protocol.until_final(thread_id, run_id)
        return Response(status_code=204)
    return Response(status_code=202)


__all__ = ["STREAM_MODES", "langgraph"]
