"""The research graph: clarify (⇄ ask) → plan → collect → process → analyze → evaluate → (collect | synthesize)
→ export."""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, StateGraph
from langgraph.graph.state import CompiledStateGraph

from research_tool.graph.context import ResearchContext
from research_tool.graph.nodes.analyze import analyze_node
from research_tool.graph.nodes.clarify import ask_node, clarify_node, route_after_ask, route_after_clarify
from research_tool.graph.nodes.collect import collect_node
from research_tool.graph.nodes.evaluate import evaluate_node, route_after_evaluate
from research_tool.graph.nodes.export import export_node
from research_tool.graph.nodes.plan import plan_node
from research_tool.graph.nodes.process import process_node
from research_tool.graph.nodes.synthesize import synthesize_node
from research_tool.models.state import ResearchState

# Each cycle is 4 steps; the deepest tier allows 50 cycles by override; clarify and ask take up to 5 more.
RECURSION_LIMIT = 4 * 50 + 16


def build_graph() -> StateGraph[ResearchState, ResearchContext]:
    graph: StateGraph[ResearchState, ResearchContext] = StateGraph(ResearchState, context_schema=ResearchContext)
    graph.add_node("clarify", clarify_node)
    graph.add_node("ask", ask_node)
    graph.add_node("plan", plan_node)
    graph.add_node("collect", collect_node)
    graph.add_node("process", process_node)
    graph.add_node("analyze", analyze_node)
    graph.add_node("evaluate", evaluate_node)
    graph.add_node("synthesize", synthesize_node)
    graph.add_node("export", export_node)
    graph.set_entry_point("clarify")
    graph.add_conditional_edges("clarify", route_after_clarify, {"ask": "ask", "plan": "plan"})
    graph.add_conditional_edges("ask", route_after_ask, {"clarify": "clarify", "plan": "plan"})
    graph.add_edge("plan", "collect")
    graph.add_edge("collect", "process")
    graph.add_edge("process", "analyze")
    graph.add_edge("analyze", "evaluate")
    graph.add_conditional_edges("evaluate", route_after_evaluate, {"collect": "collect", "synthesize": "synthesize"})
    graph.add_edge("synthesize", "export")
    graph.add_edge("export", END)
    return graph


def compile_graph(checkpointer: BaseCheckpointSaver[str]) -> CompiledStateGraph[ResearchState, ResearchContext]:
    return build_graph().compile(checkpointer=checkpointer)
