"""The storage seams: what the runner, the janitor, the API and the CLI need from each store, satisfied by
the SQLite backend (session_store.py, event_log.py, content_store.py, checkpoints.py: one data dir) and the
Postgres backend (runtime/postgres/: any number of processes on one database), and what both answer alike
(`resolve_session_id`: a session id from a prefix, as `research-tool sessions` shows it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn, Protocol

from research_tool.core.errors import BadInputError, SessionNotFoundError
from research_tool.models.events import Event
from research_tool.models.request import ResearchRequest
from research_tool.models.sessions import SessionRecord
from research_tool.runtime.users import UserLimits


class SessionStoreProtocol(Protocol):
    async def create(
        self,
        request: ResearchRequest,
        session_id: str | None = None,
        trace_context: dict[str, str] | None = None,
        *,
        owner: str | None = None,
        limits: UserLimits | None = None,
    ) -> SessionRecord: ...
    async def limit_refusal(self, owner: str, limits: UserLimits) -> tuple[str, int] | None:
        """Whether a start by `owner` would be refused now (reason, Retry-After), writing nothing."""
        ...

    async def get(self, session_id: str) -> SessionRecord: ...
    async def exists(self, session_id: str) -> bool: ...
    async def resolve(self, id_or_prefix: str) -> str: ...
    async def list_page(
        self, *, limit: int = 20, offset: int = 0, owner: str | None = None
    ) -> tuple[list[SessionRecord], int]: ...
    async def active(self) -> list[SessionRecord]: ...
    async def update(self, session_id: str, **fields: Any) -> None: ...
    async def delete(self, session_id: str) -> None: ...
    async def ids(self, statuses: Sequence[str] | None = None) -> set[str]:
        """Every session id (or those whose status is one of `statuses`)."""
        ...

    async def expired(self, cutoff: str) -> list[str]:
        """Finished sessions last updated before `cutoff` (ISO 8601), oldest first."""
        ...

    async def status_counts(self) -> dict[str, int]: ...
    async def reclaim_space(self, *, convert: bool = False) -> int: ...


class EventSinkProtocol(Protocol):
    async def emit(self, type: str, phase: str | None, message: str, data: dict[str, Any] | None = None) -> None: ...


class EventLogProtocol(Protocol):
    def begin(self, session_id: str) -> None: ...
    async def append(
        self, session_id: str, type: str, phase: str | None, message: str, data: dict[str, Any] | None = None
    ) -> Event: ...
    async def replay(self, session_id: str, after: int = 0, limit: int | None = None) -> list[Event]: ...
    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Event]: ...
    async def delete(self, session_id: str) -> None: ...
    def sink(self, session_id: str) -> EventSinkProtocol: ...
    async def session_ids(self) -> set[str]:
        """Every session that has events."""
        ...

    async def last_of_type(self, session_id: str, type: str) -> Event | None: ...
    def notify_local(self, session_id: str) -> None:
        """Events of the session were appended elsewhere: local followers re-read the table after their last seq."""
        ...


class ContentStoreProtocol(Protocol):
    async def put_many(self, session_id: str, texts: Mapping[str, str]) -> dict[str, str]: ...
    async def get_many(self, refs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]: ...
    async def release(self, session_ids: Iterable[str]) -> int: ...
    async def sweep_unreferenced(self) -> int: ...
    async def sessions_referring(self) -> set[str]: ...
    async def stats(self) -> tuple[int, int]: ...
    async def reclaim_space(self, *, convert: bool = False) -> int: ...
    async def aclose(self) -> None: ...


class PrunableCheckpointer(Protocol):
    """A LangGraph checkpoint saver that can also drop a finished session's old checkpoints."""

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None: ...
    async def adelete_thread(self, thread_id: str) -> None: ...
    async def thread_ids(self) -> set[str]: ...
    async def reclaim_space(self, *, convert: bool = False) -> int: ...


MAX_PREFIX_MATCHES_SHOWN = 3


def _not_found(session_id: str) -> NoReturn:
    raise SessionNotFoundError(f"unknown session id: {session_id}")


async def resolve_session_id(
    id_or_prefix: str,
    *,
    exists: Callable[[str], Awaitable[bool]],
    ids_starting_with: Callable[[str, int], Awaitable[list[str]]],
) -> str:
    """The full id of the one session whose id is, or starts with, `id_or_prefix` (as `sessions` shows it).

    Both session stores answer this way: `exists` checks a full id, `ids_starting_with(prefix, limit)` lists up
    to `limit` ids in id order that start with the prefix. None is not found; more than one is ambiguous.
    """
    if not id_or_prefix:
        _not_found(id_or_prefix)
    if await exists(id_or_prefix):
        return id_or_prefix
    matches = await ids_starting_with(id_or_prefix, MAX_PREFIX_MATCHES_SHOWN + 1)
    if not matches:
        _not_found(id_or_prefix)
    if len(matches) > 1:
        shown = ", ".join(matches[:MAX_PREFIX_MATCHES_SHOWN]) + (
            ", ..." if len(matches) > MAX_PREFIX_MATCHES_SHOWN else ""
        )
        raise BadInputError(f"session id prefix {id_or_prefix!r} is ambiguous: it matches {shown}")
    return matches[0]
