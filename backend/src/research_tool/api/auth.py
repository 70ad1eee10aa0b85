"""Bearer-token auth: with `RESEARCH_API_TOKEN` set, every route but /healthz needs
`Authorization: Bearer <token>` (WebSocket handshakes included). Without it the API is open: bind it
to 127.0.0.1 or put it behind a proxy that authenticates."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from research_tool.api.errors import ApiError

bearer_scheme = HTTPBearer(auto_error=False, description="RESEARCH_API_TOKEN, when the server sets one")


def expected_token(connection: HTTPConnection) -> str | None:
    token: str | None = connection.app.state.settings.api_token
    return token or None


def token_matches(expected: str, given: str | None) -> bool:
    return given is not None and secrets.compare_digest(given.encode(), expected.encode())


def bearer_from_header(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, credentials = value.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


def is_authorized(connection: HTTPConnection) -> bool:
    """True when no token is configured or the connection carries the right one (HTTP or WebSocket)."""
    expected = expected_token(connection)
    if expected is None:
        return True
    return token_matches(expected, bearer_from_header(connection.headers.get("authorization")))


async def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)]
) -> None:
    """Route dependency: 401 with the JSON error shape when the token is missing or wrong."""
    expected = expected_token(request)
    if expected is None:
        return
    if credentials is None:
        raise ApiError(401, "this server needs `Authorization: Bearer <RESEARCH_API_TOKEN>`")
    if not token_matches(expected, credentials.credentials):
        raise ApiError(401, "the bearer token is not valid")
