"""The folder `research-tool index` indexed is the `local` provider's folder for the server (issue 24, item 1):
GET /api/providers says local is available, a session with `local` (or a `corpus_dirs` naming that folder) cites
its documents, and MCP's research tool does the same, all with no RESEARCH_CORPUS_DIRS."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from research_tool.providers.local_corpus.index import CorpusIndex
from research_tool.providers.local_corpus.indexed_folders import remember_folder
from research_tool.providers.search.local import INDEX_FILE

from .conftest import offline_settings, serve

pytestmark = pytest.mark.slow
QUESTION = "How does an electric kettle know when to switch off?"


async def indexed(tmp_path: Path) -> tuple[Path, Path]:
    """A data dir with one folder indexed, as `research-tool index FOLDER` leaves it."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "kettle.md").write_text(
        "# Electric kettles\n\nA bimetallic strip switches the kettle off when the steam reaches it.\n"
    )
    data = tmp_path / "data"
    data.mkdir()
    await CorpusIndex(data / INDEX_FILE).index_folder(folder)
    remember_folder(data, folder)
    return data, folder


async def test_the_server_and_mcp_search_the_indexed_folder(tmp_path: Path) -> None:
    data, folder = await indexed(tmp_path)
    async with serve(offline_settings(data)) as api:
        rows = {r["name"]: r for r in (await api.client.get("/api/providers")).json()["providers"]}
        assert rows["local"]["available"] is True

        for extra in ({}, {"corpus_dirs": [str(folder)]}):
            started = await api.client.post(
                "/api/research/start",
                json={"query": QUESTION, "providers": ["local"], "tier": "simple", "clarify": False, **extra},
            )
            assert started.status_code == 202, started.text
            session_id = started.json()["session_id"]
            await api.wait_status(session_id, "completed")
            report = (await api.client.get(f"/api/research/{session_id}/report")).json()
            assert any("kettle.md" in c["url"] for c in report["citations"])

        http = create_mcp_http_client()
        async with http, Client(streamable_http_client(f"{api.base_url}/mcp", http_client=http)) as client:
            result = await client.call_tool("research", {"query": QUESTION, "providers": ["local"], "tier": "simple"})
            assert not result.is_error
            assert result.structured_content is not None
            citations = result.structured_content["report"]["citations"]
            assert any("kettle.md" in c["url"] for c in citations)
