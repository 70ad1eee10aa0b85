"""structlog configuration: key-value events, JSON or console rendering, always on stderr."""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

LogFormat = Literal["json", "console"]


class _CurrentStderr:
    """Writes to whatever sys.stderr is at write time (tests and the CLI swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


# Libraries that log one INFO record per HTTP request they make: at a thousand sessions, formatting those
# (whatever handler a library installed on the root logger) costs the event loop more than the requests.
QUIET_LIBRARY_LOGGERS = ("httpx", "httpcore", "aiohttp.access")


def configure_logging(fmt: LogFormat = "console", level: str = "INFO") -> None:
    numeric = logging.getLevelName(level.upper())
    quiet = max(logging.WARNING, numeric if isinstance(numeric, int) else logging.INFO)
    for name in QUIET_LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)  # type: ignore[no-any-return]
