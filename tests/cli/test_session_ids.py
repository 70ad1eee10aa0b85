"""Session ids are plain names everywhere (issue 10 item 7): the CLI refuses `--session-id /tmp/x` (it used
to write the exports there), the store refuses to create one, and the API refuses one in a path."""

from __future__ import annotations

from pathlib import Path

import aiosqlite
import pytest

from research_tool.cli import main
from research_tool.core.errors import BadInputError
from research_tool.models.request import ResearchRequest
from research_tool.runtime.session_store import SessionStore
from research_tool.runtime.storage import SCHEMA

BAD_IDS = ["/tmp/x", "../x", "a/b", "a.b", ".hidden", "-flag", "x" * 65, "", "sp ace", "nul\x00"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_cli_refuses_an_unsafe_session_id(
    bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(tmp_path / "data"))
    outside = tmp_path / "outside"
    argv = ["run", "What is SQLite?", "--providers", "wikipedia", "--no-fetch", "--no-clarify"]
    argv += [f"--session-id={bad.replace('/tmp/x', str(outside))}"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "invalid session id" in err and len(err.splitlines()) == 1
    assert not outside.exists()


async def test_store_refuses_an_unsafe_session_id(tmp_path: Path) -> None:
    async with aiosqlite.connect(tmp_path / "sessions.db") as conn:
        conn.row_factory = aiosqlite.Row
        await conn.executescript(SCHEMA)
        store = SessionStore(conn)
        for bad in BAD_IDS:
            with pytest.raises(BadInputError, match="invalid session id"):
                await store.create(ResearchRequest(query="What is SQLite?"), bad)
        record = await store.create(ResearchRequest(query="What is SQLite?"), "my-session_1")
        assert record.id == "my-session_1"
