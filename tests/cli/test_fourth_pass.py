"""Issue 43, item 4 (small lies and cuts): `search`'s URL column keeps a file's name, `sessions` says why each
session stopped in words, and a session's phase boundaries are debug lines, not info."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from research_tool import cli
from research_tool.core.settings import Settings
from research_tool.demo_corpus import build_demo_corpus
from research_tool.graph.nodes import instrumentation
from research_tool.models.stop_reasons import STOP_LABELS, STOP_SHORT_LABELS
from tests.support.logs import LevelRecorder
from tests.support.sessions import local_request, run_session

TITLE = "subprocess.run — Run command with arguments and return a CompletedProcess instance."
URL = "file:///home/someone/projects/research-tool/data/demo_corpus/subprocess.run.txt"


def test_search_keeps_the_file_name_and_marks_every_cut() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, highlight=False, color_system=None)
    results = [{"title": TITLE, "url": URL, "published_date": None}]
    cli.print_results_table(results, console)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert any("subprocess.run.txt" in line for line in lines), lines  # the end of the URL, whole
    cells = " ".join(line.split("│")[2].strip() for line in lines if line.count("│") == 5)
    assert cells.endswith("…"), cells  # the title was cut, and says so
    assert "CompletedProces " not in cells + " "


def test_sessions_says_why_it_stopped_in_words() -> None:
    rows = [
        {"session_id": "a" * 32, "status": "completed", "stop_reason": "source_coverage",
         "created_at": "2026-01-01T10:00:00", "query": "How do I run a subprocess?"},
        {"session_id": "b" * 32, "status": "completed", "stop_reason": "max_iterations",
         "created_at": "2026-01-01T10:00:00", "query": "How do I run a subprocess?"},
    ]  # fmt: skip
    lines = [line.plain for line in cli.sessions_table(rows, {"a" * 32: "aaaaaaaa", "b" * 32: "bbbbbbbb"}, 80)]
    text = "\n".join(lines)
    assert "source_coverage" not in text and "max_iterations" not in text
    assert "saturated: no new queries" in text and "all cycles run" in text
    assert all(len(line) <= 80 for line in lines)
    assert set(STOP_SHORT_LABELS) == set(STOP_LABELS)


async def test_phase_boundaries_are_debug_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "corpus"
    build_demo_corpus(corpus, modules=("shlex",))
    settings = Settings(_env_file=None, data_dir=tmp_path / "data")  # type: ignore[call-arg]
    request = local_request(corpus, "How do I split a shell command line?", tier="simple", clarify=False)
    recorder = LevelRecorder()
    monkeypatch.setattr(instrumentation, "log", recorder)
    result = await run_session(settings, request)
    assert result.record.status == "completed", result.record.error
    phases = [(level, event) for level, event in recorder.calls if event in {"phase_started", "phase_completed"}]
    assert phases, "the session logged no phase boundaries at all"
    assert {level for level, _ in phases} == {"debug"}
