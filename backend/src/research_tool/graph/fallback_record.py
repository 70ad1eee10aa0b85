"""What the report says about the steps a model could not do (issue 14): `metadata.fallbacks`,
`degraded_mode` and `degraded_reason`, read from the error log the nodes keep; and about the searches that
failed (issue 24): `metadata.provider_failures`, named once in `degraded_reason` when most searches failed.

Every entry of the state's `error_log` is an engine step's recovered error, keyed `<step>:<iteration>:<i>`
(`extract:<iteration>:<url>:<i>` for extraction); an error whose type is a fallback reason is a step the
offline engine did instead of the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from research_tool.engines.base import FALLBACK_REASONS
from research_tool.graph.search_failures import failure_line, mostly_failed, provider_failures
from research_tool.models.report import ModelFallback

SEARCH_LIMITED = "search was limited"


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


def search_was_limited(search_limited: bool, provider_calls: Mapping[str, Mapping[str, Any]]) -> bool:
    """A whole cycle's searches failed (`search_limited`, the state's flag), or most of the session's did."""
    return search_limited or mostly_failed(provider_calls)


def fallback_metadata(
    error_log: dict[str, Any],
    *,
    search_limited: bool,
    provider_calls: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report metadata fields: `fallbacks`, `degraded_mode` (search limited, or the answer not written by
    the model), `degraded_reason` and `provider_failures`."""
    calls = provider_calls or {}
    fallbacks = fallbacks_from(error_log)
    failures = provider_failures(calls)
    reasons: list[str] = []
    if search_was_limited(search_limited, calls):
        failed = sum(f.failed for f in failures)
        detail = f"{failed} of {len(calls)} searches failed: {failure_line(failures)}" if failures else ""
        reasons.append(f"{SEARCH_LIMITED}, {detail}" if detail else f"{SEARCH_LIMITED}: the providers failed")
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
        "provider_failures": [f.model_dump() for f in failures],
    }
