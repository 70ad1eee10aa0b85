"""A real `uvicorn research_tool.api.app:create_app --factory` subprocess (one worker) on 127.0.0.1, as a
user would run the server, and what /proc says about its memory."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from research_tool.core.errors import ResearchToolError

START_TIMEOUT_S = 60.0


class ServerStartError(ResearchToolError):
    """The benchmark's server subprocess did not come up."""

    error_type = "bench_server_start"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proc_status_kb(pid: int, field_name: str) -> int | None:
    """A `kB` field of /proc/<pid>/status (VmRSS: resident now, VmHWM: the resident peak)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    port: int
    started_wall: float  # time.time() just before the process was spawned
    healthy_wall: float | None = None
    stderr_path: Path | None = None
    rss_samples: list[tuple[float, int]] = field(default_factory=list)  # (time.time(), kB)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_kb(self) -> int | None:
        return proc_status_kb(self.pid, "VmRSS")

    def peak_rss_kb(self) -> int | None:
        return proc_status_kb(self.pid, "VmHWM")

    def sample_rss(self) -> int | None:
        value = self.rss_kb()
        if value is not None:
            self.rss_samples.append((time.time(), value))
        return value

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up (a crash, a power cut)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stderr_tail(self, chars: int = 3000) -> str:
        if self.stderr_path is None or not self.stderr_path.exists():
            return ""
        return self.stderr_path.read_text(errors="replace")[-chars:]


async def wait_healthy(server: ServerProcess, client: httpx.AsyncClient, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if server.process.poll() is not None:
            raise ServerStartError(f"the server exited with {server.process.returncode}: {server.stderr_tail()}")
        try:
            if (await client.get(f"{server.base_url}/healthz")).status_code == 200:
                server.healthy_wall = time.time()
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise ServerStartError(f"the server did not answer /healthz within {timeout_s:.0f} s")
        await asyncio.sleep(0.02)


def _spawn(command: list[str], env: dict[str, str], workdir: Path, stderr_path: Path) -> subprocess.Popen[bytes]:
    """Start `command` in `workdir` (created if needed) with its stderr going to `stderr_path`."""
    workdir.mkdir(parents=True, exist_ok=True)
    with stderr_path.open("wb") as stderr:
        return subprocess.Popen(command, env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=stderr)


@asynccontextmanager
async def spawned_server(
    command: list[str],
    port: int,
    env: dict[str, str],
    workdir: Path,
    client: httpx.AsyncClient,
    *,
    stderr_name: str,
) -> AsyncIterator[ServerProcess]:
    """Spawn `command` (a server that listens on `port`) in `workdir` with its stderr in `workdir/stderr_name`,
    wait for /healthz, yield it; SIGKILL it on exit if it still runs, and reap it."""
    stderr_path = workdir / stderr_name
    started = time.time()
    process = await asyncio.to_thread(_spawn, command, env, workdir, stderr_path)
    server = ServerProcess(process=process, port=port, started_wall=started, stderr_path=stderr_path)
    try:
        await wait_healthy(server, client)
        yield server
    finally:
        await asyncio.to_thread(_kill_and_wait, process)


@asynccontextmanager
async def uvicorn_server(env: dict[str, str], workdir: Path, client: httpx.AsyncClient) -> AsyncIterator[ServerProcess]:
    """Spawn the server, wait for /healthz, yield it; SIGKILL it on exit if it still runs."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "research_tool.api.app:create_app",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--log-level",
        "warning",
    ]
    async with spawned_server(command, port, env, workdir, client, stderr_name=f"uvicorn-{port}.stderr") as server:
        yield server


def research_tool_command(*args: str) -> list[str]:
    """The `research-tool` CLI of this interpreter (the package being measured, not one on PATH)."""
    return [sys.executable, "-m", "research_tool", *args]


@asynccontextmanager
async def cli_api_node(
    env: dict[str, str], workdir: Path, client: httpx.AsyncClient, *, worker: bool = False
) -> AsyncIterator[ServerProcess]:
    """`research-tool serve [--no-worker]` on a free loopback port (uvicorn, one process), once /healthz answers;
    SIGKILLed on exit if it still runs."""
    port = free_port()
    args = ["serve", "--host", "127.0.0.1", "--port", str(port)] + ([] if worker else ["--no-worker"])
    command = research_tool_command(*args)
    async with spawned_server(command, port, env, workdir, client, stderr_name=f"api-{port}.stderr") as server:
        yield server


async def start_cli_worker(env: dict[str, str], workdir: Path, name: str, ready_text: str) -> ServerProcess:
    """`research-tool worker` (no HTTP: `port` is 0), returned once its stderr shows `ready_text`; the caller
    kills it (`ServerProcess.kill`, or `stop_processes`)."""
    stderr_path = workdir / f"{name}.stderr"
    started = time.time()
    process = await asyncio.to_thread(_spawn, research_tool_command("worker"), env, workdir, stderr_path)
    worker = ServerProcess(process=process, port=0, started_wall=started, stderr_path=stderr_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while ready_text not in worker.stderr_tail(100_000):
        if process.poll() is not None:
            raise ServerStartError(f"the worker exited with {process.returncode}: {worker.stderr_tail()}")
        if time.monotonic() > deadline:
            await asyncio.to_thread(_kill_and_wait, process)
            raise ServerStartError(f"the worker did not start within {START_TIMEOUT_S:.0f} s: {worker.stderr_tail()}")
        await asyncio.sleep(0.05)
    worker.healthy_wall = time.time()
    return worker


def _kill_and_wait(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


async def stop_processes(processes: list[ServerProcess]) -> None:
    """SIGKILL every process still running and reap them all."""
    await asyncio.gather(*(asyncio.to_thread(_kill_and_wait, p.process) for p in processes))
