"""LangGraph custom auth (issue 44): RESEARCH_AUTH=`module.path:auth` (or `path/to/file.py:auth`), or the
`auth.path` of ./langgraph.json, names a `langgraph_sdk.Auth` object."""

from __future__ import annotations

from typing import Any

from research_tool.core.settings import Settings


def load_custom_auth(settings: Settings) -> Any:
    return None
