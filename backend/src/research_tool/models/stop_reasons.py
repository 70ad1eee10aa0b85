"""One wording of why a session stopped, for every place that says it: the CLI's last line, the md and html
header, the page, the events and the answer's note (issue 34). The report JSON keeps the `stop_reason` code.

A stop "cost the answer something" only when a limit cut research short (time, budgets, the tier's cycles, the
user's stop) and the sources found did not answer the question; saturation and `sufficient` never did. Only then
does the answer carry a note saying research stopped early.
"""

from __future__ import annotations

STOP_LABELS: dict[str, str] = {
    "sufficient": "the question's required information was found",
    "fact_saturation": "saturated: the last cycle added almost no new facts",
    "entity_saturation": "saturated: the last cycle added almost no new entities",
    "source_coverage": "saturated: no unexplored query was left",
    "citation_circularity": "saturated: searches kept returning sources already read",
    "max_iterations": "the tier's research cycles were all run",
    "max_execution_time": "the time limit was reached",
    "provider_call_budget": "the provider-call budget was spent",
    "token_budget": "the token budget was spent",
    "user_requested": "stopped at the user's request",
    "all_providers_failed": "every search provider failed",
}

# The same reasons in a few words, for the `sessions` table's column (issue 43: it printed the codes).
STOP_SHORT_LABELS: dict[str, str] = {
    "sufficient": "answer found",
    "fact_saturation": "saturated: no new facts",
    "entity_saturation": "saturated: no new entities",
    "source_coverage": "saturated: no new queries",
    "citation_circularity": "saturated: same sources",
    "max_iterations": "all cycles run",
    "max_execution_time": "time limit reached",
    "provider_call_budget": "call budget spent",
    "token_budget": "token budget spent",
    "user_requested": "stopped by the user",
    "all_providers_failed": "every provider failed",
}

# Limits that end research whether or not it had saturated: a stop by one of them may have cost the answer.
LIMIT_STOPS = frozenset(
    {"max_iterations", "max_execution_time", "provider_call_budget", "token_budget", "user_requested"}
)


def stop_label(stop_reason: str | None) -> str:
    """`the tier's research cycles were all run` for `max_iterations`; an unknown code with its `_` as spaces."""
    if not stop_reason:
        return ""
    return STOP_LABELS.get(stop_reason, stop_reason.replace("_", " "))


def stop_short_label(stop_reason: str | None) -> str:
    """`all cycles run` for `max_iterations`: the reason in a few words; an unknown code with its `_` as spaces."""
    if not stop_reason:
        return ""
    return STOP_SHORT_LABELS.get(stop_reason, stop_reason.replace("_", " "))


def stopped_early_note(stop_reason: str | None, *, answered: bool) -> str | None:
    """The answer's note when stopping cost the answer something, else None."""
    if stop_reason not in LIMIT_STOPS or answered:
        return None
    return (
        f"_Research stopped early ({stop_label(stop_reason)}) before the sources answered the question; "
        "a deeper tier or a longer time limit may find more._"
    )
