"""What the report says about the steps a model could not do (issue 14): `metadata.fallbacks`,
`degraded_mode` and `degraded_reason`, read from the error log the nodes keep.

Every entry of the state's `error_log` is an engine step's recovered error, keyed `<step>:<iteration>:<i>`
(`extract:<iteration>:<url>:<i>` for extraction); an error whose type is a fallback reason is a step the
offline engine did instead of the model.
"""

from __future__ import annotations

from typing import Any

from research_tool.engines.base import FALLBACK_REASONS
from research_tool.models.report import ModelFallback

SEARCH_LIMITED = "search was limited: the providers failed"


def _fallback(key: str, entry: dict[str, Any]) -> ModelFallback | None:
    error = entry.get("error") or {}
    reason = str(error.get("type") or "")
    if reason not in FALLBACK_REASONS:
        return None
    step, _, rest = key.partition(":")
    iteration, _, rest = rest.partition(":")
    source = rest.rpartition(":")[0] if step == "extract" else None
    return ModelFallback(
        step=step,
        iteration=int(iteration) if iteration.isdigit() else 0,
        source=source or None,
        reason=reason,
        message=str(error.get("message") or ""),
    )


def fallbacks_from(error_log: dict[str, Any]) -> list[ModelFallback]:
    """Every step done offline instead of by the model, in the order they were recorded."""
    found = (_fallback(key, entry) for key, entry in error_log.items() if isinstance(entry, dict))
    return [f for f in found if f is not None]


def fallback_metadata(error_log: dict[str, Any], *, search_limited: bool) -> dict[str, Any]:
    """The report metadata fields: `fallbacks`, `degraded_mode` (search limited, or the answer not written by
    the model) and `degraded_reason`."""
    fallbacks = fallbacks_from(error_log)
    reasons: list[str] = []
    if search_limited:
        reasons.append(SEARCH_LIMITED)
    answer = [f for f in fallbacks if f.step == "synthesize"]
    if answer:
        reasons.append(f"the model did not write the answer ({answer[-1].reason}); the offline engine did")
    others = sorted({f.step for f in fallbacks if f.step != "synthesize"})
    if others and reasons:
        reasons.append(f"the offline engine also did {', '.join(others)}")
    reason = "; ".join(reasons)
    return {
        "degraded_mode": bool(reasons),
        "degraded_reason": reason[:1].upper() + reason[1:] + "." if reason else None,
        "fallbacks": [f.model_dump() for f in fallbacks],
    }
