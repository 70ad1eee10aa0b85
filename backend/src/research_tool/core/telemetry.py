"""OpenTelemetry tracing: one trace per research session (issue 36), off unless an OTLP endpoint is set.

The `otel` extra (opentelemetry-api, -sdk, -exporter-otlp-proto-http) is configured by the standard variables
only: `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) turns it on; `OTEL_SERVICE_NAME`
(default `research-tool`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER[_ARG]`, `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_BSP_*` are read by the SDK itself; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keep it off.
`RESEARCH_TRACE_CONTENT=1` adds the question, prompts and answers to spans (otherwise a hash of the question).

Every layer calls the helpers here (graph, engines and providers may only import downward). Off, `span()` is
one global read that hands back a shared no-op object, and nothing of OpenTelemetry is imported: the code
path costs nothing measurable (`make bench`, tracing_overhead).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
Attributes = Mapping[str, AttributeValue]

TRACEPARENT = "traceparent"
# W3C trace context: version 00, 32 hex trace id, 16 hex parent span id, 2 hex flags (all-zero ids are invalid)
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
DEFAULT_SERVICE_NAME = "research-tool"
# One export's limit, retries included (the SDK's default is 10 s): what an unreachable or silent collector may
# add when a process exits (issue 43: 7-10 s at the end of a `run`). The standard variables raise it.
TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
DEFAULT_EXPORT_TIMEOUT_S = 1.0
# The SDK's loggers that report a failed export (a warning per retry, an error per batch, a dropped batch)
EXPORT_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk.trace.export",
)
INSTRUMENTATION_NAME = "research_tool"


class _State:
    """The process's tracer while tracing is on (None: off), and whether span content may hold text."""

    tracer: Tracer | None = None
    provider: TracerProvider | None = None
    content: bool = False
    owners: int = 0
    export_warning: _OneExportWarning | None = None  # says the one line of a process whose spans are not exported


_STATE = _State()


def enabled() -> bool:
    return _STATE.tracer is not None


def content_enabled() -> bool:
    """RESEARCH_TRACE_CONTENT=1: spans may carry the question, prompts and answers."""
    return _STATE.content


def tracing_requested(environ: Mapping[str, str] | None = None) -> bool:
    """An OTLP endpoint is set and neither OTEL_SDK_DISABLED nor OTEL_TRACES_EXPORTER=none says otherwise."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def export_timeout_s(environ: Mapping[str, str] | None = None) -> float | None:
    """The exporter's timeout: None when a standard variable sets it (the SDK reads it), else 1 s."""
    env = os.environ if environ is None else environ
    return None if any(env.get(name, "").strip() for name in TIMEOUT_VARIABLES) else DEFAULT_EXPORT_TIMEOUT_S


class _OneExportWarning(logging.Filter):
    """The SDK's export failures become one warning line for the whole process (it wrote a line per retry and
    per batch: four at the end of a `run` with the collector down); the rest are debug lines."""

    def __init__(self, endpoint: str) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        self.say(record.getMessage()[:300])
        return False

    def say(self, reason: str) -> None:
        """The warning the first time, a debug line after it."""
        log = structlog.get_logger(__name__)
        if self.said:
            log.debug("traces_not_exported", endpoint=self.endpoint, reason=reason)
        else:
            self.said = True
            log.warning(
                "traces_not_exported",
                endpoint=self.endpoint,
                reason=reason,
                note="spans are dropped while the collector does not answer; said once",
            )


def _quiet_export_failures() -> None:
    endpoint = next((os.environ[n].strip() for n in ENDPOINT_VARIABLES if os.environ.get(n, "").strip()), "")
    one = _STATE.export_warning = _OneExportWarning(endpoint)
    for name in EXPORT_LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, _OneExportWarning)]:
            logger.removeFilter(old)
        logger.addFilter(one)


def _start_provider() -> tuple[TracerProvider, Tracer] | None:
    """The SDK's tracer provider with a batching OTLP/HTTP exporter, or None (and a warning) without the extra."""
    from research_tool.core.extras import install_hint, module_installed

    log = structlog.get_logger(__name__)
    if not module_installed("opentelemetry.sdk") or not module_installed("opentelemetry.exporter.otlp.proto.http"):
        log.warning("tracing_unavailable", reason="the 'otel' extra is not installed", hint=install_hint("otel"))
        return None
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol and protocol.strip() != "http/protobuf":
        log.warning("tracing_protocol_ignored", protocol=protocol, used="http/protobuf")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    defaults = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": DEFAULT_SERVICE_NAME}
    provider = TracerProvider(resource=Resource.create(defaults))  # the sampler from OTEL_TRACES_SAMPLER
    _quiet_export_failures()
    # endpoint and headers from OTEL_*; the timeout too when set, else 1 s (`export_timeout_s`); the collector's
    # answer read through a bounded session
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(timeout=export_timeout_s(), session=_bounded_session()))
    )
    from research_tool import __version__

    return provider, provider.get_tracer(INSTRUMENTATION_NAME, __version__)


