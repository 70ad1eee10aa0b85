"""The research assistant's graph drawing and JSON schemas (GET /assistants/{id}/graph and /schemas)."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from research_tool.api.langgraph.bodies import GRAPH_ID
from research_tool.models.entities import Citation
from research_tool.models.report import Finding
from research_tool.models.request import ResearchRequest


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str | None = None
    role: str | None = None
    content: Any = None


class ResearchOptions(BaseModel):
    """The options of a research session (the run's context, or config.configurable)."""

    model_config = ConfigDict(extra="forbid")

    tier: Any = None
    domain: Any = None
    privacy_mode: Any = None
    providers: list[str] | None = None
    clarify: bool | None = None
    max_execution_time_s: float | None = None
    formats: list[str] | None = None
    fetch: bool | None = None
    corpus_dirs: list[str] | None = None
    max_iterations: int | None = None


class ResearchValues(BaseModel):
    """A research thread's values."""

    query: str
    status: str
    messages: list[ChatMessage] = Field(default_factory=list)
    answer: str | None = None
    short_answer: str | None = None
    answered: bool | None = None
    citations: list[Citation] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    stop_reason: str | None = None
    refined_query: str | None = None


@cache
def graph_schemas() -> dict[str, Any]:
    request = ResearchRequest.model_json_schema()
    input_schema = {
        "title": "ResearchInput",
        "type": "object",
        "description": "The fields of POST /api/research/start, or chat `messages` (the last user message is the "
        "question).",
        "properties": {
            **request.get("properties", {}),
            "messages": {"type": "array", "items": ChatMessage.model_json_schema()},
        },
        "$defs": request.get("$defs", {}),
    }
    options = ResearchOptions.model_json_schema()
    options["properties"] = {k: v for k, v in request["properties"].items() if k != "query"}
    options["$defs"] = request.get("$defs", {})
    values = ResearchValues.model_json_schema()
    return {
        "graph_id": GRAPH_ID,
        "input_schema": input_schema,
        "output_schema": values,
        "state_schema": values,
        "config_schema": options,
        "context_schema": options,
    }


def graph_json(graph: Any) -> dict[str, Any]:
    """Nodes and edges as langgraph-api draws them (ids and names only)."""
    drawable = graph.get_graph()
    nodes = [
        {"id": node.id, "type": "runnable", "data": {"id": [node.id], "name": node.name}}
        for node in drawable.nodes.values()
    ]
    edges = [
        {"source": e.source, "target": e.target, **({"conditional": True} if e.conditional else {})}
        for e in drawable.edges
    ]
    return {"nodes": nodes, "edges": edges}
