"""Bearer-token auth: with `RESEARCH_API_TOKEN` set, every route but /healthz and the static shells of
the web page and the API docs needs `Authorization: Bearer <token>` (WebSocket handshakes included), or
`x-api-key: <token>` as LangGraph's SDKs send it.
Without it the API is open: bind it to 127.0.0.1 or put it behind a proxy that authenticates.

Browsers cannot set headers on a WebSocket, so a handshake may instead offer the subprotocols
`research-tool` and `bearer.<token as unpadded base64url>`; the server then accepts with `research-tool`.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from research_tool.api.errors import ApiError
from research_tool.core.settings import Settings, secret_value

WS_SUBPROTOCOL = "research-tool"
WS_TOKEN_PREFIX = "bearer."
API_KEY_HEADER = "x-api-key"  # what LangGraph's SDKs send (api/langgraph/): the same token, another header

bearer_scheme = HTTPBearer(auto_error=False, description="RESEARCH_API_TOKEN, when the server sets one")


def expected_token(connection: HTTPConnection) -> str | None:
    settings: Settings = connection.app.state.settings
    return secret_value(settings.api_token)


def token_matches(expected: str, given: str | None) -> bool:
    return given is not None and secrets.compare_digest(given.encode(), expected.encode())


def bearer_from_header(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, credentials = value.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


def bearer_from_subprotocols(subprotocols: list[str]) -> str | None:
    """The token a browser's WebSocket offers as `bearer.<base64url>` beside `research-tool`."""
    if WS_SUBPROTOCOL not in subprotocols:
        return None
    for offered in subprotocols:
        if offered.startswith(WS_TOKEN_PREFIX):
            encoded = offered[len(WS_TOKEN_PREFIX) :]
            try:
                return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
            except (binascii.Error, UnicodeDecodeError, ValueError):
                return None
    return None


# One message for every 401 that lacks a token, naming both headers (Agent Chat UI and the SDKs send X-Api-Key)
MISSING_TOKEN_MESSAGE = (
    "this server needs `Authorization: Bearer <RESEARCH_API_TOKEN>` or `X-Api-Key: <RESEARCH_API_TOKEN>`"
)


def is_authorized(connection: HTTPConnection) -> bool:
    """True when no token is configured or the connection carries the right one (HTTP or WebSocket)."""
    expected = expected_token(connection)
    if expected is None:
        return True
    given = bearer_from_header(connection.headers.get("authorization")) or connection.headers.get(API_KEY_HEADER)
    if given is None and connection.scope["type"] == "websocket":
        given = bearer_from_subprotocols(list(connection.scope.get("subprotocols", [])))
    return token_matches(expected, given)


async def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)]
) -> None:
    """Route dependency: 401 with the JSON error shape when the token is missing or wrong."""
    expected = expected_token(request)
    if expected is None:
        return
    given = credentials.credentials if credentials is not None else request.headers.get(API_KEY_HEADER)
    if given is None:
        raise ApiError(401, MISSING_TOKEN_MESSAGE)
    if not token_matches(expected, given):
        raise ApiError(401, "the bearer token is not valid")
