"""`research-tool mcp`: the MCP server on stdin/stdout, for an MCP client that starts it as a subprocess
(Claude Desktop, VS Code, ...). stdout carries the protocol only: logs and progress go to stderr.

The process owns the data dir while it runs, like `research-tool run`: its sessions run in it, and one that is
still running when the client closes the server is left `interrupted` (`research-tool resume ID` finishes it).
"""

from __future__ import annotations

from research_tool.api.mcp_server import build_mcp_server
from research_tool.core.logging import get_logger
from research_tool.core.settings import Settings
from research_tool.runtime.composition import open_research_services

log = get_logger(__name__)


async def serve_stdio(settings: Settings) -> None:
    async with open_research_services(settings) as services:
        server = build_mcp_server(lambda: services)
        log.info("mcp_stdio_started", data_dir=str(settings.data_dir))
        await server.run_stdio_async()
