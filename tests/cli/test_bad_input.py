"""Bad input exits 2 with one clear line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from research_tool.cli import main


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


CASES = {
    "empty question": (["run", ""], "question is empty"),
    "whitespace question": (["run", "   \t "], "question is empty"),
    "question over 2000 characters": (["run", "x" * 2001], "longer than 2000"),
    "unknown tier": (["run", "q", "--tier", "huge"], "invalid choice"),
    "unknown domain": (["run", "q", "--domain", "astrology"], "invalid choice"),
    "unknown provider": (["run", "q", "--providers", "local,bing"], "unknown provider(s): bing"),
    "unknown format": (["run", "q", "--format", "docx"], "invalid choice"),
    "missing corpus folder": (["run", "q", "--corpus", "/nonexistent/folder"], "corpus folder not found"),
    "unknown session id (resume)": (["resume", "nope"], "unknown session id"),
    "unknown session id (show)": (["show", "nope"], "unknown session id"),
    "search without query": (["search", "--provider", "local"], "either a QUERY or --queries"),
    "worker without a database": (["worker"], "worker needs RESEARCH_DATABASE_URL"),
    "serve --no-worker without a database": (["serve", "--no-worker"], "serve --no-worker needs RESEARCH_DATABASE_URL"),
    "cloud provider under local_only": (
        ["run", "q", "--privacy", "local_only", "--providers", "wikipedia"],
        "privacy mode 'local_only' forbids",
    ),
}


@pytest.mark.parametrize(("argv", "expected"), CASES.values(), ids=list(CASES))
def test_bad_input_exits_2_with_one_line(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert expected in err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err


def test_real_process_exit_code_and_single_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "research_tool", "run", " "],
        capture_output=True,
        text=True,
        timeout=60,
        env={"RESEARCH_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["research-tool: error: invalid query: the question is empty"]
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("variable", "value", "missing", "expected"),
    [
        ("RESEARCH_REDIS_URL", "redis://127.0.0.1:1/0", "redis", "RESEARCH_REDIS_URL needs the 'redis' extra"),
        (
            "RESEARCH_DATABASE_URL",
            "postgresql://127.0.0.1:1/x",
            "psycopg",
            "RESEARCH_DATABASE_URL needs the 'postgres'",
        ),
    ],
)
def test_serve_without_the_extra_its_setting_needs_is_one_line(
    variable: str,
    value: str,
    missing: str,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from research_tool.core import extras

    monkeypatch.setenv(variable, value)
    monkeypatch.setattr(extras, "module_installed", lambda module: module.split(".")[0] != missing)
    code = main(["serve", "--port", "1"])  # refused before any server starts: nothing listens on port 1
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert expected in err
    assert len(err.splitlines()) == 1, err
