"""Benchmark: what OpenTelemetry tracing costs (issue 36): sessions per minute with tracing on and off, in one run.

Rounds alternate off / on (after one warm-up round off, not counted), each a fresh in-process research service
(`open_research_services`, as `research-tool run` and the server use it) running `sessions` sessions at once
with the offline engine against the Wikipedia replay (in a process of its own, no delay, a rate high enough not
to bind): the machine's CPU, not a provider, sets the pace, so any cost of the spans shows. With tracing on,
every span goes over OTLP/HTTP, through the SDK's batching exporter as in production, to a sink on 127.0.0.1
(a thread of this process that keeps the requests and counts their spans after the last round). Figures: the
median sessions per minute of each mode, their ratio (target: tracing on at most 3 % below off), the process
CPU seconds per session, and the spans per session the sink received.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from research_tool.bench.questions import QUESTIONS
from research_tool.bench.replay_env import BenchEnvironment, ReplayProvider
from research_tool.bench.replay_process import replay_process
from research_tool.bench.results import BenchResult
from research_tool.core.extras import install_hint, module_installed
from research_tool.core.telemetry import ENDPOINT_VARIABLES
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services

WIKIPEDIA_RPS = 1000.0
MAX_ITERATIONS = 2
TARGET_RATIO = 0.97  # tracing on: at most 3 % fewer sessions per minute than off
TRACING_VARIABLES = (*ENDPOINT_VARIABLES, "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER")


class SpanSink:
    """An OTLP/HTTP endpoint on 127.0.0.1 that keeps each export's body; `count_spans` decodes them afterwards
    (outside the timed rounds: decoding is a collector's work, not the traced process's)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()
        self.url = ""

    def received(self, body: bytes) -> None:
        with self._lock:
            self.bodies.append(body)

    def count_spans(self) -> int:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        with self._lock:
            bodies = list(self.bodies)
        count = 0
        for body in bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            count += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        return count


@contextmanager
def running_sink() -> Iterator[SpanSink]:
    sink = SpanSink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            sink.received(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    sink.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def tracing_variables(endpoint: str | None) -> Iterator[None]:
    """The OTEL_* variables of one round: an endpoint (on) or none (off); the caller's own restored after."""
    saved = {name: os.environ.pop(name) for name in TRACING_VARIABLES if name in os.environ}
    if endpoint is not None:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    try:
        yield
    finally:
        for name in TRACING_VARIABLES:
            os.environ.pop(name, None)
        os.environ.update(saved)


async def _round(env: BenchEnvironment, sessions: int, offset: int) -> dict[str, Any]:
    """Run `sessions` sessions at once in a fresh service; their wall time and the process's CPU time."""
    async with open_research_services(env.settings()) as services:
        ids = []
        for i in range(sessions):
            request = ResearchRequest(
                query=QUESTIONS[(offset + i) % len(QUESTIONS)],
                tier="standard",
                providers=env.provider_names,
                fetch=False,
                clarify=False,
                max_iterations=MAX_ITERATIONS,
            )
            ids.append((await services.runner.create(request)).id)
        cpu_before, started = time.process_time(), time.perf_counter()
        for sid in ids:
            services.runner.launch(sid)
        records = [await services.runner.wait(sid) for sid in ids]
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "completed": sum(r.status == "completed" for r in records),
        "sessions_per_minute": round(sessions * 60 / wall, 2),
    }


async def run_tracing(workdir: Path, *, sessions: int = 8, rounds: int = 3) -> BenchResult:
    result = BenchResult(
        name="tracing",
        title="OpenTelemetry tracing: sessions per minute, on vs off",
        parameters={
            "sessions_per_round": sessions,
            "rounds": f"{rounds} off and {rounds} on, alternating, after one warm-up round (off, not counted)",
            "engine": "offline",
            "tier": f"standard, at most {MAX_ITERATIONS} cycles",
            "provider": "wikipedia replay (own process, no delay)",
            "exporter": "OTLP/HTTP protobuf to a sink on 127.0.0.1, batching span processor (SDK defaults)",
        },
    )
    if not module_installed("opentelemetry.sdk") or not module_installed("opentelemetry.proto"):
        result.skipped = f"the 'otel' extra is not installed ({install_hint('otel')})"
        return result
    started = time.perf_counter()
    rows: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    with running_sink() as sink:
        async with replay_process(0.0) as wiki_url:
            plan = ["warm-up", *(mode for _ in range(rounds) for mode in ("off", "on"))]
            for n, mode in enumerate(plan):
                env = BenchEnvironment(
                    data_dir=workdir / "tracing" / f"round-{n}",  # a fresh data dir per round
                    providers=(ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),),
                    max_concurrent_sessions=sessions,
                )
                with tracing_variables(sink.url if mode == "on" else None):
                    row = await _round(env, sessions, offset=n * sessions)
                if mode != "warm-up":
                    rows[mode].append(row)
        spans_on = sink.count_spans()  # every span was exported when its round's services closed
    off = statistics.median(r["sessions_per_minute"] for r in rows["off"])
    on = statistics.median(r["sessions_per_minute"] for r in rows["on"])
    result.add("sessions per minute, tracing off (median)", off, "/min")
    result.add("sessions per minute, tracing on (median)", on, "/min")
    result.add("on / off", round(on / off, 3) if off else None, "", target=TARGET_RATIO, comparison=">=")
    for mode in ("off", "on"):
        cpu = sum(r["cpu_s"] for r in rows[mode]) / (sessions * len(rows[mode]))
        result.add(f"CPU seconds per session, tracing {mode}", round(cpu, 3), "s")
    result.add("spans per session (tracing on)", round(spans_on / (sessions * rounds), 1), "")
    total = sessions * rounds * 2
    completed = sum(r["completed"] for mode in rows.values() for r in mode)
    result.add("sessions completed", completed, "", target=total, comparison="==")
    result.details["rounds"] = rows
    result.seconds = round(time.perf_counter() - started, 2)
    return result
