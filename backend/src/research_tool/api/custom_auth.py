"""LangGraph custom auth (issue 44): a team that wrote a `langgraph_sdk.Auth` for LangGraph Platform points this
server at it with RESEARCH_AUTH=`module.path:auth` (or `path/to/file.py:auth`), or with the `auth.path` of the
langgraph.json in the working directory, and it is honoured as LangGraph Platform honours it:

- its `@auth.authenticate` handler turns every request (every route but /healthz and the static shells, the
  WebSocket and /mcp included) into a user; it is called with the arguments it names (`request`, `authorization`,
  `headers`, `method`, `path`, `path_params`, `query_params`) and may return a string (the identity), a dict
  (`identity`, `permissions`, `display_name`) or an object with those attributes; raising
  `Auth.exceptions.HTTPException` answers with its status. The identity is the user's name: the sessions and
  threads it creates are its own (404 for anyone else); `admin` among its permissions makes it an admin.
- its `@auth.on...` handlers are called on the LangGraph routes for `threads` (create, read, update, delete,
  search, create_run) and `assistants` (read, search), most specific first (`threads.create`, then `threads`,
  then `*` for the action, then `@auth.on`), with an `AuthContext` and the request's `value`: the metadata they
  add to a created thread or run is stored with it, a filter they return (`{"owner": "alice"}`, `{"$eq": ...}`,
  `{"$contains": ...}`) must hold on a thread's metadata for the thread to be read, changed or found, and `False`
  answers 403. The store is not served (docs/langgraph.md), so `store` handlers are never called.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.requests import HTTPConnection

from research_tool.api.errors import ApiError
from research_tool.core.errors import BadInputError
from research_tool.core.logging import get_logger
from research_tool.core.settings import Settings
from research_tool.runtime.users import Principal

log = get_logger(__name__)

LANGGRAPH_JSON = "langgraph.json"
ADMIN_PERMISSION = "admin"


def auth_path(settings: Settings, cwd: Path | None = None) -> str | None:
    """RESEARCH_AUTH, else the `auth.path` of ./langgraph.json (None: neither)."""
    if settings.auth:
        return settings.auth
    config = (cwd or Path.cwd()) / LANGGRAPH_JSON
    if not config.is_file():
        return None
    try:
        loaded = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    section = loaded.get("auth") if isinstance(loaded, dict) else None
    path = section.get("path") if isinstance(section, dict) else None
    return str(path) if path else None


def import_object(spec: str, base: Path | None = None) -> Any:
    """`module.path:name` or `file.py:name` (relative to `base`, else the working directory)."""
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        raise BadInputError(f"RESEARCH_AUTH {spec!r}: expected `module.path:name` or `path/to/file.py:name`")
    if target.endswith(".py") or "/" in target:
        path = Path(target)
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        if not path.is_file():
            raise BadInputError(f"RESEARCH_AUTH {spec!r}: no file {path}")
        module_name = f"research_tool_custom_auth_{abs(hash(str(path.resolve())))}"
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise BadInputError(f"RESEARCH_AUTH {spec!r}: cannot load {path}")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        loader_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise BadInputError(f"RESEARCH_AUTH {spec!r}: cannot import {target}: {exc}") from None
    try:
        return getattr(module, name)
    except AttributeError:
        raise BadInputError(f"RESEARCH_AUTH {spec!r}: {target} has no {name}") from None


def load_custom_auth(settings: Settings, cwd: Path | None = None) -> CustomAuth | None:
    spec = auth_path(settings, cwd)
    if spec is None:
        return None
    from langgraph_sdk import Auth

    found = import_object(spec, cwd)
    if not isinstance(found, Auth):
        raise BadInputError(f"RESEARCH_AUTH {spec!r} is a {type(found).__name__}, not a langgraph_sdk.Auth")
    if found._authenticate_handler is None:
        raise BadInputError(f"RESEARCH_AUTH {spec!r}: the Auth object has no @auth.authenticate handler")
    log.info("custom_auth_loaded", path=spec)
    return CustomAuth(found)


class AuthUser(Mapping[str, Any]):
    """The user an authenticate handler returned, as LangGraph hands it to the resource handlers (`ctx.user`):
    `identity`, `display_name`, `is_authenticated`, `permissions`, and the returned dict's keys."""

    def __init__(self, identity: str, permissions: Sequence[str], fields: Mapping[str, Any]) -> None:
        self._fields = {**fields, "identity": identity, "permissions": list(permissions)}
        self._fields.setdefault("display_name", identity)
        self._fields.setdefault("is_authenticated", True)

    @property
    def identity(self) -> str:
        return str(self._fields["identity"])

    @property
    def display_name(self) -> str:
        return str(self._fields["display_name"])

    @property
    def is_authenticated(self) -> bool:
        return bool(self._fields["is_authenticated"])

    @property
    def permissions(self) -> list[str]:
        return list(self._fields["permissions"])

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __iter__(self) -> Any:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


