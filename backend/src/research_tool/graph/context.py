"""What every node gets besides the state: the run's dependencies (LangGraph runtime context).

Nothing here is checkpointed: it is rebuilt by whoever runs the graph (CLI or server) each time a
session starts or resumes.
"""

from __future__ import annotations

import asyncio
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

    def stop_requested(self) -> bool:
        return self.stop_event.is_set()
