"""What every node gets besides the state: the run's dependencies (LangGraph runtime context).

Nothing here is checkpointed: it is rebuilt by whoever runs the graph (CLI or server) each time a
session starts or resumes.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from research_tool.core.settings import Settings
from research_tool.engines.base import ReasoningEngine
from research_tool.graph.decisions.saturation import SaturationThresholds
from research_tool.providers.fetching.crawler import Crawler
from research_tool.providers.gateway import SearchGateway


class EventSink(Protocol):
    async def emit(self, type: str, phase: str | None, message: str, data: dict[str, Any] | None = None) -> None: ...


class MemoryRecorder(Protocol):
    """The part of the cross-session memory store the nodes use (providers.memory.MemoryStore)."""

    async def record_results(self, domain: str, provider: str, count: int) -> None: ...
    async def record_citations(self, domain: str, provider: str, count: int) -> None: ...
    async def record_failure(self, domain: str, failure: Any) -> None: ...
    async def rank_providers(self, domain: str, names: list[str]) -> list[tuple[str, float]]: ...


class PageTextStore(Protocol):
    """Where page text lives instead of the graph state (runtime.content_store.ContentStore).

    The state keeps each source's `content_key` and `content_length`; graph/nodes/page_text.py moves text
    in (collect) and back out for the nodes that read it."""

    async def put_many(self, session_id: str, texts: Mapping[str, str]) -> dict[str, str]: ...
    async def get_many(self, refs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]: ...


class InMemoryPageTexts:
    """A PageTextStore for a graph run without a data dir (texts live as long as the object)."""

    def __init__(self) -> None:
        self._texts: dict[tuple[str, str], str] = {}

    async def put_many(self, session_id: str, texts: Mapping[str, str]) -> dict[str, str]:
        keys = {url: hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() for url, text in texts.items()}
        for url, text in texts.items():
            self._texts[(url, keys[url])] = text
        return keys

    async def get_many(self, refs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        return {ref: self._texts[ref] for ref in refs if ref in self._texts}


class NullEvents:
    async def emit(self, type: str, phase: str | None, message: str, data: dict[str, Any] | None = None) -> None:
        return None


@dataclass
class ResearchContext:
    session_id: str
    settings: Settings
    engine: ReasoningEngine
    gateway: SearchGateway
    client: httpx.AsyncClient
    crawler: Crawler | None = None
    events: EventSink = field(default_factory=NullEvents)
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    memory: MemoryRecorder | None = None
    thresholds: SaturationThresholds = field(default_factory=SaturationThresholds)
    corpus_dirs: list[Path] = field(default_factory=list)
    page_texts: PageTextStore = field(default_factory=InMemoryPageTexts)

    def stop_requested(self) -> bool:
        return self.stop_event.is_set()
