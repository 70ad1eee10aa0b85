"""A research session's record: what was asked, where it is, and why it stopped (DESIGN §5)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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


class SessionRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

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
    created_at: str
    updated_at: str

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES
