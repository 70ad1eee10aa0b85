"""A `research-tool run` process killed mid-research resumes where it stopped, without redoing finished work."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from research_tool.bench.wiki_replay import WikiReplay, running_wiki

pytestmark = pytest.mark.slow
QUESTION = "How do I run a subprocess with a timeout and capture its output?"


@pytest.fixture
def wiki() -> Iterator[tuple[str, WikiReplay]]:
    with running_wiki(delay_s=0.25) as server:
        yield server


def cli_env(data_dir: Path, wiki_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESEARCH_", "OPENAI", "ANTHROPIC", "OLLAMA"))}
    env.update(
        RESEARCH_DATA_DIR=str(data_dir),
        RESEARCH_WIKIPEDIA_BASE_URL=wiki_url,
        RESEARCH_WIKIPEDIA_RPS="100",
        RESEARCH_MAX_QUERIES="3",
    )
    return env


def start_run(data_dir: Path, wiki_url: str, session_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "research_tool",
            "run",
            QUESTION,
            "--providers",
            "wikipedia",
            "--no-fetch",
            "--no-clarify",
            "--format",
            "json",
            "--session-id",
            session_id,
        ],
        env=cli_env(data_dir, wiki_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def events(data_dir: Path, session_id: str) -> list[tuple[int, str, str | None, dict[str, object]]]:
    db = data_dir / "sessions.db"
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            rows = conn.execute(
                "SELECT seq, type, phase, data FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
    except sqlite3.OperationalError:  # the process has not created its schema yet
        return []
    return [(seq, type_, phase, json.loads(data)) for seq, type_, phase, data in rows]


def wait_for_phase(data_dir: Path, session_id: str, phase: str, iteration: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for _, type_, ph, data in events(data_dir, session_id):
            if type_ == "phase_started" and ph == phase and data.get("iteration") == iteration:
                return
        time.sleep(0.05)
    raise AssertionError(f"{phase} of cycle {iteration} never started")


def resume(data_dir: Path, wiki_url: str, session_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "research_tool", "resume", session_id, "--format", "json"],
        env=cli_env(data_dir, wiki_url),
        capture_output=True,
        text=True,
        timeout=180,
    )


def phase_runs(data_dir: Path, session_id: str) -> Counter[tuple[str | None, object]]:
    return Counter(
        (phase, data.get("iteration"))
        for _, type_, phase, data in events(data_dir, session_id)
        if type_ == "phase_started"
    )


def assert_clean_report(report: dict[str, object]) -> None:
    citations = report["citations"]
    assert isinstance(citations, list) and citations
    urls = [c["url"] for c in citations]
    assert len(urls) == len(set(urls))
    statements = [f["statement"] for f in report["findings"]]  # type: ignore[index]
    assert len(statements) == len(set(statements))


def test_sigkill_in_second_collect_then_resume_completes(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> None:
    url, _ = wiki
    data_dir = tmp_path / "data"
    proc = start_run(data_dir, url, "killed-session")
    try:
        wait_for_phase(data_dir, "killed-session", "collect", 2)
        time.sleep(0.3)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    done = resume(data_dir, url, "killed-session")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["status"] == "completed"
    assert_clean_report(report)

    runs = phase_runs(data_dir, "killed-session")
    for finished in [("clarify", 0), ("plan", 0), ("collect", 1), ("process", 1), ("analyze", 1), ("evaluate", 1)]:
        assert runs[finished] == 1, f"{finished} ran {runs[finished]} times"
    assert runs[("collect", 2)] == 2  # the node in flight when killed, and its re-run
    seqs = [seq for seq, *_ in events(data_dir, "killed-session")]
    assert seqs == list(range(1, len(seqs) + 1))


def test_sigint_exits_130_and_the_session_resumes(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> None:
    url, _ = wiki
    data_dir = tmp_path / "data"
    proc = start_run(data_dir, url, "interrupted")
    wait_for_phase(data_dir, "interrupted", "collect", 1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr[-2000:]
    assert "resume" in stderr
    assert "Traceback" not in stderr

    done = resume(data_dir, url, "interrupted")
    assert done.returncode == 0, done.stderr[-2000:]
    assert_clean_report(json.loads(done.stdout))
