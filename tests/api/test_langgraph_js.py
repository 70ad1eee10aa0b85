"""The official JS client, `@langchain/langgraph-sdk` from npm, unmodified, in Node 20 against a live server:
`runs.stream` with several modes, `runs.create` + `runs.cancel` (wait, interrupt) + `runs.join`,
`threads.search`, and a 404, authenticated with the SDK's `x-api-key` (tests/langgraph_js/client.mjs).
Skips, saying why, when node or the npm package is absent (.ci/run installs it with `npm ci`)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from research_tool.bench.wiki_replay import WikiReplay

from .conftest import OK_BODY, LiveApi, offline_settings, serve

JS_DIR = Path(__file__).resolve().parent.parent / "langgraph_js"
PACKAGE = JS_DIR / "node_modules" / "@langchain" / "langgraph-sdk" / "package.json"
TOKEN = "js-client-token"
NODE_TIMEOUT_S = 120.0


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the JS client check needs Node 20")
    if not PACKAGE.exists():
        pytest.skip(f"@langchain/langgraph-sdk is not installed: run `npm ci` in {JS_DIR} (.ci/run does)")
    return node


@pytest.fixture
async def secured(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> AsyncIterator[LiveApi]:
    settings = offline_settings(tmp_path / "data", wiki[0], api_token=TOKEN)
    async with serve(settings, headers={"Authorization": f"Bearer {TOKEN}"}) as live:
        yield live


@pytest.mark.slow
async def test_the_js_client_streams_cancels_joins_and_searches(secured: LiveApi) -> None:
    node = node_or_skip()
    process = await asyncio.create_subprocess_exec(
        node,
        str(JS_DIR / "client.mjs"),
        secured.base_url,
        TOKEN,
        cwd=JS_DIR,
        env={"PATH": str(Path(node).parent), "RESEARCH_INPUT": json.dumps(OK_BODY), "NO_COLOR": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=NODE_TIMEOUT_S)
    assert process.returncode == 0, stderr.decode()[-3000:]
    result = json.loads(stdout)

    parts = result["parts"]
    events = [p["event"] for p in parts]
    assert events[0] == "metadata" and parts[0]["data"]["run_id"]
    assert {"values", "updates", "custom"} <= set(events)
    assert parts[-1]["event"] in ("values", "custom")
    final = [p["data"] for p in parts if p["event"] == "values"][-1]
    assert final["answer"] and final["citations"] and final["messages"][-1]["type"] == "ai"
    assert all(p["id"] for p in parts if p["event"] != "metadata")
    assert (await secured.status(result["streamedThread"]))["status"] == "completed"

    assert result["cancelledRun"]["status"] == "interrupted"
    assert result["joined"]["stop_reason"] == "user_requested"
    assert set(result["found"]) == {result["streamedThread"], result["cancelledThread"]}
    assert result["missing"] == "404"