@asynccontextmanager
async def open_tracing(*, content: bool = False) -> AsyncIterator[bool]:
    """Tracing on for as long as the block runs when an endpoint is set (yields whether it is on); the spans
    still queued are exported when the last opener leaves. Nested opens share the first one's tracer."""
    if _STATE.owners == 0 and tracing_requested():
        started = _start_provider()
        if started is not None:
            _STATE.provider, _STATE.tracer = started
            _STATE.content = content
    _STATE.owners += 1
    try:
        yield enabled()
    finally:
        _STATE.owners -= 1
        if _STATE.owners == 0 and _STATE.provider is not None:
            provider = _STATE.provider
            _STATE.tracer = _STATE.provider = None
            _STATE.content = False
            await _shut_down_within(provider, shutdown_export_s())


# The last export at shutdown may take this long: inside the 5 s shutdown budget, with the 3 s graceful stop and
# the process exit (a collector that accepts and never answers held `serve` 17.9 s, one that trickled 30.2 s).
EXPORT_AT_SHUTDOWN_S = 1.0
# ... unless the operator set the exporter's timeout (OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT): then that, up to this
MAX_EXPORT_AT_SHUTDOWN_S = 3.5


def shutdown_export_s(environ: Mapping[str, str] | None = None) -> float:
    """How long the last export at shutdown is waited for: 1 s, or the timeout a standard variable sets (at most
    `MAX_EXPORT_AT_SHUTDOWN_S`, inside the 5 s shutdown budget)."""
    env = os.environ if environ is None else environ
    for name in TIMEOUT_VARIABLES:
        try:
            seconds = float(env.get(name, "").strip())
        except ValueError:
            continue
        if seconds > 0:
            # the SDK reads these in seconds (the spec's milliseconds aside); anything larger is capped
            return min(seconds, MAX_EXPORT_AT_SHUTDOWN_S)
    return EXPORT_AT_SHUTDOWN_S


# What is read of a collector's answer (its status line and headers aside); the rest is never read (a 400 MB
# answer raised RSS by 395 MB). OTLP answers are a few bytes of protobuf (partial success at most).
MAX_COLLECTOR_ANSWER_BYTES = 64 * 1024


async def _shut_down_within(provider: TracerProvider, within_s: float) -> None:
    """Flush the spans still queued and stop the exporter, in a daemon thread waited for `within_s` at most:
    what a slow or hostile collector still holds then is dropped (with a warning) instead of the process."""
    import threading

    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def finished() -> None:
        if not done.done():
            done.set_result(None)

    def shut_down() -> None:
        try:
            provider.shutdown()
        finally:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
                loop.call_soon_threadsafe(finished)

    threading.Thread(target=shut_down, name="trace-export-at-shutdown", daemon=True).start()
    try:
        await asyncio.wait_for(done, within_s)
    except TimeoutError:
        reason = f"the collector did not answer within {within_s:g} s at shutdown; what it held is dropped"
        if _STATE.export_warning is not None:
            _STATE.export_warning.say(reason)  # the process's one line about traces
        else:
            structlog.get_logger(__name__).warning("traces_not_exported", reason=reason)


def _bounded_session() -> Any:
    """A requests session for the OTLP exporter that reads at most MAX_COLLECTOR_ANSWER_BYTES of an answer."""
    import requests

    class BoundedSession(requests.Session):
        def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
            kwargs["stream"] = True
            response = super().request(method, url, *args, **kwargs)
            try:
                body = response.raw.read(MAX_COLLECTOR_ANSWER_BYTES, decode_content=True)
            except Exception:  # a reset or a timeout while reading: the status is what the exporter needs
                body = b""
            response._content = body or b""
            response._content_consumed = True
            response.close()  # not returned to the pool half read: the rest of a long answer is never read
            return response

    return BoundedSession()


# --- spans --------------------------------------------------------------------------------------------------------


class SpanHandle:
    """What the code that opened a span may do with it. The base class is the no-op used while tracing is off."""

    __slots__ = ()

    def set(self, key: str, value: AttributeValue | None) -> None:
        """One attribute (None: left out)."""

    def set_many(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        """Several attributes (None values left out)."""

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        """A point in time inside the span (a rate-limit wait, a retry)."""

    def fail(self, message: str) -> None:
        """Mark the span's status ERROR with a one-line description."""

    def traceparent(self) -> str | None:
        """The span's W3C traceparent (None while off)."""
        return None

    def __enter__(self) -> SpanHandle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


NOOP_SPAN = SpanHandle()
# Exceptions that end a span without it failing (by class name, so this module imports neither asyncio's nor
# LangGraph's): a cancelled task, and LangGraph's interrupt() and its other control-flow signals.
NOT_FAILURES = frozenset({"CancelledError", "GraphBubbleUp"})


class _LiveSpan(SpanHandle):
    __slots__ = ("_scope", "_span")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._scope: Any = None

    def set(self, key: str, value: AttributeValue | None) -> None:
        if value is not None:
            self._span.set_attribute(key, value)

    def set_many(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        self._span.set_attributes({k: v for k, v in attributes.items() if v is not None})

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        self._span.add_event(name, dict(attributes or {}))

    def fail(self, message: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_status(Status(StatusCode.ERROR, message))

    def traceparent(self) -> str | None:
        return _format_traceparent(self._span)

    def __enter__(self) -> SpanHandle:
        from opentelemetry.trace import use_span

        self._scope = use_span(self._span, end_on_exit=True, record_exception=False, set_status_on_exception=False)
        self._scope.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None:
            from opentelemetry.trace import Status, StatusCode

            # A cancellation (a stop, a shutdown) or LangGraph's interrupt (a clarification question) is not the
            # span's failure: it says so without an error status.
            not_failures = {c.__name__ for c in type(exc).__mro__} & NOT_FAILURES
            if not_failures:
                self._span.set_attribute("research.ended_by", sorted(not_failures)[0])
            else:
                self._span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:300]))
                self._span.set_attribute("error.type", type(exc).__qualname__)
        scope, self._scope = self._scope, None
        scope.__exit__(exc_type, exc, tb)


