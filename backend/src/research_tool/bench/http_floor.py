"""The HTTP stack's own floor under the scale benchmark's burst of starts.

The same N `POST /api/research/start`, sent together by the same client, go to a uvicorn app started the same
way (one worker, 127.0.0.1) that reads each body and answers 202 with a fixed session id, doing nothing else.
Its start POST p95 is the part of the real server's that no handler can remove on this machine: accepting N
connections and parsing N requests on one event loop, with the client on the same cores.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx

from research_tool.bench.process_tree import cpu_seconds
from research_tool.bench.server_process import free_port, spawned_server
from research_tool.bench.start_burst import start_sessions
from research_tool.bench.stats import ms, percentile

ACCEPTED = b'{"session_id":"floor","status":"queued"}'


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ASGI: /healthz answers 200; any other request is read to its end and answered 202."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    status = 200 if scope["path"] == "/healthz" else 202
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"{}" if status == 200 else ACCEPTED})


async def floor_starts(n: int, workdir: Path, client: httpx.AsyncClient, env: dict[str, str]) -> dict[str, Any]:
    """Start POST p50/p95 and the app's CPU per start, for `n` starts sent together to the do-nothing app."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", f"{__name__}:app", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", "1", "--log-level", "warning"]
    async with spawned_server(command, port, env, workdir, client, stderr_name=f"floor-{port}.stderr") as server:
        cpu_before = cpu_seconds(server.pid)
        _, latencies, failures = await start_sessions(server.base_url, n, max_iterations=2)
        cpu_ms = 1000 * (cpu_seconds(server.pid) - cpu_before)
    return {
        "floor_start_p50_ms": ms(percentile(latencies, 0.5)),
        "floor_start_p95_ms": ms(percentile(latencies, 0.95)),
        "floor_failed_starts": len(failures),
        "floor_cpu_ms_per_start": round(cpu_ms / n, 3) if n else None,
    }
