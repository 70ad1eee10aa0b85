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
from research_tool.graph.search_failures import failure_line, mostly_failed, only_cut_off, provider_failures
from research_tool.models.report import ModelFallback, ProviderFailure

SEARCH_LIMITED = "search was limited"
PRE_SEARCH_STEPS = ("clarify", "apply_answers", "plan")
SLOW_MODEL_REASONS = frozenset({"session_deadline", "model_timeout"})


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


def slow_model_line(
    fallbacks: list[ModelFallback], phase_seconds: Mapping[str, float] | None, time_limit_s: float | None
) -> str | None:
    """`the model took 22 s of 30 for clarifying and planning` when a step before the search ran out of time."""
    if not phase_seconds or not time_limit_s:
        return None
    if not any(f.step in PRE_SEARCH_STEPS and f.reason in SLOW_MODEL_REASONS for f in fallbacks):
        return None
    used = sum(float(phase_seconds.get(f"{name}:0", 0.0)) for name in ("clarify", "plan"))
    return f"the model took {used:.0f} s of {time_limit_s:.0f} for clarifying and planning"


def _search_line(failures: list[ProviderFailure], calls: Mapping[str, Mapping[str, Any]]) -> str:
    failed = sum(f.failed for f in failures)
    if only_cut_off(failures):
        return f"{SEARCH_LIMITED}: the session's time ran out before {failed} of {len(calls)} searches finished"
    detail = f"{failed} of {len(calls)} searches failed: {failure_line(failures)}" if failures else ""
    return f"{SEARCH_LIMITED}, {detail}" if detail else f"{SEARCH_LIMITED}: the providers failed"


def fallback_metadata(
    error_log: dict[str, Any],
    *,
    search_limited: bool,
    provider_calls: Mapping[str, Mapping[str, Any]] | None = None,
    phase_seconds: Mapping[str, float] | None = None,
    time_limit_s: float | None = None,
) -> dict[str, Any]:
    """The report metadata fields: `fallbacks`, `degraded_mode` (search limited, or the answer not written by
    the model), `degraded_reason` and `provider_failures`. With the nodes' times (`phase_seconds`, the state's
    `elapsed`) and the time limit, a model that ran out of time before the search is named first (issue 35):
    "the model took 22 s of 30 for clarifying and planning", and searches the time limit cut off are not
    blamed on the providers."""
    calls = provider_calls or {}
    fallbacks = fallbacks_from(error_log)
    failures = provider_failures(calls)
    reasons: list[str] = []
    if search_was_limited(search_limited, calls):
        reasons.append(_search_line(failures, calls))
    answer = [f for f in fallbacks if f.step == "synthesize"]
    if answer:
        reasons.append(f"the model did not write the answer ({answer[-1].reason}); the offline engine did")
    others = sorted({f.step for f in fallbacks if f.step != "synthesize"})
    if others and reasons:
        reasons.append(f"the offline engine also did {', '.join(others)}")
    slow = slow_model_line(fallbacks, phase_seconds, time_limit_s)
    if slow and reasons:
        reasons.insert(0, slow)
    reason = "; ".join(reasons)
    return {
        "degraded_mode": bool(reasons),
        "degraded_reason": reason[:1].upper() + reason[1:] + "." if reason else None,
        "fallbacks": [f.model_dump() for f in fallbacks],
        "provider_failures": [f.model_dump() for f in failures],
    }
