"""Building the MCP server leaves the standard library's logging at warnings: the SDK configures the root
logger in its constructor, and at its default (INFO) the server printed every provider request httpx made,
rendered through rich on the event loop (issue 10, item 13: rich's caches grew with the URLs)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from research_tool.api.mcp_server import build_mcp_server
from research_tool.core.errors import ResearchToolError


@contextmanager
def bare_root_logger() -> Iterator[None]:
    """The root logger as a fresh process has it (no handlers, so basicConfig acts); restored after.
    Inside the test body: pytest adds its capture handlers to the root logger for each test phase."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


def _no_services() -> NoReturn:
    raise ResearchToolError("not started")


def test_provider_requests_are_not_logged_at_info() -> None:
    with bare_root_logger():
        build_mcp_server(_no_services)
        assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
        assert logging.getLogger("httpx").isEnabledFor(logging.WARNING)
