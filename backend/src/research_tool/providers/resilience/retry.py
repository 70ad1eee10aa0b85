"""Retries with tenacity that never pass a deadline (DESIGN §4, §8: no 60 s waits past the session's end).

`deadline_retrying(...)` is an `AsyncRetrying` that
- retries only the retryable ProviderErrors (rate limit, timeout, 5xx) up to `max_attempts`,
- waits a capped, jittered exponential backoff (none after a rate limit: the provider's limiter
  already holds the next request for the server's Retry-After),
- stops as soon as the next wait would end at or after `deadline` (a time.monotonic() value).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from research_tool.core import telemetry
from research_tool.core.errors import (
    ProviderServerError,
    ProviderTimeoutError,
    RateLimitError,
)
from research_tool.core.logging import get_logger

log = get_logger(__name__)

RETRYABLE: tuple[type[Exception], ...] = (RateLimitError, ProviderTimeoutError, ProviderServerError)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    initial_wait_s: float = 0.5
    max_wait_s: float = 8.0
    jitter_s: float = 0.25


class stop_at_deadline(stop_base):
    """Stop when the coming wait would reach the deadline."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        upcoming = retry_state.upcoming_sleep or 0.0
        return time.monotonic() + upcoming >= self.deadline


class wait_unless_rate_limited(wait_base):
    """Backoff for timeouts and 5xx; no extra wait after a rate limit (the limiter holds the next call)."""

    def __init__(self, backoff: wait_base) -> None:
        self.backoff = backoff

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        if outcome is not None and isinstance(outcome.exception(), RateLimitError):
            return 0.0
        return float(self.backoff(retry_state))


def _log_retry(retry_state: RetryCallState) -> None:
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    wait_s = round(retry_state.upcoming_sleep or 0.0, 3)
    error = type(exc).__name__ if exc else None
    log.info("retrying", attempt=retry_state.attempt_number, wait_s=wait_s, error=error)
    # on the provider call's or page fetch's span (core/telemetry.py; nothing while tracing is off)
    telemetry.current().event(
        "retry", {"research.attempt": retry_state.attempt_number, "research.wait_s": wait_s, "error.type": error or ""}
    )


def deadline_retrying(
    deadline: float,
    policy: RetryPolicy | None = None,
    *,
    retry_on: tuple[type[Exception], ...] = RETRYABLE,
) -> AsyncRetrying:
    policy = policy or RetryPolicy()
    return AsyncRetrying(
        stop=stop_after_attempt(policy.max_attempts) | stop_at_deadline(deadline),
        wait=wait_unless_rate_limited(
            wait_exponential_jitter(multiplier=policy.initial_wait_s, max=policy.max_wait_s, jitter=policy.jitter_s)
        ),
        retry=retry_if_exception_type(retry_on),
        before_sleep=_log_retry,
        reraise=True,
    )
