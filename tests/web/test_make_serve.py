"""`make serve` works out of the box: it builds the demo corpus when missing, allows it as a corpus
folder, and serves the page; a session on the `local` provider finds sources with no key."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from research_tool.bench.server_process import free_port

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow]


def make_ready() -> str | None:
    if shutil.which("make") is None:
        return "no `make` on this machine"
    if not (REPO / ".venv" / "bin" / "research-tool").exists():
        return "no project virtualenv (.venv): run `make venv`"
    stale = subprocess.run(["make", "-q", ".venv/.installed"], cwd=REPO, capture_output=True)
    if stale.returncode != 0:
        return "the project virtualenv is out of date: run `make venv`"
    return None


def test_make_serve_builds_the_demo_corpus_and_searches_it(tmp_path: Path) -> None:
    reason = make_ready()
    if reason:
        pytest.skip(reason)
    port = free_port()
    corpus = tmp_path / "demo_corpus"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_") and not k.endswith("_API_KEY")}
    env.update(RESEARCH_DATA_DIR=str(tmp_path / "data"), RESEARCH_LLM="offline", RESEARCH_CPU_WORKERS="0")
    command = ["make", "-s", "serve", f"PORT={port}", f"DEMO_CORPUS={corpus}"]
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=30.0, trust_env=False) as client:
            deadline = time.monotonic() + 90
            while True:
                assert process.poll() is None, (tmp_path / "serve.log").read_text()
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "make serve did not come up"
                time.sleep(0.1)
            assert (corpus / ".demo_corpus.json").exists()
            assert client.get("/").status_code == 200
            providers = {p["name"]: p for p in client.get("/api/providers").json()["providers"]}
            assert providers["local"]["available"], providers["local"]
            started = client.post(
                "/api/research/start",
                json={"query": "How do I run a subprocess with a timeout?", "providers": ["local"], "tier": "simple"},
            )
            assert started.status_code == 202, started.text
            session_id = started.json()["session_id"]
            while (status := client.get(f"/api/research/{session_id}/status").json())["status"] not in (
                "completed",
                "failed",
            ):
                assert time.monotonic() < deadline + 60, status
                time.sleep(0.1)
            assert status["status"] == "completed" and status["sources_found"] > 0
        assert "open http://127.0.0.1:" in (tmp_path / "serve.log").read_text()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        log.close()
