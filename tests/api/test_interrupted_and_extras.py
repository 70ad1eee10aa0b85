"""Issue 11 at the API: a missing optional extra is a 400 at start naming the extra; a session cut off by a
shutdown is recorded as `interrupted` and the next server resumes it to completion."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import research_tool.core.extras as extras
from research_tool.bench.wiki_replay import WikiReplay
from tests.api.conftest import OK_BODY, SlowWiki, offline_settings, serve


async def test_a_model_engine_without_the_llm_extra_is_a_400_naming_it(
    tmp_path: Path, wiki: tuple[str, WikiReplay], monkeypatch: pytest.MonkeyPatch
) -> None:
    # What `pip install research-tool` (no [llm]) looks like: the LangChain integration cannot be imported.
    monkeypatch.setitem(extras.LLM_MODULES, "ollama", "research_tool_test_absent_module")
    settings = offline_settings(tmp_path / "data", wiki[0], llm="ollama:llama3.2")
    async with serve(settings) as live:
        response = await live.client.post("/api/research/start", json=OK_BODY)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["type"] == "missing_extra"
        assert "needs the 'llm' extra" in error["message"] and "pip install 'research-tool[llm]'" in error["message"]
        listed = await live.client.get("/api/research")
        assert listed.json()["total"] == 0  # nothing was created


def stored_status(data: Path, session_id: str) -> str:
    with sqlite3.connect(data / "sessions.db") as conn:
        row = conn.execute("SELECT status FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return str(row[0])


@pytest.mark.slow
async def test_a_session_cut_off_by_shutdown_is_interrupted_then_resumed(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    data = tmp_path / "data"
    with slow_wiki(0.3) as (url, _):
        settings = offline_settings(data, url, max_iters=2)
        async with serve(settings) as live:
            session_id = await live.start()
            await live.wait_event(session_id, "provider_search")
        assert stored_status(data, session_id) == "interrupted"

        async with serve(settings) as live:
            status = await live.wait_status(session_id, "completed", within_s=60)
            assert status["status"] == "completed"
            report = await live.report(session_id)
            assert report["citations"]