def user_of(returned: Any) -> AuthUser:
    if isinstance(returned, str):
        return AuthUser(returned, [], {})
    if isinstance(returned, Mapping):
        identity = returned.get("identity")
        if not isinstance(identity, str) or not identity:
            raise ApiError(500, "the auth handler returned a user without an identity", error_type="auth_handler")
        return AuthUser(identity, list(returned.get("permissions") or []), dict(returned))
    identity = getattr(returned, "identity", None)
    if not isinstance(identity, str) or not identity:
        raise ApiError(500, "the auth handler returned a user without an identity", error_type="auth_handler")
    fields = {
        k: getattr(returned, k) for k in ("display_name", "is_authenticated") if getattr(returned, k, None) is not None
    }
    return AuthUser(identity, list(getattr(returned, "permissions", None) or []), fields)


def refusal(exc: Exception) -> ApiError:
    """An `Auth.exceptions.HTTPException` a handler raised, as the API's error (its status and detail)."""
    status = int(getattr(exc, "status_code", 401))
    detail = str(getattr(exc, "detail", "") or "unauthorized")
    return ApiError(status, detail)


class CustomAuth:
    def __init__(self, auth: Any) -> None:
        self.auth = auth
        self._authenticate = auth._authenticate_handler
        self._parameters = set(inspect.signature(self._authenticate).parameters)

    def _arguments(self, connection: HTTPConnection) -> dict[str, Any]:
        available: dict[str, Any] = {
            "request": connection,
            "authorization": connection.headers.get("authorization"),
            "headers": {k.encode(): v.encode() for k, v in connection.headers.items()},
            "method": connection.scope.get("method", "GET"),
            "path": connection.url.path,
            "path_params": dict(connection.path_params),
            "query_params": dict(connection.query_params),
            "scope": connection.scope,
        }
        return {name: available[name] for name in self._parameters if name in available}

    async def authenticate(self, connection: HTTPConnection) -> Principal:
        from langgraph_sdk.auth.exceptions import HTTPException

        try:
            returned = self._authenticate(**self._arguments(connection))
            if inspect.isawaitable(returned):
                returned = await returned
        except HTTPException as exc:
            raise refusal(exc) from None
        if returned is None:
            raise ApiError(401, "unauthorized")
        user = user_of(returned)
        permissions = tuple(user.permissions)
        return Principal(name=user.identity, admin=ADMIN_PERMISSION in permissions, permissions=permissions, user=user)

    def handler(self, resource: str, action: str) -> Any:
        """The most specific handler for (resource, action), as LangGraph picks it; None when there is none."""
        handlers: dict[tuple[str, str], list[Any]] = self.auth._handlers
        for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
            if handlers.get(key):
                return handlers[key][-1]
        globals_: list[Any] = self.auth._global_handlers
        return globals_[-1] if globals_ else None

    async def authorize(
        self, caller: Principal, resource: str, action: str, value: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Call the handler for (resource, action) with `value` (which it may change: the metadata it adds is
        stored); its filter, None for none; 403 when it returns False, its status when it raises."""
        handler = self.handler(resource, action)
        if handler is None:
            return None
        from langgraph_sdk.auth.exceptions import HTTPException
        from langgraph_sdk.auth.types import AuthContext

        user = caller.user if caller.user is not None else AuthUser(caller.name or "local", caller.permissions, {})
        ctx = AuthContext(permissions=list(caller.permissions), user=user, resource=resource, action=action)  # type: ignore[arg-type]
        try:
            result = await handler(ctx=ctx, value=value)
        except HTTPException as exc:
            raise refusal(exc) from None
        if result is False:
            raise ApiError(403, f"not allowed: {resource}.{action}")
        if isinstance(result, dict):
            return result or None
        return None


def filter_matches(wanted: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """Whether `metadata` satisfies a handler's filter: `{"k": v}` and `{"k": {"$eq": v}}` are equality,
    `{"k": {"$contains": v}}` is membership (a list field holding v, or every one of a list v)."""
    for key, condition in wanted.items():
        present = metadata.get(key)
        if isinstance(condition, Mapping):
            for op, operand in condition.items():
                if op == "$eq":
                    if present != operand:
                        return False
                elif op == "$contains":
                    if not isinstance(present, list):
                        return False
                    needed = operand if isinstance(operand, list) else [operand]
                    if any(item not in present for item in needed):
                        return False
                else:
                    return False  # an operator this server does not know: nothing matches rather than everything
        elif present != condition:
            return False
    return True
