"""A stand-in for a module's structlog logger that records (level, event) of every call."""

from __future__ import annotations

from collections.abc import Callable


class LevelRecorder:
    """Stands in for a module's structlog logger: records (level, event) of every call, whatever the process's
    logging configuration (another test may have set a level that drops debug calls before any capture)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, level: str) -> Callable[..., None]:
        def record(event: str, *args: object, **fields: object) -> None:
            self.calls.append((level, event))

        return record
