"""The CLI's rough edges a newcomer met (issue 24, item 3): a closed pipe is no error, every option's help says
what it does and its default and every command's help ends with an example, `sessions` keeps the status and
stop reason whole at 80 columns, and a file given where a folder belongs is called "not a folder"."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from research_tool import cli
from tests.cli.conftest import cli_env
from tests.cli.test_first_hour import make_sessions


def write_to_closed_pipe(data: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI with stdout a pipe whose reader has already gone (what `| head -1` or `| true` leave)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "research_tool", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=cli_env(data),
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)


async def test_a_closed_pipe_is_no_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await make_sessions(data, {f"session-{n:02d}": "completed" for n in range(30)})
    for args in (["sessions"], ["run", "--help"]):
        done = write_to_closed_pipe(data, *args)
        assert (done.returncode, done.stderr.decode()) == (0, ""), args


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices)


def test_every_option_says_what_it_does_and_its_default() -> None:
    missing = []
    for name, parser in subcommands().items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            text = action.help or ""
            optional = bool(action.option_strings)
            if not text or (optional and not action.required and "default" not in text):
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}: {text!r}")
    assert missing == []
    assert len(subcommands()) >= 12


def test_every_commands_help_ends_with_an_example() -> None:
    for name, parser in subcommands().items():
        shown = parser.format_help().rstrip().splitlines()
        assert shown[-2] == "example:", name
        assert "research-tool" in shown[-1] and name in shown[-1].split(), name
    run_help = subcommands()["run"].format_help()
    for option in ("--tier", "--privacy", "--no-fetch", "--max-time", "--format", "--out", "--session-id"):
        assert option in run_help


def test_sessions_keeps_status_and_stop_reason_whole_at_80_columns() -> None:
    question = "How do I run a subprocess with a timeout in Python and capture its output without blocking?"
    rows = [
        {"session_id": "a" * 32, "status": "awaiting_clarification", "stop_reason": None, "query": question},
        {"session_id": "b" * 32, "status": "completed", "stop_reason": "citation_circularity", "query": question},
        {"session_id": "c" * 32, "status": "interrupted", "stop_reason": "max_execution_time", "query": "short"},
    ]
    for row in rows:
        row["created_at"] = "2026-11-26T10:03:16+00:00"
    short = {r["session_id"]: r["session_id"][:8] for r in rows}
    out = io.StringIO()
    console = Console(file=out, width=80, soft_wrap=True)
    for line in cli.sessions_table(rows, short, 80):
        console.print(line)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split() == ["id", "status", "stop", "reason", "created", "question"]
    assert "awaiting_clarification" in lines[1] and "How do" in lines[1] and lines[1].endswith("…")
    assert "completed" in lines[2] and "saturated: same sources" in lines[2]  # the stop reason in words
    assert "interrupted" in lines[3] and "time limit reached" in lines[3] and lines[3].rstrip().endswith("short")


@pytest.mark.parametrize(
    "args",
    [
        ["index", "{file}"],
        ["run", "What boils water?", "--corpus", "{file}", "--providers", "local"],
        ["search", "--provider", "local", "kettle", "--corpus", "{file}"],
    ],
)
def test_a_file_where_a_folder_belongs_is_not_a_folder(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(tmp_path / "data"))
    document = tmp_path / "notes.md"
    document.write_text("# Notes\n\nA kettle boils water.", encoding="utf-8")
    code = cli.main([a.format(file=document) for a in args])
    assert code == 2
    assert capsys.readouterr().err.strip() == f"research-tool: error: not a folder: {document}"


def test_a_missing_folder_is_still_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(tmp_path / "data"))
    assert cli.main(["index", str(tmp_path / "nowhere")]) == 2
    assert "folder not found" in capsys.readouterr().err
