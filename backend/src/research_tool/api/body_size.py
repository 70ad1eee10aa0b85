"""Request size limit: a body over `RESEARCH_MAX_REQUEST_BYTES` is refused with 413 before it is parsed,
whether it announces its length (Content-Length) or streams in chunks."""

from __future__ import annotations

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from research_tool.api.errors import error_response


class BodySizeLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> str:
        return f"the request body is larger than {self.max_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await error_response(400, "bad_input", "invalid Content-Length header")(scope, receive, send)
                return
            if length > self.max_bytes:
                await error_response(413, "payload_too_large", self._too_large())(scope, receive, send)
                return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # FastAPI re-raises HTTPExceptions met while reading the body; the handler renders it.
                    raise StarletteHTTPException(413, self._too_large())
            return message

        await self.app(scope, limited_receive, send)
