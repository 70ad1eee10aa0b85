"""The caller's W3C `traceparent` header (issue 36): a session started by a request that carries one is a child of
the caller's trace. Read only while tracing is on (core/telemetry.py); a malformed header is ignored."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from research_tool.core import telemetry


def caller_traceparent(request: Request) -> str | None:
    return telemetry.incoming_traceparent(request.headers)


# A route parameter: `traceparent: CallerTrace` (kept out of the OpenAPI document, like any Request dependency)
CallerTrace = Annotated[str | None, Depends(caller_traceparent)]
