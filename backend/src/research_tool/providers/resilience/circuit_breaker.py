"""Circuit breaker: stop calling a provider that keeps failing, probe it again later.

closed --(threshold consecutive failures)--> open --(reset timeout)--> half-open
half-open --(probe succeeds)--> closed;  half-open --(probe fails)--> open (timer restarts)

While half-open exactly one probe is in flight; other callers are refused as if open.

Written here rather than taken from pybreaker (its async support needs Tornado) or purgatory (a new
dependency for ~60 lines); this one also takes an injectable clock and a configurable timeout so
tests need not wait 60 s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from enum import StrEnum

from research_tool.core.logging import get_logger

log = get_logger(__name__)

DEFAULT_FAILURE_THRESHOLD = 5
DEFAULT_RESET_TIMEOUT_S = 60.0


class CircuitState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        *,
        failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
        reset_timeout_s: float = DEFAULT_RESET_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.failure_threshold = failure_threshold
        self.reset_timeout_s = reset_timeout_s
        self._clock = clock
        self._state = CircuitState.CLOSED
        self._consecutive_failures = 0
        self._opened_at = 0.0
        self._probe_in_flight = False
        self._guard = threading.Lock()

    @property
    def state(self) -> CircuitState:
        with self._guard:
            self._advance()
            return self._state

    def retry_in(self) -> float:
        """Seconds until an open breaker lets a probe through (0 when not open)."""
        with self._guard:
            if self._state is not CircuitState.OPEN:
                return 0.0
            return max(0.0, self._opened_at + self.reset_timeout_s - self._clock())

    def _advance(self) -> None:
        if self._state is CircuitState.OPEN and self._clock() - self._opened_at >= self.reset_timeout_s:
            self._state = CircuitState.HALF_OPEN
            self._probe_in_flight = False
            log.info("circuit_half_open", breaker=self.name)

    def allow(self) -> bool:
        """May a call go through now? In half-open, only the first caller (the probe) gets True."""
        with self._guard:
            self._advance()
            if self._state is CircuitState.CLOSED:
                return True
            if self._state is CircuitState.HALF_OPEN and not self._probe_in_flight:
                self._probe_in_flight = True
                return True
            return False

    def record_success(self) -> None:
        with self._guard:
            if self._state is not CircuitState.CLOSED:
                log.info("circuit_closed", breaker=self.name)
            self._state = CircuitState.CLOSED
            self._consecutive_failures = 0
            self._probe_in_flight = False

    def record_failure(self) -> None:
        with self._guard:
            self._consecutive_failures += 1
            probe_failed = self._state is CircuitState.HALF_OPEN
            if probe_failed or self._consecutive_failures >= self.failure_threshold:
                if self._state is not CircuitState.OPEN:
                    log.warning(
                        "circuit_opened",
                        breaker=self.name,
                        consecutive_failures=self._consecutive_failures,
                        reset_timeout_s=self.reset_timeout_s,
                    )
                self._state = CircuitState.OPEN
                self._opened_at = self._clock()
                self._probe_in_flight = False

    def release_probe(self) -> None:
        """A half-open probe ended with neither success nor a breaker-relevant failure."""
        with self._guard:
            self._probe_in_flight = False


class CircuitBreakerRegistry:
    """One breaker per provider; the process-wide instance is shared by every session. `clock` (seconds,
    monotonic) is every breaker's clock: tests move it instead of waiting out the reset timeout."""

    def __init__(
        self,
        *,
        failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
        reset_timeout_s: float = DEFAULT_RESET_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failure_threshold = failure_threshold
        self.reset_timeout_s = reset_timeout_s
        self.clock = clock
        self._breakers: dict[str, CircuitBreaker] = {}
        self._guard = threading.Lock()

    def get(self, name: str) -> CircuitBreaker:
        with self._guard:
            breaker = self._breakers.get(name)
            if breaker is None:
                breaker = self._breakers[name] = CircuitBreaker(
                    name,
                    failure_threshold=self.failure_threshold,
                    reset_timeout_s=self.reset_timeout_s,
                    clock=self.clock,
                )
            return breaker

    def states(self) -> dict[str, CircuitState]:
        with self._guard:
            breakers = dict(self._breakers)
        return {name: breaker.state for name, breaker in breakers.items()}

    def clear(self) -> None:
        with self._guard:
            self._breakers.clear()


CIRCUIT_BREAKERS = CircuitBreakerRegistry()
