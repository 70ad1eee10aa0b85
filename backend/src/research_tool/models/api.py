"""Bodies the HTTP API takes and returns (DESIGN §5), besides ResearchRequest (the start body) and Report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from research_tool.core.untrusted_text import refuse_unsafe
from research_tool.models import schemas
from research_tool.models.sessions import SessionRecord, SessionStatus

MAX_ANSWERS = 10
MAX_ANSWER_CHARS = 2000
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Answer = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ANSWER_CHARS),
    AfterValidator(refuse_unsafe),
]


class ClarifyRequest(Strict):
    """Answers to the pending clarification questions, in order."""

    answers: list[Answer] = Field(min_length=1, max_length=MAX_ANSWERS)


_ANSWERS: TypeAdapter[list[str]] = TypeAdapter(Annotated[list[Answer], Field(max_length=MAX_ANSWERS)])


def clarification_answers(answers: Sequence[str]) -> list[str]:
    """The one check every answer to a clarification passes, however it arrives (`POST /clarify` through
    ClarifyRequest, a LangGraph `command.resume`, a chat reply, the interrupt form's `edit` decision, MCP, the
    terminal): at most MAX_ANSWERS answers, each 1 to MAX_ANSWER_CHARS characters once stripped, with no NUL or
    other control character. The answers, stripped; ValueError saying which rule an answer broke."""
    try:
        return list(_ANSWERS.validate_python(list(answers)))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        raise ValueError(f"answer {where}: {message}" if where else message) from None


class SessionAccepted(Strict):
    """202 answer of start, stop and clarify: the session and its status now."""

    session_id: str
    status: SessionStatus


StartResponse = SessionAccepted


class StatusResponse(Strict):
    session_id: str
    query: str
    status: SessionStatus
    current_phase: str | None
    iteration: int
    sources_queried: int
    sources_found: int
    entities_found: int
    facts_extracted: int
    saturation_metrics: dict[str, Any] | None
    stop_reason: str | None
    pending_questions: list[str]
    error: str | None
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, record: SessionRecord) -> StatusResponse:
        progress = record.progress
        return cls(
            session_id=record.id,
            query=record.query,
            status=record.status,
            current_phase=progress.get("current_phase"),
            iteration=int(progress.get("iteration") or 0),
            sources_queried=int(progress.get("sources_queried") or 0),
            sources_found=int(progress.get("sources_found") or 0),
            entities_found=int(progress.get("entities_found") or 0),
            facts_extracted=int(progress.get("facts_extracted") or 0),
            saturation_metrics=progress.get("saturation_metrics"),
            stop_reason=record.stop_reason,
            pending_questions=record.pending_questions,
            error=record.error,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )


class SessionSummary(Strict):
    session_id: str
    query: str
    status: SessionStatus
    stop_reason: str | None
    created_at: str
    updated_at: str
    owner: str | None = Field(default=None, description="the user who started it; null: the local single user")

    @classmethod
    def of(cls, record: SessionRecord) -> SessionSummary:
        return cls(
            session_id=record.id,
            query=record.query,
            status=record.status,
            stop_reason=record.stop_reason,
            created_at=record.created_at,
            updated_at=record.updated_at,
            owner=record.owner,
        )


class SessionList(Strict):
    """One page of sessions, newest first: the caller's own, or everyone's for an admin."""

    sessions: list[SessionSummary]
    total: int
    limit: int
    offset: int
    user: str | None = Field(default=None, description="who is asking; null: the local single user")
    all_users: bool = Field(default=True, description="true: every user's sessions (an admin); false: the caller's")


class ProviderInfo(Strict):
    """One search provider as this server sees it: usable now or why not, where its queries go."""

    name: str
    available: bool
    reason: str | None = Field(description="why the provider cannot be used now (a missing key or folder)")
    privacy: Literal["local", "cloud"] = Field(description="local: queries stay on this machine")
    kind: str
    key_present: bool | None = Field(description="None when the provider needs no key")


class ProviderList(Strict):
    providers: list[ProviderInfo]


class HealthResponse(Strict):
    status: Literal["ok"] = "ok"


# Every error the API returns is the seed's ErrorResponse: `{"error": {"type", "message", "retryable"}}`.
ErrorDetail = schemas.ErrorDetail
ErrorResponse = schemas.ErrorResponse
