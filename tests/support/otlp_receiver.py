"""A real OTLP/HTTP trace receiver on 127.0.0.1 for tests (issue 36): it accepts `POST /v1/traces` with a protobuf
`ExportTraceServiceRequest` (what opentelemetry-exporter-otlp-proto-http sends), decodes it with the official
definitions (opentelemetry-proto) and keeps every span.

    with running_receiver() as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url      # the exporter adds /v1/traces
        ...
        receiver.wait_for(lambda spans: any(s.name == "research.session" for s in spans))
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

KINDS = {v: k.removeprefix("SPAN_KIND_").lower() for k, v in ProtoSpan.SpanKind.items()}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if which is None:
        return None
    return getattr(value, which)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@dataclass(frozen=True)
class Link:
    trace_id: str
    span_id: str


@dataclass(frozen=True)
class Event:
    name: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root
    name: str
    kind: str  # internal | server | client | ...
    attributes: dict[str, Any]
    events: list[Event]
    links: list[Link]
    status_code: int  # 0 unset, 1 ok, 2 error
    resource: dict[str, Any]
    scope: str


@dataclass
class OtlpReceiver:
    url: str = ""
    spans: list[Span] = field(default_factory=list)
    requests: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def add(self, request: ExportTraceServiceRequest) -> None:
        found = [
            Span(
                trace_id=span.trace_id.hex(),
                span_id=span.span_id.hex(),
                parent_span_id=span.parent_span_id.hex(),
                name=span.name,
                kind=KINDS.get(span.kind, str(span.kind)),
                attributes=_attributes(span.attributes),
                events=[Event(e.name, _attributes(e.attributes)) for e in span.events],
                links=[Link(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                status_code=span.status.code,
                resource=_attributes(resource_spans.resource.attributes),
                scope=scope_spans.scope.name,
            )
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        with self._changed:
            self.requests += 1
            self.spans.extend(found)
            self._changed.notify_all()

    def wait_for(self, condition: Callable[[list[Span]], bool], timeout_s: float = 30.0) -> list[Span]:
        """Block until `condition(spans)` holds (woken by each export), or fail after `timeout_s`."""
        with self._changed:
            if not self._changed.wait_for(lambda: condition(list(self.spans)), timeout=timeout_s):
                names = sorted({s.name for s in self.spans})
                raise AssertionError(f"no such spans within {timeout_s} s; received {len(self.spans)}: {names}")
            return list(self.spans)

    def trace(self, trace_id: str) -> list[Span]:
        with self._changed:
            return [s for s in self.spans if s.trace_id == trace_id]


def _handler(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_error(404 if self.path != "/v1/traces" else 415)
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            receiver.add(request)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextmanager
def running_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
