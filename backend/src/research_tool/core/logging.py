"""structlog configuration: key-value events, JSON or console rendering, always on stderr."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import MutableMapping
from types import TracebackType
from typing import Any, Literal

import structlog

from research_tool.core.telemetry import add_trace_ids

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


# An exception is logged as its one-line summary plus at most this many innermost frames, cut at this many
# characters: plain text, no local variables. structlog's console default renders a rich traceback with every
# frame's locals; under a storm of failures those took about 800 KB each to render on the event loop, which
# stalled it for seconds (issue 22).
TRACEBACK_FRAMES = 8
TRACEBACK_CHARS = 4000

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def _exc_info_of(value: Any) -> ExcInfo | None:
    if isinstance(value, BaseException):
        return (type(value), value, value.__traceback__)
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], BaseException):
        return value
    if value:  # True (log.exception): the exception being handled
        exc = sys.exc_info()
        return exc if exc[1] is not None else None
    return None


def bounded_traceback(exc_info: ExcInfo) -> str:
    """`Type: message` on the first line, then the innermost TRACEBACK_FRAMES frames (no locals, no chained
    exceptions), at most TRACEBACK_CHARS characters in all."""
    _, exc, tb = exc_info
    summary = " ".join(traceback.format_exception_only(exc)[-1].split())
    frames = traceback.format_tb(tb, limit=-TRACEBACK_FRAMES) if tb is not None else []
    text = summary + ("\nTraceback (innermost frames):\n" + "".join(frames).rstrip() if frames else "")
    return text if len(text) <= TRACEBACK_CHARS else text[: TRACEBACK_CHARS - 3] + "..."


def bound_exceptions(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: `exc_info` (log.exception) becomes an `exception` string (bounded_traceback)."""
    exc_info = _exc_info_of(event_dict.pop("exc_info", None))
    if exc_info is not None:
        event_dict["exception"] = bounded_traceback(exc_info)
    return event_dict


def _plain_exception(sio: Any, exc_info: ExcInfo) -> None:
    """The console renderer's exception formatter, should an `exc_info` ever reach it."""
    sio.write("\n" + bounded_traceback(exc_info))


def configure_logging(fmt: LogFormat = "console", level: str = "INFO") -> None:
    numeric = logging.getLevelName(level.upper())
    quiet = max(logging.WARNING, numeric if isinstance(numeric, int) else logging.INFO)
    for name in QUIET_LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False, exception_formatter=_plain_exception)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,  # trace_id and span_id inside a traced session (nothing while tracing is off)
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            bound_exceptions,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)  # type: ignore[no-any-return]
