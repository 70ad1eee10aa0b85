"""A research session's record: what was asked, where it is, and why it stopped (DESIGN §5)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from research_tool.core.errors import BadInputError
from research_tool.models.request import ResearchRequest

SessionStatus = Literal["queued", "running", "awaiting_clarification", "stopping", "interrupted", "completed", "failed"]
# A session whose process was Ctrl-C'd, shut down or killed: resumable (`research-tool resume`, or the server
# resumes it on start). The row says so when the process could write it; a killed process leaves its last status,
# which `runtime.ownership.shown_status` turns into `interrupted` when no process owns the data dir.
INTERRUPTED: SessionStatus = "interrupted"
# Unfinished and owned by a live process
UNFINISHED_STATUSES: tuple[str, ...] = ("queued", "running", "awaiting_clarification", "stopping")
# Every status a process resumes on start
ACTIVE_STATUSES: tuple[str, ...] = (*UNFINISHED_STATUSES, INTERRUPTED)
FINISHED_STATUSES: tuple[str, ...] = ("completed", "failed")

# A session id names files and folders under the data dir (exports/<id>/), so it is a plain name:
# letters, digits, '-' and '_', starting with a letter or digit, at most 64 characters (a uuid4 hex is 32).
SESSION_ID_MAX_CHARS = 64
SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def is_valid_session_id(value: str) -> bool:
    return _SESSION_ID.fullmatch(value) is not None


def check_session_id(value: str) -> str:
    """`value` if it is a valid session id, else BadInputError with one clear line."""
    if not is_valid_session_id(value):
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise BadInputError(
            f"invalid session id {shown!r}: use 1-{SESSION_ID_MAX_CHARS} letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )
    return value


class SessionRecord(BaseModel):
    # Frozen: a store hands out the one record it caches for a session (no copy per status read); a change is a
    # new record. The lists and dicts inside are not to be changed either.
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    query: str
    request: ResearchRequest
    status: SessionStatus
    stop_reason: str | None = None
    stop_requested: bool = False
    progress: dict[str, Any] = Field(default_factory=dict)
    pending_questions: list[str] = Field(default_factory=list)
    clarify_answers: list[str] | None = None
    awaiting_since: str | None = None
    error: str | None = None
    # OpenTelemetry (core/telemetry.py, runtime/session_trace.py): the caller's traceparent (`parent`) and the first
    # run's root span (`first`), kept only while tracing is on
    trace_context: dict[str, str] | None = None
    # The user who started it (issue 44, runtime/users.py); None: the local single user (no key, or the CLI)
    owner: str | None = None
    created_at: str
    updated_at: str

    @classmethod
    def queued(
        cls,
        session_id: str,
        request: ResearchRequest,
        trace_context: dict[str, str] | None,
        now: str,
        owner: str | None = None,
    ) -> SessionRecord:
        """The record of a session just created (what both stores write for it)."""
        return cls(
            id=session_id,
            query=request.query,
            request=request,
            status="queued",
            trace_context=trace_context or None,
            owner=owner,
            created_at=now,
            updated_at=now,
        )

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES
