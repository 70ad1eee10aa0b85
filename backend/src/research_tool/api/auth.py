"""Who a request acts for (issue 44). Every route but /healthz and the static shells of the web page and the API
docs turns the request into a `Principal` (runtime/users.py) or answers 401:

- a key in `Authorization: Bearer <key>` or `X-Api-Key: <key>` (what LangGraph's SDKs send): RESEARCH_API_TOKEN
  (the admin `admin`), or a user's own key (`research-tool users add`);
- on a server with no RESEARCH_API_TOKEN and no user ever added: the local single user (an admin with no name),
  whatever key is sent, exactly as before users existed; bind such a server to 127.0.0.1 or put it behind a proxy that
  authenticates;
- with RESEARCH_AUTH (or langgraph.json's `auth.path`): whatever the langgraph_sdk.Auth handler's `authenticate`
  says (api/custom_auth.py); keys of ours are then not consulted.

The principal is kept in the request's scope (`principal_of` reads it back), so the route, the MCP tools and the
LangGraph protocol behind it act for the same caller. A key never appears in a message, a log line or a store.

Browsers cannot set headers on a WebSocket, so a handshake may instead offer the subprotocols
`research-tool` and `bearer.<key as unpadded base64url>`; the server then accepts with `research-tool`.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from typing import Annotated, Any

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from research_tool.api.errors import ApiError
from research_tool.core.settings import Settings, secret_value
from research_tool.runtime.users import LOCAL, TOKEN_USER, KeyCheck, Principal

WS_SUBPROTOCOL = "research-tool"
WS_TOKEN_PREFIX = "bearer."
API_KEY_HEADER = "x-api-key"  # what LangGraph's SDKs send (api/langgraph/): the same key, another header
PRINCIPAL_SCOPE_KEY = "research_tool.principal"
# How long "no user exists" is believed before the store is asked again (a user added by the CLI beside a live
# server is seen within this long; once one exists, it is believed for good).
NO_USERS_RECHECK_S = 1.0

bearer_scheme = HTTPBearer(auto_error=False, description="RESEARCH_API_TOKEN or a user's key, when the server has any")


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
    """The key a browser's WebSocket offers as `bearer.<base64url>` beside `research-tool`."""
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


# One message for every 401 that lacks a key, naming both headers (Agent Chat UI and the SDKs send X-Api-Key)
MISSING_TOKEN_MESSAGE = (
    "this server needs `Authorization: Bearer <key>` or `X-Api-Key: <key>` "
    "(RESEARCH_API_TOKEN, or a key from `research-tool users add`)"
)
INVALID_KEY_MESSAGE = "the bearer token is not valid"


def presented_key(connection: HTTPConnection) -> str | None:
    """The key the request carries: the bearer header, else X-Api-Key, else (a WebSocket) the `bearer.` subprotocol."""
    given = bearer_from_header(connection.headers.get("authorization")) or connection.headers.get(API_KEY_HEADER)
    if given is None and connection.scope["type"] == "websocket":
        given = bearer_from_subprotocols(list(connection.scope.get("subprotocols", [])))
    return given


class Authenticator:
    """The server's way of telling who calls (kept on app.state.auth while the services are open)."""

    def __init__(self, settings: Settings, users: Any, custom: Any = None) -> None:
        self._token = secret_value(settings.api_token)
        self._users = users
        self._keys = KeyCheck(users)
        self._custom = custom  # api/custom_auth.CustomAuth, or None
        self._no_users_until = 0.0

    @property
    def custom(self) -> Any:
        return self._custom

    async def _users_exist(self) -> bool:
        now = time.monotonic()
        if now < self._no_users_until:
            return False
        exists = bool(await self._users.any_users())
        if not exists:
            self._no_users_until = now + NO_USERS_RECHECK_S
        return exists

    async def principal(self, connection: HTTPConnection) -> Principal:
        """The caller, or ApiError(401) (a custom handler may also answer 403)."""
        if self._custom is not None:
            principal: Principal = await self._custom.authenticate(connection)
            return principal
        if self._token is None and not await self._users_exist():
            return LOCAL  # single-user use, as before users existed: whatever key is sent is not looked at
        given = presented_key(connection)
        if given is None:
            raise ApiError(401, MISSING_TOKEN_MESSAGE)
        if self._token is not None and token_matches(self._token, given):
            return Principal(name=TOKEN_USER, admin=True)
        found = await self._keys.principal(given)
        if found is None:
            raise ApiError(401, INVALID_KEY_MESSAGE)
        return found


async def authenticate(connection: HTTPConnection) -> Principal:
    """The connection's principal (worked out once per request and kept in its scope), or ApiError 401/403/503."""
    known: Principal | None = connection.scope.get(PRINCIPAL_SCOPE_KEY)
    if known is not None:
        return known
    auth: Authenticator | None = getattr(connection.app.state, "auth", None)
    if auth is None:
        # Starting or stopping: only RESEARCH_API_TOKEN can be checked without the store.
        expected = expected_token(connection)
        if expected is not None and token_matches(expected, presented_key(connection)):
            return Principal(name=TOKEN_USER, admin=True)
        raise ApiError(503, "the server is starting or stopping", retryable=True)
    principal = await auth.principal(connection)
    connection.scope[PRINCIPAL_SCOPE_KEY] = principal
    return principal


def principal_of(connection: HTTPConnection) -> Principal:
    """The principal `authenticate` found for this request (the local user where none was asked for: the CLI)."""
    known: Principal | None = connection.scope.get(PRINCIPAL_SCOPE_KEY)
    return known if known is not None else LOCAL


async def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)]
) -> Principal:
    """Route dependency: the caller, or 401 with the JSON error shape when the key is missing or wrong."""
    return await authenticate(request)


Caller = Annotated[Principal, Depends(require_token)]
