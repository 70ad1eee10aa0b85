"""A session's progress event (DESIGN §5): append-only, per-session seq from 1 with no gaps."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

FINAL_EVENT_TYPES = frozenset({"session_completed", "session_failed"})


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seq: int = Field(ge=1)
    session_id: str
    ts: str
    type: str
    phase: str | None
    message: str
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_final(self) -> bool:
        return self.type in FINAL_EVENT_TYPES
