"""Benchmark: a session against a model server that never answers (issue 14).

An OpenAI-compatible server on 127.0.0.1 lists its model (so the preflight passes) and then holds every chat
request open without a byte. With RESEARCH_MAX_EXECUTION_TIME_S=20 and RESEARCH_LLM_TIMEOUT_S=60 the session
must end within 25 s, with search done (the local demo corpus) and `degraded_mode: true` (the model wrote
nothing; the report says so in `metadata.fallbacks`). It used to take 365 s and run no search.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from research_tool.bench.results import BenchResult
from research_tool.core.settings import Settings
from research_tool.demo_corpus import build_demo_corpus
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services

TIME_LIMIT_S = 20.0
LLM_TIMEOUT_S = 60.0
TARGET_WALL_S = 25.0
QUESTION = "How do I run a subprocess with a timeout and capture its output?"


class HangingModelServer:
    """`GET /v1/models` answers; `POST /v1/chat/completions` never does (until `stop`)."""

    def __init__(self) -> None:
        self._release = threading.Event()
        self.chat_requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                body = json.dumps({"object": "list", "data": [{"id": "hang", "object": "model", "owned_by": "bench"}]})
                payload = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.chat_requests += 1
                owner._release.wait()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> HangingModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


async def run_model_hang(workdir: Path, *, time_limit_s: float = TIME_LIMIT_S) -> BenchResult:
    result = BenchResult(
        name="model_hang",
        title="A session against a model that never answers",
        parameters={
            "RESEARCH_MAX_EXECUTION_TIME_S": time_limit_s,
            "RESEARCH_LLM_TIMEOUT_S": LLM_TIMEOUT_S,
            "providers": "local (demo corpus)",
            "tier": "standard",
        },
    )
    corpus = workdir / "model_hang_corpus"
    build_demo_corpus(corpus, modules=("subprocess", "shlex", "signal"))
    with HangingModelServer() as server:
        settings = Settings(
            _env_file=None,
            llm="openai:hang",
            openai_base_url=server.base_url,
            openai_api_key="not-needed",
            llm_timeout_s=LLM_TIMEOUT_S,
            max_execution_time_s=time_limit_s,
            data_dir=workdir / "model_hang_data",
        )
        request = ResearchRequest(
            query=QUESTION,
            providers=["local"],
            corpus_dirs=[str(corpus)],
            fetch=False,
            privacy_mode="local_only",
            tier="standard",
        )
        async with open_research_services(settings) as services:
            services.validate(request)
            started = time.perf_counter()
            record = await services.runner.create(request)
            services.runner.launch(record.id)
            record = await services.runner.wait(record.id)
            wall = time.perf_counter() - started
            report = await services.runner.report(record.id) if record.status == "completed" else None
    meta = (report or {}).get("metadata", {})
    reasons = sorted({f["reason"] for f in meta.get("fallbacks", [])})
    result.add(
        "session wall time", round(wall, 2), "s", target=TARGET_WALL_S * time_limit_s / TIME_LIMIT_S, comparison="<="
    )
    result.add("status", record.status)
    result.add("provider calls (search done)", meta.get("provider_calls", 0), target=1, comparison=">=")
    result.add("sources retrieved", meta.get("sources_retrieved", 0))
    result.add("degraded_mode", int(bool(meta.get("degraded_mode"))), target=1, comparison="==")
    result.add("model fallbacks", len(meta.get("fallbacks", [])), note=", ".join(reasons))
    result.add("chat requests the server received", server.chat_requests)
    result.details["degraded_reason"] = meta.get("degraded_reason")
    result.details["stop_reason"] = (report or {}).get("stop_reason")
    result.seconds = round(wall, 2)
    return result