def span(
    name: str,
    attributes: Mapping[str, AttributeValue | None] | None = None,
    *,
    kind: str = "internal",
    parent: str | None = None,
    links: Sequence[str] = (),
    root: bool = False,
) -> SpanHandle:
    """A span around a `with` block, a child of the current one (or of `parent`, a traceparent; `root`: of
    none), current inside the block. `kind`: internal | client | server. `links`: traceparents to link to."""
    tracer = _STATE.tracer
    if tracer is None:
        return NOOP_SPAN
    from opentelemetry import context as otel_context
    from opentelemetry.trace import Link, SpanKind

    ctx: Context | None = None
    if parent is not None:
        ctx = context_from_traceparent(parent)
    elif root:
        ctx = otel_context.Context()  # an empty context: a new trace
    span_links = [Link(sc) for sc in (_span_context(tp) for tp in links) if sc is not None]
    started = tracer.start_span(
        name,
        context=ctx,
        kind=getattr(SpanKind, kind.upper()),
        attributes={k: v for k, v in (attributes or {}).items() if v is not None},
        links=span_links,
    )
    return _LiveSpan(started)


def current() -> SpanHandle:
    """The current span, to add attributes or events to (the no-op while off or outside any span)."""
    if _STATE.tracer is None:
        return NOOP_SPAN
    from opentelemetry.trace import get_current_span

    found = get_current_span()
    return _LiveSpan(found) if found.get_span_context().is_valid else NOOP_SPAN


def current_ids() -> tuple[str, str] | None:
    """(trace_id, span_id) in hex of the current span, or None (off, or outside any span)."""
    if _STATE.tracer is None:
        return None
    from opentelemetry.trace import get_current_span

    sc = get_current_span().get_span_context()
    if not sc.is_valid:
        return None
    return f"{sc.trace_id:032x}", f"{sc.span_id:016x}"


def current_trace_id() -> str | None:
    ids = current_ids()
    return ids[0] if ids is not None else None


# --- W3C trace context ------------------------------------------------------------------------------------------


def valid_traceparent(value: str | None) -> str | None:
    """`value` normalised if it is a W3C traceparent of version 00 with non-zero ids; else None (ignored, as the
    W3C spec asks of a malformed header)."""
    if not value:
        return None
    text = value.strip().lower()
    match = _TRACEPARENT.fullmatch(text)
    if match is None or set(match.group(1)) == {"0"} or set(match.group(2)) == {"0"}:
        return None
    return text


def _format_traceparent(span: Span) -> str | None:
    sc = span.get_span_context()
    if not sc.is_valid:
        return None
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"


def _span_context(traceparent: str) -> Any:
    """The remote SpanContext a traceparent names, or None when it is not a valid one."""
    from opentelemetry.trace import SpanContext, TraceFlags

    text = valid_traceparent(traceparent)
    if text is None:
        return None
    _, trace_id, span_id, flags = text.split("-")
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16)))


def context_from_traceparent(traceparent: str) -> Context | None:
    """A context whose current span is the remote one `traceparent` names (None: not a valid one)."""
    from opentelemetry.trace import NonRecordingSpan, set_span_in_context

    sc = _span_context(traceparent)
    return None if sc is None else set_span_in_context(NonRecordingSpan(sc))


def incoming_traceparent(headers: Mapping[str, str]) -> str | None:
    """The caller's trace context from request headers, kept only while tracing is on."""
    if _STATE.tracer is None:
        return None
    return valid_traceparent(headers.get(TRACEPARENT))


# --- what spans may say about the question ---------------------------------------------------------------------


def text_digest(text: str) -> str:
    """A SHA-256 of the text (first 16 hex digits): tells sessions on one question apart without the question."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def question_attributes(question: str) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {"research.question.sha256": text_digest(question)}
    if _STATE.content:
        attributes["research.question"] = question
    return attributes


# --- structlog correlation --------------------------------------------------------------------------------------


def add_trace_ids(_: Any, __: str, event_dict: Any) -> Any:
    """structlog processor: `trace_id` and `span_id` of the current span on every line written inside one."""
    if _STATE.tracer is None:
        return event_dict
    ids = current_ids()
    if ids is not None:
        event_dict.setdefault("trace_id", ids[0])
        event_dict.setdefault("span_id", ids[1])
    return event_dict
