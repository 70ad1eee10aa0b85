"""The report as JSON: exactly the report model (DESIGN §7), minus control characters in strings."""

from __future__ import annotations

import json
from typing import Any

from research_tool.models.report import Report
from research_tool.reporting.text import clean_text


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value


def render_json(report: Report) -> str:
    return json.dumps(_cleaned(report.model_dump(mode="json")), indent=2, ensure_ascii=False) + "\n"
