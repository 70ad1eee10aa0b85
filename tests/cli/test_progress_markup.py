"""Source text in the CLI's progress lines is printed as text (issue 10 items 2 and 7): rich markup in a
title neither styles nor crashes the display (`[/bold]` raised MarkupError), and terminal control
characters (ESC sequences, BEL, NUL) never reach the terminal."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from research_tool.cli import ProgressDisplay, main
from research_tool.models.events import Event


def render_event(event: Event) -> str:
    """The line `--verbose` prints for one event."""
    out = io.StringIO()
    ProgressDisplay(Console(file=out, width=300, color_system=None), verbose=True).print_event(event)
    return out.getvalue()


@pytest.mark.parametrize(
    "title",
    ["Durian facts [/bold]", "[red]not red[/red]", "[link=http://evil.example]click[/link]", "a [/] b"],
)
def test_progress_line_prints_a_source_title_verbatim(title: str) -> None:
    lines = []
    for event_type in ("source_found", "provider_error", "session_completed"):
        event = Event(seq=7, session_id="s1", ts="t", type=event_type, phase="collect", message=f"Found: {title}")
        lines += render_event(event).splitlines()
    assert len(lines) == 3
    assert all(line.endswith(f"Found: {title}") for line in lines), lines


def test_progress_line_drops_terminal_control_characters() -> None:
    message = "Found: \x1b[2J\x1b]0;owned\x07title\x00 end"
    err = render_event(Event(seq=1, session_id="s1", ts="t", type="source_found", phase=None, message=message))
    assert "\x1b" not in err and "\x07" not in err and "\x00" not in err
    assert "title end" in err.replace("[2J]0;owned", "")


def test_search_table_prints_a_markup_title_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(tmp_path / "data"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "durian.md").write_text("# Durian facts [/bold]\n\nThe durian is a spiky fruit.\n", encoding="utf-8")
    code = main(["search", "durian", "--provider", "local", "--corpus", str(corpus)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Durian facts [/bold]" in captured.out
