"""export: write the report in every requested format under the data dir.

The report's `metadata.duration_s` is set here, just before writing: the session's whole wall time since it
started (every node and what ran between them), not a sum taken inside an earlier node."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from research_tool.graph.context import ResearchContext
from research_tool.graph.nodes.instrumentation import phase
from research_tool.graph.report_assembly import duration_s
from research_tool.models.report import Report
from research_tool.models.sessions import check_session_id
from research_tool.models.state import ResearchState
from research_tool.reporting.export import export_report


@phase("export")
async def export_node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
    ctx = runtime.context
    report = Report.model_validate(state["final_report"])
    report.metadata.duration_s = duration_s(state)
    # A checked plain name: "/tmp/x" or "../x" would otherwise put the files outside the data dir.
    out_dir = ctx.settings.data_dir / "exports" / check_session_id(state["session_id"])
    paths: dict[str, str] = {}
    for fmt in state["request"].get("formats") or ["md", "json"]:
        paths[fmt] = str(await export_report(report, fmt, out_dir))
    return {"export_paths": paths, "final_report": report.model_dump(mode="json")}
