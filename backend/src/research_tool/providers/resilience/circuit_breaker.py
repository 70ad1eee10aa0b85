"""Circuit breaker: stop calling a provider that keeps failing, probe it again later.

closed --(threshold consecutive failures, or one host-not-found)--> open --(reset timeout)--> half-open
half-open --(probe succeeds)--> closed;  half-open --(probe fails)--> open (timer restarts)

While half-open exactly one probe is in flight; other callers are refused as if open.

Written here rather than taken from pybreaker (its async support needs Tornado) or purgatory (a new
dependency for ~60 lines); this one also takes an injectable clock and a configurable timeout so
tests need not wait 60 s.

Across processes (RESEARCH_REDIS_URL): the registry hands every breaker a `SharedLimits`, and the gateway's
async steps (`admit`, `failed`, `succeeded`, `probe_ended`) then move one breaker kept in Redis for the whole
cluster (one probe cluster-wide when half-open); this object mirrors its last answer (`state`, `retry_in`) and
decides alone, from that mirror, while Redis is down (shared_limits.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from enum import StrEnum
from typing import TYPE_CHECKING

from research_tool.core.errors import CircuitOpenError, SharedLimitsUnavailableError
from research_tool.core.logging import get_logger

if TYPE_CHECKING:
    from research_tool.providers.resilience.shared_limits import BreakerReply, SharedLimits

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
        # the cluster-wide breaker (None: this process alone), set by the registry
        self.shared: SharedLimits | None = None

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

    def record_failure(self, *, threshold: int | None = None) -> None:
        """A breaker-relevant failure; the breaker opens at `threshold` consecutive ones (default: its own)."""
        with self._guard:
            self._consecutive_failures += 1
            probe_failed = self._state is CircuitState.HALF_OPEN
            if probe_failed or self._consecutive_failures >= (threshold or self.failure_threshold):
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

    # --- the gateway's steps: cluster-wide when shared, else the in-process ones above -------------------

    async def admit(self) -> bool:
        """`allow()` for the whole cluster: in half-open, one caller of all processes gets True."""
        reply = await self._shared_step("admit")
        return self.allow() if reply is None else reply.allowed

    async def failed(self) -> None:
        if await self._shared_step("failure") is None:
            self.record_failure()

    async def tripped(self) -> None:
        """A failure that no retry can cure (the host name does not resolve): open the breaker at once."""
        if await self._shared_step("failure", threshold=1) is None:
            self.record_failure(threshold=1)

    async def succeeded(self) -> None:
        if await self._shared_step("success") is None:
            self.record_success()

    def probe_ended(self) -> None:
        """`release_probe()` that needs no await (it runs in `finally` blocks of cancelled calls): the cluster's
        probe is released in the background, and only while half-open, so a call admitted while closed does not
        free another process's probe."""
        shared = self.shared
        if shared is not None and shared.available and self.state is CircuitState.HALF_OPEN:
            shared.in_background(self._shared_step("release"), "release_probe")
        self.release_probe()

    async def _shared_step(self, op: str, *, threshold: int | None = None) -> BreakerReply | None:
        """The cluster-wide breaker's answer to `op`, mirrored here; None without a cluster or while Redis is down."""
        shared = self.shared
        if shared is None or not shared.available:
            return None
        try:
            reply = await shared.breaker_step(
                self.name, op, threshold=threshold or self.failure_threshold, reset_timeout_s=self.reset_timeout_s
            )
        except SharedLimitsUnavailableError:
            return None
        self._mirror(reply)
        return reply

    def _mirror(self, reply: BreakerReply) -> None:
        state = CircuitState(reply.state)
        with self._guard:
            if state is not self._state:
                log.info("circuit_state_shared", breaker=self.name, state=str(state), was=str(self._state))
            self._state = state
            self._consecutive_failures = reply.consecutive_failures
            self._probe_in_flight = False
            if state is CircuitState.OPEN:
                self._opened_at = self._clock() - max(0.0, self.reset_timeout_s - reply.retry_in_s)


# The breaker of the provider call in progress (set by the gateway around `provider.search`).
CURRENT_BREAKER: ContextVar[CircuitBreaker | None] = ContextVar("current_breaker", default=None)


def refuse_if_opened() -> None:
    """Raise CircuitOpenError when the breaker of the provider call in progress is open. The rate limiter asks
    while a call waits for its turn: a call admitted while its breaker was closed is then refused without a
    request as soon as another call opens the breaker (a host not found), instead of waiting out the spacing."""
    breaker = CURRENT_BREAKER.get()
    if breaker is not None and breaker.state is CircuitState.OPEN:
        provider = breaker.name.partition("@")[0]
        raise CircuitOpenError(provider, f"circuit opened while waiting; retry in {breaker.retry_in():.0f} s")


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
        self.shared: SharedLimits | None = None

    def share_through(self, shared: SharedLimits | None) -> None:
        """Every breaker, existing and future, is one breaker for all processes through `shared`
        (None: this process's own again)."""
        with self._guard:
            self.shared = shared
            for breaker in self._breakers.values():
                breaker.shared = shared

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
                breaker.shared = self.shared
            return breaker

    def states(self) -> dict[str, CircuitState]:
        with self._guard:
            breakers = dict(self._breakers)
        return {name: breaker.state for name, breaker in breakers.items()}

    def clear(self) -> None:
        """Forget every breaker and the cluster link (a fresh registry, as tests start)."""
        with self._guard:
            self._breakers.clear()
            self.shared = None


CIRCUIT_BREAKERS = CircuitBreakerRegistry()
