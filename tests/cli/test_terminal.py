"""The CLI on a terminal (a pseudo-terminal, as a user's shell gives it) and the Ctrl-C cases (issue 11, item 5):
one live progress line instead of the event log, the report rendered as rich markdown (plain in a pipe), ids
that survive 80 columns, Ctrl-C naming the session it saved, and an interrupt just after completion still
printing the report."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import re
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from research_tool import cli
from research_tool.bench.wiki_replay import WikiReplay, running_wiki
from research_tool.core.settings import Settings
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services
from tests.cli.conftest import QUESTION, cli_env, run_cli
from tests.cli.test_first_hour import LONG_A, LONG_B, make_sessions

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b\]8;[^\x1b]*\x1b\\")


@dataclass
class Terminal:
    """A process whose stdin, stdout and stderr are a pseudo-terminal of the given size."""

    proc: subprocess.Popen[bytes]
    master: int
    output: bytearray = field(default_factory=bytearray)

    @classmethod
    def spawn(cls, args: list[str], env: dict[str, str], columns: int = 100) -> Terminal:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        proc = subprocess.Popen(
            [sys.executable, "-m", "research_tool", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm-256color", "COLUMNS": str(columns)},
            start_new_session=True,
        )
        os.close(slave)
        return cls(proc, master)

    def read_some(self, timeout: float) -> bool:
        """Read what is there within `timeout`; False once the terminal is closed."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError as exc:  # EIO: every process holding the other end has exited
            if exc.errno == errno.EIO:
                return False
            raise
        self.output.extend(chunk)
        return bool(chunk)

    def text(self) -> str:
        return ANSI.sub("", self.output.decode("utf-8", "replace"))

    def wait_for(self, condition: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"gave up waiting; terminal shows: {self.text()[-1500:]!r}"
            assert self.read_some(0.1) or condition(), f"the process ended: {self.text()[-1500:]!r}"

    def finish(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.read_some(0.2):
            assert time.monotonic() < deadline, "the process did not end"
        os.close(self.master)
        return self.proc.wait(timeout=10)


@pytest.fixture
def wiki() -> Iterator[tuple[str, WikiReplay]]:
    with running_wiki(delay_s=0.25) as server:
        yield server


def phase_started(data: Path, session_id: str, phase: str, iteration: int) -> bool:
    try:
        with sqlite3.connect(data / "sessions.db", timeout=5) as conn:
            rows = conn.execute(
                "SELECT data FROM events WHERE session_id = ? AND type = 'phase_started' AND phase = ?",
                (session_id, phase),
            ).fetchall()
    except sqlite3.OperationalError:
        return False
    return any(json.loads(data).get("iteration") == iteration for (data,) in rows)


def stored_status(data: Path, session_id: str) -> str:
    with sqlite3.connect(data / "sessions.db", timeout=5) as conn:
        row = conn.execute("SELECT status FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return str(row[0])


@pytest.mark.slow
def test_live_line_then_ctrl_c_names_the_saved_session_which_resumes(
    tmp_path: Path, wiki: tuple[str, WikiReplay]
) -> None:
    url, _ = wiki
    data = tmp_path / "data"
    wiki_env = {"RESEARCH_WIKIPEDIA_BASE_URL": url, "RESEARCH_WIKIPEDIA_RPS": "100", "RESEARCH_MAX_QUERIES": "3"}
    env = cli_env(data, **wiki_env)
    sid = "ctrl-c-session"
    args = ["run", QUESTION, "--providers", "wikipedia", "--no-fetch", "--no-clarify", "--session-id", sid]
    term = Terminal.spawn(args, env)
    term.wait_for(lambda: phase_started(data, sid, "collect", 1))
    term.wait_for(lambda: "collect · cycle 1 ·" in term.text() and " sources · " in term.text())
    os.killpg(term.proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C: the foreground process group
    assert term.finish() == 130, term.text()[-2000:]

    shown = term.text()
    message = f"Interrupted: session {sid} is saved; resume it with `research-tool resume {sid}`."
    assert message in shown
    assert "resume ID" not in shown
    before = shown.split(message)[0]
    assert before.count("\n") <= 3, before  # one live line, not the event log
    assert "Found" not in before and "Research started" not in before
    assert stored_status(data, sid) == "interrupted"
    listed = run_cli(data, "sessions", "--json")
    assert [s["status"] for s in json.loads(listed.stdout)["sessions"]] == ["interrupted"]

    resumed = run_cli(data, "resume", sid[:6], "--format", "json", **wiki_env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    report = json.loads(resumed.stdout)
    assert report["status"] == "completed" and report["citations"]
    assert stored_status(data, sid) == "completed"


@pytest.mark.slow
def test_report_is_rendered_on_a_terminal_and_plain_in_a_pipe(tmp_path: Path, corpus: Path) -> None:
    args = ["run", QUESTION, "--corpus", str(corpus), "--providers", "local", "--no-fetch", "--tier", "simple"]
    piped = run_cli(tmp_path / "piped", *args)
    assert piped.returncode == 0, piped.stderr
    assert "## Answer" in piped.stdout and "[1]" in piped.stdout

    term = Terminal.spawn(args, cli_env(tmp_path / "tty"), columns=80)
    assert term.finish() == 0, term.text()[-2000:]
    shown = term.text()
    assert "Answer" in shown and "## Answer" not in shown  # rich renders the heading, no markdown syntax left
    assert "completed: " in shown
    # issue 34: the compact view, the answer on one screen; the rest is in the exported file, `show` and --full
    report = shown[shown.index("Answer") :]
    assert "bimetallic strip" in report and "Full report (" in report and "run with --full" in report
    assert "Key findings" not in report and "Saturation" not in report and "Metadata" not in report
    assert len(report.splitlines()) <= 24, report
    full = Terminal.spawn([*args, "--full"], cli_env(tmp_path / "full"), columns=80)
    assert full.finish() == 0, full.text()[-2000:]
    assert "Key findings" in full.text() and "Metadata" in full.text()


@pytest.mark.slow
async def test_sessions_table_keeps_unique_id_prefixes_whole_at_80_columns(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await make_sessions(data, {LONG_A: "failed", LONG_B: "failed"})
    term = Terminal.spawn(["sessions"], cli_env(data), columns=80)
    assert term.finish() == 0
    shown = term.text()
    assert LONG_A[:9] in shown and LONG_B[:9] in shown  # 8 characters are shared: 9 tell them apart
    shown_prefix = run_cli(data, "show", LONG_A[:9])
    assert f"session {LONG_A} has no report yet" in shown_prefix.stderr


async def test_ctrl_c_just_after_completion_prints_the_report_and_exits_0(
    tmp_path: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", llm="offline")  # type: ignore[call-arg]
    request = ResearchRequest(
        query=QUESTION, providers=["local"], corpus_dirs=[str(corpus)], fetch=False, clarify=False, tier="simple"
    )
    async with open_research_services(settings) as services:
        record = await services.runner.create(request)
        drive = asyncio.create_task(cli.drive_session(services, record.id, "md", None, after=0, verbose=True))
        async for event in services.events.follow(record.id, 0):
            if event.type == "session_completed":
                drive.cancel()  # what asyncio.run's SIGINT handler does to the main task on Ctrl-C
                break
        code = await drive
    assert code == 0
    out = capsys.readouterr().out
    assert "## Answer" in out and "[1]" in out


def clarification_events(data: Path) -> list[str]:
    with sqlite3.connect(data / "sessions.db", timeout=5) as conn:
        rows = conn.execute("SELECT type FROM events WHERE type LIKE 'clarification_%' ORDER BY seq").fetchall()
    return [str(r[0]) for r in rows]


PROMPT = re.compile(r"(?:^|[\r\n])\? ", re.MULTILINE)


@pytest.mark.slow
@pytest.mark.parametrize(
    "answer",
    [b"the programming language\n", b"the programming language " + b"x" * 3000 + b"\n"],
    ids=["short", "over-2000-characters"],
)
def test_clarifying_questions_are_asked_on_the_terminal_and_the_answers_used(
    tmp_path: Path, corpus: Path, answer: bytes
) -> None:
    """A terminal answer is kept within the rules every answer keeps (issue 45 item 6: one validator): one over
    2,000 characters is cut, not a failed run."""
    data = tmp_path / "data"
    args = ["run", "Python", "--corpus", str(corpus), "--providers", "local", "--no-fetch", "--tier", "simple"]
    term = Terminal.spawn(args, cli_env(data))
    term.wait_for(lambda: len(PROMPT.findall(term.text())) >= 1)
    answered = 0
    deadline = time.monotonic() + 60
    while term.proc.poll() is None and time.monotonic() < deadline:
        asked = len(PROMPT.findall(term.text()))
        if asked > answered:
            os.write(term.master, answer)
            answered += 1
        if not term.read_some(0.1):
            break
    assert term.finish() == 0, term.text()[-2000:]
    assert answered >= 1
    assert clarification_events(data) == ["clarification_requested", "clarification_received"]
    assert "completed: " in term.text()
