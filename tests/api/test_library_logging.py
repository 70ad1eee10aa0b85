"""The server does not format a log record per provider request: the MCP SDK's rich handler on the root
logger renders warnings only, and httpx's per-request INFO lines are off."""

from __future__ import annotations

import logging
from pathlib import Path

from research_tool.api.app import create_app
from research_tool.core.settings import Settings


def test_library_request_logs_are_off_after_the_app_is_built(tmp_path: Path) -> None:
    create_app(Settings(_env_file=None, data_dir=tmp_path / "data", llm="offline"))
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    assert not logging.getLogger("httpcore").isEnabledFor(logging.INFO)
    assert logging.getLogger("httpx").isEnabledFor(logging.WARNING)
