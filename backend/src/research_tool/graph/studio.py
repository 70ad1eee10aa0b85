"""The research graph as `langgraph.json` names it for LangGraph's own tooling (`langgraph dev`, Studio): the
StateGraph compiled without a checkpointer (that server brings its own persistence).

It loads and draws there; a run needs the ResearchContext this project's server builds for each session
(engine, search gateway, event sink), which `langgraph dev` does not: point LangGraph clients and Studio at
`research-tool serve`, which speaks the same protocol over durable sessions (docs/langgraph.md)."""

from __future__ import annotations

from research_tool.graph.graph import build_graph

graph = build_graph().compile()
