"""What the report says about failed searches (issue 24): which providers failed, how often and why, and
whether the session's search was limited enough to call the report degraded.

Read from the state's `provider_calls` (one record per provider search, with its `error_type`). Search is
limited when a whole cycle failed (the collect node's `degraded_mode`) or when most searches failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from research_tool.models.report import ProviderFailure

# How each error type reads in the report's one line.
REASON_WORDS = {
    "dns": "host not found (DNS)",
    "timeout": "timed out",
    "session_deadline": "cut off by the session's time limit",
    "rate_limited": "rate-limited (429)",
    "circuit_open": "circuit open",
    "server_error": "server error or connection failed",
    "access_denied": "access denied",
    "bad_response": "unreadable answer",
    "provider_unavailable": "not available",
}


def provider_failures(calls: Mapping[str, Mapping[str, Any]]) -> list[ProviderFailure]:
    """Every provider with at least one failed search, in the order of their first call."""
    totals: dict[str, int] = {}
    reasons: dict[str, dict[str, int]] = {}
    for call in calls.values():
        provider = str(call.get("provider") or "")
        totals[provider] = totals.get(provider, 0) + 1
        if not call.get("ok", True):
            kind = str(call.get("error_type") or "provider_error")
            counts = reasons.setdefault(provider, {})
            counts[kind] = counts.get(kind, 0) + 1
    return [
        ProviderFailure(
            provider=name,
            calls=totals[name],
            failed=sum(counts.values()),
            # the cause first: an open circuit is the consequence of the failures before it
            reasons=dict(sorted(counts.items(), key=lambda kv: (kv[0] == "circuit_open", -kv[1]))),
        )
        for name, counts in reasons.items()
    ]


def only_cut_off(failures: list[ProviderFailure]) -> bool:
    """Every failed search was cut off by the session's time limit: the providers did nothing wrong."""
    return bool(failures) and all(set(f.reasons) == {"session_deadline"} for f in failures)


def mostly_failed(calls: Mapping[str, Mapping[str, Any]]) -> bool:
    """More than half of the session's searches failed."""
    failed = sum(1 for call in calls.values() if not call.get("ok", True))
    return failed * 2 > len(calls) > 0


def failure_line(failures: list[ProviderFailure]) -> str:
    """`duckduckgo: 4 of 4 searches failed (host not found (DNS) 1, circuit open 3); wikipedia: ...`."""
    parts = []
    for failure in failures:
        why = ", ".join(f"{REASON_WORDS.get(kind, kind.replace('_', ' '))} {n}" for kind, n in failure.reasons.items())
        parts.append(f"{failure.provider}: {failure.failed} of {failure.calls} searches failed ({why})")
    return "; ".join(parts)


# Error types that mean the provider could not be reached at all (offline: every web provider)
UNREACHABLE_ERRORS = frozenset({"dns", "timeout", "circuit_open", "server_error"})


def unreachable_providers(calls: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Providers every search of which failed for want of a connection, in the order of their first call."""
    return [
        f.provider for f in provider_failures(calls) if f.failed == f.calls and set(f.reasons) <= UNREACHABLE_ERRORS
    ]
