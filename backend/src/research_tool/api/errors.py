"""Every error the API returns is JSON `{"error": {"type", "message", "retryable"}}` (DESIGN §5).

Bad input is a 4xx (400 bad input or malformed JSON, 404 unknown session, 409 wrong state, 413 too
large, 422 invalid fields), never a 500; a 500 means a bug and says nothing about the internals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from research_tool.core.errors import (
    BadInputError,
    EngineUnavailableError,
    ResearchToolError,
    ServerBusyError,
    SessionNotFoundError,
    SessionStateError,
    UserLimitError,
)
from research_tool.core.logging import get_logger
from research_tool.models.api import ErrorDetail, ErrorResponse

log = get_logger(__name__)

HTTP_ERROR_TYPES: dict[int, str] = {
    400: "bad_input",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    503: "unavailable",
    504: "timeout",
}
LOCATIONS = ("body", "query", "path", "header")


class ApiError(ResearchToolError):
    """An error the API itself raises with its own status (401, 413, 504...)."""

    def __init__(self, status_code: int, message: str, *, error_type: str | None = None, retryable: bool = False):
        super().__init__(message)
        self.status_code = status_code
        self.error_type = error_type or HTTP_ERROR_TYPES.get(status_code, "error")
        self.retryable = retryable


def error_body(error_type: str, message: str, retryable: bool = False) -> dict[str, Any]:
    return ErrorResponse(error=ErrorDetail(type=error_type, message=message, retryable=retryable)).model_dump()


def error_response(
    status_code: int, error_type: str, message: str, retryable: bool = False, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(error_type, message, retryable), status_code=status_code, headers=headers)


def status_for(exc: ResearchToolError) -> int:
    if isinstance(exc, ApiError):
        return exc.status_code
    if isinstance(exc, SessionNotFoundError):
        return 404
    if isinstance(exc, SessionStateError):
        return 409
    if isinstance(exc, BadInputError):
        return 400
    if isinstance(exc, EngineUnavailableError | ServerBusyError):
        return 503
    if isinstance(exc, UserLimitError):
        return 429
    return 502 if exc.retryable else 500


def validation_message(errors: list[Any]) -> str:
    """One readable line per invalid field: `invalid body.query: String should have at most 2000 characters`."""
    parts: list[str] = []
    for error in errors[:5]:
        loc = [str(p) for p in error.get("loc", ())]
        if len(loc) > 1 and loc[0] in LOCATIONS:
            loc = loc[1:]
        where = ".".join(loc)
        text = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        parts.append(f"invalid {where or 'request'}: {text}")
    more = len(errors) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


async def research_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ResearchToolError)
    status = status_for(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, ServerBusyError | UserLimitError):
        headers = {"Retry-After": str(exc.retry_after_s)}
    if status >= 500:
        log.warning("api_error", path=request.url.path, status=status, error_type=exc.error_type, message=exc.message)
    return error_response(status, exc.error_type, exc.message, exc.retryable, headers)


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, "malformed_json", "the request body is not valid JSON")
    return error_response(422, "validation_error", validation_message(errors))


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    message = exc.detail if isinstance(exc.detail, str) else "request failed"
    if status == 404 and message == "Not Found":
        message = f"no route for {request.method} {request.url.path}"
    if status == 400 and "parsing the body" in message:
        return error_response(400, "malformed_json", "the request body could not be read as JSON")
    return error_response(status, HTTP_ERROR_TYPES.get(status, "error"), message, headers=exc.headers)


async def unexpected_error_handler(request: Request, exc: Exception) -> JSONResponse:
    log.exception("api_unexpected_error", path=request.url.path, error=f"{type(exc).__name__}: {exc}")
    return error_response(500, "internal_error", "the server failed to handle this request", retryable=True)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ResearchToolError, research_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    app.add_exception_handler(Exception, unexpected_error_handler)
