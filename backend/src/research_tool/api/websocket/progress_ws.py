"""WS /api/research/{id}/ws?after=N: every event with seq > N (stored ones, then live ones) as one JSON
text message each, then a normal close (1000) after the final event.

Refusals: a missing or wrong token (header, or the `bearer.` subprotocol of api/auth.py) is refused at
the handshake (HTTP 401); an unknown session is
accepted and closed at once with code 4404 and a reason; a bad `after` with 4400.
"""

from __future__ import annotations

import asyncio
import contextlib

from fastapi import APIRouter, WebSocket
from fastapi.responses import JSONResponse
from starlette.websockets import WebSocketDisconnect

from research_tool.api.auth import WS_SUBPROTOCOL, authenticate
from research_tool.api.errors import ApiError, error_body
from research_tool.api.event_stream import session_events, stream_cut_short
from research_tool.api.routes.research import owned_session, services_of
from research_tool.core.errors import SessionNotFoundError
from research_tool.core.logging import get_logger
from research_tool.models.sessions import is_valid_session_id
from research_tool.runtime.composition import ResearchServices

log = get_logger(__name__)

CLOSE_NORMAL = 1000
CLOSE_BAD_REQUEST = 4400
CLOSE_UNAUTHORIZED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_SERVICE_RESTART = 1012  # the server is restarting: reconnect later
MAX_REASON_BYTES = 123  # the WebSocket protocol's limit for a close reason

progress = APIRouter()


def _reason(text: str) -> str:
    return text.encode()[:MAX_REASON_BYTES].decode(errors="ignore")


def parse_after(value: str | None) -> int | None:
    """`after` as a non-negative int (absent: 0); None when it is not one."""
    if value is None or value == "":
        return 0
    text = value.strip()
    return int(text) if text.isdecimal() and len(text) <= 18 else None


async def refuse_unauthorized(websocket: WebSocket, refusal: ApiError) -> None:
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        body = error_body(refusal.error_type, refusal.message, refusal.retryable)
        headers = {"WWW-Authenticate": "Bearer"} if refusal.status_code == 401 else None
        await websocket.send_denial_response(JSONResponse(body, status_code=refusal.status_code, headers=headers))
    else:
        await websocket.close(code=CLOSE_UNAUTHORIZED, reason="unauthorized")


@progress.websocket("/api/research/{session_id}/ws")
async def progress_websocket(websocket: WebSocket, session_id: str) -> None:
    try:
        caller = await authenticate(websocket)
    except ApiError as refusal:
        await refuse_unauthorized(websocket, refusal)
        return
    services = services_of(websocket)
    after = parse_after(websocket.query_params.get("after"))
    # A browser that offered subprotocols (the token as one) fails the handshake unless one is chosen.
    offered = websocket.scope.get("subprotocols", [])
    await websocket.accept(subprotocol=WS_SUBPROTOCOL if WS_SUBPROTOCOL in offered else None)
    if after is None:
        await websocket.close(code=CLOSE_BAD_REQUEST, reason="`after` must be a non-negative integer")
        return
    if not is_valid_session_id(session_id):
        await websocket.close(code=CLOSE_BAD_REQUEST, reason="invalid session id")
        return
    try:
        await owned_session(services, session_id, caller)  # someone else's is as unknown as a missing one
    except SessionNotFoundError:
        await websocket.close(code=CLOSE_NOT_FOUND, reason=_reason(f"unknown session id: {session_id}"))
        return
    sender = asyncio.create_task(_send_events(websocket, services, session_id, after))
    receiver = asyncio.create_task(_until_disconnect(websocket))
    try:
        done, _ = await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sender, receiver):
            task.cancel()
        await asyncio.gather(sender, receiver, return_exceptions=True)
    if sender in done and not sender.cancelled() and sender.exception() is None:
        code, reason = sender.result()
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            await websocket.close(code=code, reason=reason)


async def _send_events(
    websocket: WebSocket, services: ResearchServices, session_id: str, after: int
) -> tuple[int, str]:
    """Send until the final event; returns the close code and reason."""
    async for event in session_events(services, session_id, after):
        if event is None:
            continue  # idle: uvicorn's protocol pings keep the connection alive
        await websocket.send_text(event.model_dump_json())
        if event.is_final:
            return CLOSE_NORMAL, "session finished"
    if stream_cut_short(services):
        return CLOSE_SERVICE_RESTART, "server stopping; reconnect with ?after= once it is back"
    if not await services.store.exists(session_id):
        return CLOSE_NOT_FOUND, "session was deleted"
    return CLOSE_NORMAL, "session finished"


async def _until_disconnect(websocket: WebSocket) -> None:
    """Read (and ignore) client messages until the client goes away."""
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
