"""What a new user hits first with the CLI (issue 11, item 5): `search` sees what `index` indexed, `sessions`
prints ids that can be copied and `show`/`resume`/`delete` take a unique prefix, an unfinished session with no
process running it is `interrupted`, a missing extra or a Ctrl-C before any session exists is one clear line,
and the light commands do not import the research machinery."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from research_tool.models.request import ResearchRequest
from research_tool.runtime.ownership import holding_data_dir
from research_tool.runtime.session_store import SessionStore
from research_tool.runtime.storage import open_database
from tests.cli.conftest import QUESTION, cli_env, run_cli


def test_search_local_searches_the_folders_index_indexed(tmp_path: Path, corpus: Path) -> None:
    data = tmp_path / "data"
    indexed = run_cli(data, "index", str(corpus))
    assert indexed.returncode == 0, indexed.stderr

    found = run_cli(data, "search", "--provider", "local", "bimetallic strip kettle", "--json")
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)
    assert results and "kettle.md" in results[0]["url"]


def test_search_local_with_no_folder_says_what_to_do(tmp_path: Path) -> None:
    done = run_cli(tmp_path / "data", "search", "--provider", "local", "kettle")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "research-tool: error: no local folder to search: index one with `research-tool index DIR` or pass --corpus DIR"
    ]


async def make_sessions(data: Path, rows: dict[str, str]) -> None:
    """Session rows as a killed process leaves them: id -> status."""
    conn = await open_database(data / "sessions.db")
    try:
        store = SessionStore(conn)
        for session_id, status in rows.items():
            await store.create(ResearchRequest(query=f"question of {session_id}"), session_id)
            await store.update(session_id, status=status)
    finally:
        await conn.close()


LONG_A = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
LONG_B = "a1b2c3d4ffff0718293a4b5c6d7e8f90"  # shares 8 characters with LONG_A
OTHER = "0123456789abcdef0123456789abcdef"


@pytest.mark.slow
async def test_sessions_in_a_pipe_prints_whole_ids_that_show_and_delete_accept_as_prefixes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await make_sessions(data, {LONG_A: "failed", LONG_B: "failed", OTHER: "failed"})

    listed = run_cli(data, "sessions")
    assert listed.returncode == 0, listed.stderr
    ids = [line.split("\t")[0] for line in listed.stdout.splitlines()]
    assert sorted(ids) == sorted([LONG_A, LONG_B, OTHER])  # whole ids, never cut at 80 columns

    shown = run_cli(data, "show", "0123")
    assert shown.returncode == 2
    assert f"session {OTHER} has no report yet (status failed)" in shown.stderr

    ambiguous = run_cli(data, "show", "a1b2c3d4")
    assert ambiguous.returncode == 2
    assert "ambiguous" in ambiguous.stderr and LONG_A in ambiguous.stderr and LONG_B in ambiguous.stderr

    unknown = run_cli(data, "show", "ffff")
    assert unknown.returncode == 2 and "unknown session id: ffff" in unknown.stderr

    deleted = run_cli(data, "delete", "a1b2c3d4e", "0123")
    assert deleted.returncode == 0, deleted.stderr
    left = json.loads(run_cli(data, "sessions", "--json").stdout)
    assert [s["session_id"] for s in left["sessions"]] == [LONG_B]


@pytest.mark.slow
async def test_an_unfinished_session_with_no_owner_is_interrupted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await make_sessions(data, {"killed-run": "running", "waiting": "awaiting_clarification", "done": "completed"})

    statuses = {
        s["session_id"]: s["status"] for s in json.loads(run_cli(data, "sessions", "--json").stdout)["sessions"]
    }
    assert statuses == {"killed-run": "interrupted", "waiting": "interrupted", "done": "completed"}
    show = run_cli(data, "show", "killed-run")
    assert show.returncode == 2
    assert "status interrupted" in show.stderr and "research-tool resume killed-run" in show.stderr

    async with holding_data_dir(data):  # a live process owns the data dir: its rows are what they say
        owned = json.loads(run_cli(data, "sessions", "--json").stdout)["sessions"]
    assert {s["session_id"]: s["status"] for s in owned}["killed-run"] == "running"


def imported_modules(data: Path, *args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "research_tool", *args],
        env=cli_env(data),
        capture_output=True,
        text=True,
        timeout=60,
    )
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


HEAVY = ("langgraph", "langchain_core", "trafilatura", "research_tool.graph", "research_tool.engines", "httpx")


async def test_sessions_and_show_do_not_import_the_research_machinery(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await make_sessions(data, {OTHER: "failed"})
    for args in (("sessions",), ("show", "0123")):
        names = imported_modules(data, *args)
        assert "research_tool.cli" in names
        heavy = sorted(n for n in names if n.split(".")[0] in HEAVY or n.startswith(HEAVY))
        assert heavy == [], f"{args[0]} imported {heavy[:5]}"


def run_driver(data: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=cli_env(data, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_ctrl_c_before_a_session_exists_says_nothing_was_saved(tmp_path: Path, corpus: Path) -> None:
    data = tmp_path / "data"
    # SIGINT arrives while the research services open, before any session row is written
    done = run_driver(
        data,
        f"""
        import os, signal, asyncio
        from contextlib import asynccontextmanager
        import research_tool.runtime.composition as composition

        @asynccontextmanager
        async def interrupted_while_opening(settings, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.Event().wait()
            yield

        composition.open_research_services = interrupted_while_opening
        from research_tool.cli import main
        raise SystemExit(main(["run", {QUESTION!r}, "--corpus", {str(corpus)!r}, "--providers", "local"]))
        """,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == ["Interrupted before a session was created; nothing was saved."]
    assert "resume" not in done.stderr


@pytest.mark.slow
def test_a_missing_llm_extra_is_one_line_and_exit_2(tmp_path: Path, corpus: Path) -> None:
    # The package installed without its `llm` extra: the LangChain integration cannot be imported.
    done = run_driver(
        tmp_path / "data",
        f"""
        import research_tool.core.extras as extras
        extras.LLM_MODULES["ollama"] = "research_tool_test_absent_module"
        from research_tool.cli import main
        raise SystemExit(main(["run", {QUESTION!r}, "--corpus", {str(corpus)!r}, "--providers", "local"]))
        """,
        RESEARCH_LLM="ollama:llama3.2",
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "RESEARCH_LLM=ollama:llama3.2 needs the 'llm' extra" in lines[0]
    assert "pip install 'research-tool[llm]'" in lines[0]
